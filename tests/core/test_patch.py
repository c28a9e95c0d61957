import copy
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import context, fixture, parsed, review_of
from tests.translation_cases import SOURCES, TARGETS
from webhook.core.deciding import pipeline
from webhook.core.rewriting import patch as patching
from webhook.core.rewriting.patch import PatchError, apply, diff_mutation


def pod(name="pod-create-gpu-limit-1.json"):
    return fixture(name)["request"]["object"]


def check(original, mutate):
    """The patch turns the original into exactly the edited pod, and re-running the edit adds nothing."""
    expected = copy.deepcopy(original)
    mutate(expected)
    ops = diff_mutation(original, mutate)
    patched = apply(original, ops)
    assert patched == expected
    # Idempotent: the same edit on its own output changes nothing.
    assert diff_mutation(patched, mutate) == []
    return ops


def add_label(doc):
    doc["metadata"].setdefault("labels", {})["gpuport.io/translated"] = "true"


def test_label_added_where_metadata_labels_is_absent_creates_the_map():
    original = pod("pod-create-generatename-no-labels.json")
    assert "labels" not in original["metadata"]
    ops = check(original, add_label)
    assert ops == [{"op": "add", "path": "/metadata/labels", "value": {"gpuport.io/translated": "true"}}]


def test_label_added_into_an_existing_map_escapes_the_slash():
    ops = check(pod(), add_label)
    assert ops == [{"op": "add", "path": "/metadata/labels/gpuport.io~1translated", "value": "true"}]


def rename_gpu(doc):
    for section in ("limits", "requests"):
        values = doc["spec"]["containers"][0]["resources"][section]
        if "nvidia.com/gpu" in values:
            values["nvidia.com/mig-1g.10gb"] = values.pop("nvidia.com/gpu")


def test_renaming_a_resource_key_escapes_slashes_in_every_path():
    ops = check(pod(), rename_gpu)
    paths = {op["path"] for op in ops} | {op.get("from", "") for op in ops}
    assert "/spec/containers/0/resources/limits/nvidia.com~1mig-1g.10gb" in paths
    assert not any("nvidia.com/" in p for p in paths)


def test_key_with_tilde_is_escaped():
    def add(doc):
        doc["metadata"].setdefault("annotations", {})["weird~key/x"] = "1"

    ops = check(pod(), add)
    assert ops[0]["path"] == "/metadata/annotations"
    ops = check(apply(pod(), ops), lambda d: d["metadata"]["annotations"].update({"a~b/c": "2"}))
    assert ops == [{"op": "add", "path": "/metadata/annotations/a~0b~1c", "value": "2"}]


def add_gpu_toleration(doc):
    wanted = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    tolerations = doc["spec"].setdefault("tolerations", [])
    if wanted not in tolerations:
        tolerations.append(wanted)


def test_toleration_added_where_there_is_no_list():
    original = pod()
    del original["spec"]["tolerations"]
    ops = check(original, add_gpu_toleration)
    assert ops == [
        {
            "op": "add",
            "path": "/spec/tolerations",
            "value": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        }
    ]


def test_toleration_appended_to_the_servers_default_list():
    ops = check(pod(), add_gpu_toleration)
    assert len(ops) == 1 and ops[0]["path"] in ("/spec/tolerations/2", "/spec/tolerations/-")


def test_node_selector_key_removed():
    original = pod()
    original["spec"]["nodeSelector"] = {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100", "team": "a"}
    ops = check(original, lambda d: d["spec"]["nodeSelector"].pop("cloud.google.com/gke-accelerator", None))
    assert ops == [{"op": "remove", "path": "/spec/nodeSelector/cloud.google.com~1gke-accelerator"}]


def test_no_change_gives_an_empty_patch():
    assert diff_mutation(pod(), lambda d: None) == []


def test_fields_outside_the_editable_subtrees_are_refused():
    with pytest.raises(PatchError, match="not editable"):
        diff_mutation(pod(), lambda d: d["spec"].update(hostNetwork=True))


def test_the_patch_never_carries_untouched_fields():
    ops = diff_mutation(pod(), add_label)
    assert all(not op["path"].startswith("/metadata/managedFields") for op in ops)
    assert "volumes" not in str(ops)


def test_values_python_confuses_are_still_patched():
    # 1 == True and 1 == 1.0 in Python; in JSON they are different values, and the patch must say so.
    original = pod()
    original["spec"]["nodeSelector"] = {"a": True, "b": 1}

    def edit(doc):
        doc["spec"]["nodeSelector"].update(a=1, b=1.0)

    ops = check(original, edit)
    assert {op["path"] for op in ops} == {"/spec/nodeSelector/a", "/spec/nodeSelector/b"}


# 1, 1.0 and True (equal to Python), NaN (null to orjson) and an integer past 64 bits (which orjson
# cannot write): the values that could fool a shortcut in the walk.
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([1.0, 0.0, float("nan"), 2**70]),
    st.sampled_from(["", "x", "1", "a/b~c"]),
)
KEYS = st.sampled_from(["a", "b", "a/b", "t~x", "limits", "nvidia.com/gpu"])
JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=3)),
    max_leaves=12,
)


@st.composite
def edited(draw, value):
    """`value` after a few edits of the kinds a mutation makes: set, delete, append, pop, replace."""
    value = copy.deepcopy(value)
    for _ in range(draw(st.integers(0, 4))):
        containers, node = [], value
        while isinstance(node, dict | list) and node:
            containers.append(node)
            node = (
                node[draw(st.sampled_from(sorted(node)))]
                if isinstance(node, dict)
                else draw(st.sampled_from(node))
            )
        if not containers:
            return draw(JSON)
        target = draw(st.sampled_from(containers))
        new = draw(JSON)
        if isinstance(target, dict):
            key = draw(KEYS)
            if key in target and draw(st.booleans()):
                del target[key]
            else:
                target[key] = new
        elif draw(st.booleans()):
            target.append(new)
        elif target:
            target.pop(draw(st.integers(0, len(target) - 1)))
    return value


@st.composite
def before_and_after(draw):
    original = pod()
    for parent, key in patching.EDITABLE_FIELDS:
        if draw(st.booleans()):
            original[parent][key] = draw(JSON)
        else:
            original[parent].pop(key, None)
    after = {parent: {} for parent, _ in patching.EDITABLE_FIELDS}
    for parent, key in patching.EDITABLE_FIELDS:
        if key in original[parent] and draw(st.integers(0, 3)):
            after[parent][key] = draw(edited(original[parent][key]))
        elif draw(st.booleans()):
            after[parent][key] = draw(JSON)
    return original, after


@settings(max_examples=500, deadline=None)
@given(case=before_and_after())
def test_applying_the_patch_gives_exactly_the_edited_pod(case):
    # The request path no longer applies each patch to check it: this is where that check lives.
    original, after = case
    expected = copy.deepcopy(original)
    for parent, key in patching.EDITABLE_FIELDS:
        expected[parent].pop(key, None)
        if key in after[parent]:
            expected[parent][key] = copy.deepcopy(after[parent][key])

    def mutate(view):
        for parent in view:
            view[parent].clear()
            view[parent].update(copy.deepcopy(after[parent]))

    ops = diff_mutation(original, mutate)
    assert json.dumps(apply(original, ops), sort_keys=True) == json.dumps(expected, sort_keys=True)
    assert apply(original, ops) == expected


@settings(max_examples=200, deadline=None)
@given(
    source=st.sampled_from(sorted(SOURCES)),
    target=st.sampled_from(TARGETS),
    extra=st.fixed_dictionaries(
        {},
        optional={
            "env": st.just([{"name": "A", "value": "1"}]),
            "volumeMounts": st.just([{"name": "data", "mountPath": "/data"}]),
        },
    ),
)
def test_deciding_never_changes_the_pod_it_was_given(source, target, extra):
    # The editable view shares every container field but resources with the pod: an edit made in
    # place anywhere else would change the request itself and be missing from the patch.
    pod = copy.deepcopy(SOURCES[source][1])
    for container in pod["spec"]["containers"]:
        container.update(copy.deepcopy(extra))
    request = parsed(review_of(pod))
    before = copy.deepcopy(request.object)
    decision = pipeline.decide(request, context(target))
    assert request.object == before
    if decision.allowed and decision.patch:
        patched = apply(before, list(decision.patch))
        assert [c.get("env") for c in patched["spec"]["containers"]] == [
            c.get("env") for c in before["spec"]["containers"]
        ]


CONTAINER_FIELDS = st.sampled_from(["resources", "env", "name", "image", "extra"])


@st.composite
def containers_and_edits(draw):
    """Container lists as the view holds them and the edits a mutation makes on them in place: a
    resources entry set, a field replaced (by any value, or by a copy of itself: the same JSON in a new
    object), a container's keys reordered, one appended. What `_container_copy` shares with the Pod
    and what it copies are both edited."""
    containers = [
        {
            "name": f"c{i}",
            "image": "img",
            "env": draw(st.lists(st.fixed_dictionaries({"name": KEYS, "value": SCALARS}), max_size=3)),
            "resources": draw(
                st.dictionaries(
                    st.sampled_from(["limits", "requests"]),
                    st.dictionaries(KEYS, SCALARS, max_size=2),
                    max_size=2,
                )
            ),
        }
        for i in range(draw(st.integers(0, 2)))
    ]
    edits = draw(
        st.lists(
            st.one_of(
                st.tuples(st.just("resource"), st.integers(0, 2), KEYS, SCALARS),
                st.tuples(st.just("replace"), st.integers(0, 2), CONTAINER_FIELDS, JSON),
                st.tuples(st.just("same"), st.integers(0, 2), CONTAINER_FIELDS),
                st.tuples(st.just("reorder"), st.integers(0, 2)),
                st.tuples(st.just("append"), JSON),
            ),
            max_size=4,
        )
    )
    return containers, edits


def edit_containers(containers, edits):
    for edit in edits:
        if edit[0] == "append":
            containers.append({"name": "added", "resources": edit[1]})
            continue
        if edit[1] >= len(containers):
            continue
        container = containers[edit[1]]
        if edit[0] == "resource":
            resources = container.setdefault("resources", {})
            limits = resources.setdefault("limits", {}) if isinstance(resources, dict) else None
            if isinstance(limits, dict):
                limits[edit[2]] = edit[3]
        elif edit[0] == "replace":
            container[edit[2]] = copy.deepcopy(edit[3])
        elif edit[0] == "same" and edit[2] in container:
            container[edit[2]] = copy.deepcopy(container[edit[2]])
        elif edit[0] == "reorder":
            containers[edit[1]] = dict(reversed(list(container.items())))


@settings(max_examples=500, deadline=None)
@given(case=containers_and_edits(), key=st.sampled_from(["containers", "initContainers"]))
def test_containers_edited_in_place_are_patched_exactly(case, key):
    # A container list is judged unchanged field by field, by identity where the view shares the
    # field with the Pod: an edit in place, a replaced field or a copy of one must still come out exact.
    containers, edits = case
    original = pod()
    original["spec"][key] = containers
    expected = copy.deepcopy(original)
    edit_containers(expected["spec"][key], edits)
    ops = diff_mutation(original, lambda view: edit_containers(view["spec"][key], edits))
    assert json.dumps(apply(original, ops), sort_keys=True) == json.dumps(expected, sort_keys=True)
    assert apply(original, ops) == expected
