import copy

import jsonpatch
import pytest

from tests.helpers import fixture
from webhook.core import patch as patching
from webhook.core.patch import PatchError, apply, diff_mutation


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


def test_a_patch_that_does_not_reproduce_the_edit_falls_back_to_replacing_the_subtree(monkeypatch):
    wrong = jsonpatch.JsonPatch([{"op": "add", "path": "/metadata/labels/wrong", "value": "x"}])
    monkeypatch.setattr(patching.jsonpatch, "make_patch", lambda a, b: wrong)
    original = pod()
    ops = diff_mutation(original, add_label)
    assert ops == [
        {
            "op": "replace",
            "path": "/metadata/labels",
            "value": {**original["metadata"]["labels"], "gpuport.io/translated": "true"},
        }
    ]
    expected = copy.deepcopy(original)
    add_label(expected)
    assert apply(original, ops) == expected


def test_fallback_adds_and_removes_whole_subtrees(monkeypatch):
    monkeypatch.setattr(patching.jsonpatch, "make_patch", lambda a, b: jsonpatch.JsonPatch([]))
    original = pod("pod-create-generatename-no-labels.json")
    original["spec"]["nodeSelector"] = {"a": "b"}

    def edit(doc):
        add_label(doc)
        del doc["spec"]["nodeSelector"]

    ops = diff_mutation(original, edit)
    assert {"op": "add", "path": "/metadata/labels", "value": {"gpuport.io/translated": "true"}} in ops
    assert {"op": "remove", "path": "/spec/nodeSelector"} in ops
