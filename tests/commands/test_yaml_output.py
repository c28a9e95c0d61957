"""`gpuport translate` output as a reviewer sees it in a pull request: documents it does not change are
byte for byte the input, changed ones differ only in the lines of GPU entries, and every output parses
to exactly the object the webhook would produce."""

import copy
import difflib
import json
from pathlib import Path

import jsonpatch
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from tests.helpers import context
from webhook.adapters.files.offline import dump_documents, load_documents, translate_documents
from webhook.adapters.files.yamledit import BOM, entry_span, plain, round_trip, split_documents, units
from webhook.core.deciding.admission import decide_template
from webhook.core.vocabulary.templates import pod_templates

MANIFESTS = Path(__file__).parents[1] / "manifests"
# The corpus, and the first and third audits' manifests of projects it had not used
# (tests/manifests/audit/README.md, tests/manifests/audit3/README.md, tests/manifests/audit4/README.md).
CORPUS = [
    *sorted(MANIFESTS.glob("*.yaml")),
    *(p for a in ("audit", "audit3", "audit4") for p in sorted((MANIFESTS / a).glob("*.yaml"))),
]
TARGETS = ["generic", "generic-mig-single", "gke", "eks", "aks", "hami"]
CONTEXTS = {name: context(name) for name in TARGETS}


def translate_text(text: str, target: str, placement_refused: set[int] | None = None) -> str:
    """The output; `placement_refused` gets the documents whose exclusive placement (written on a
    JobSet or LeaderWorkerSet, no pod's) was refused: those are printed as written."""
    manifest = load_documents(text, "test")
    results = translate_documents(manifest, CONTEXTS[target])
    if placement_refused is not None:
        placement_refused |= {
            r.document for r in results if not r.allowed and r.path.endswith("/annotations")
        }
    return dump_documents(manifest)


def webhook_result(document, target):
    """What the webhook's core makes of each pod template, applied to a plain copy of the document."""
    expected = copy.deepcopy(document)
    for path, template in pod_templates(expected):
        decided = decide_template(copy.deepcopy(template), CONTEXTS[target], hints=False)
        if decided.rewrite is None:  # refused: the document is printed as it was
            continue
        patch = decided.rewrite.patch
        if any(op["path"].startswith("/metadata") for op in patch):
            template.setdefault("metadata", {})  # a Pod made from the template always has metadata
        translated = jsonpatch.apply_patch(template, patch)
        if path:
            parent = jsonpatch.JsonPointer(path).to_last(expected)
            parent[0][parent[1]] = translated
        else:
            expected = translated
    return expected


def changed_lines_are_gpu_entries(before: str, after: str) -> None:
    """Every line the diff removes lies in a GPU entry of the input; every line it adds, in one of the
    output (or is the `metadata:` line a template without metadata needed)."""
    removed, added = set(), set()
    matcher = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines(), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            removed |= set(range(i1, i2))
            added |= set(range(j1, j2))
    assert removed <= gpu_entry_lines(before), (removed - gpu_entry_lines(before), before)
    assert added <= gpu_entry_lines(after), (added - gpu_entry_lines(after), after)


def gpu_entry_lines(text: str) -> set[int]:
    lines = text.splitlines(keepends=True)
    found, offset = set(), 0
    for chunk in split_documents(text.removeprefix(BOM)):
        doc = round_trip().load(chunk)
        chunk_lines = chunk.splitlines(keepends=True)
        for _, template in pod_templates(doc) if hasattr(doc, "get") else ():
            for unit in units(template):
                node = template
                for part in unit[:-1]:
                    node = node[part] if part in node or isinstance(part, int) else None
                    if node is None:
                        break
                own = isinstance(node, CommentedMap) and unit[-1] in (node.lc.data or {})
                if own and not node.fa.flow_style():
                    start, end = entry_span(chunk_lines, node, unit[-1])
                    found |= {offset + n for n in range(start, end)}
                elif isinstance(node, CommentedMap) and node.fa.flow_style():
                    line = node.lc.line
                    found |= {offset + line}
            metadata = template.get("metadata")
            if isinstance(metadata, CommentedMap) and list(metadata) == ["annotations"]:
                found.add(offset + template.lc.key("metadata")[0])  # a metadata gpuport had to add
            for list_name in ("containers", "initContainers"):
                for item in template["spec"].get(list_name) or []:
                    if isinstance(item, CommentedMap) and item.fa.flow_style():
                        found.add(offset + item.lc.line)
        offset += len(chunk_lines)
    assert offset == len(lines)
    return found


def as_quantities(node):
    """`node` with every amount in a limits or requests mapping as the quantity string the API server
    reads (a count written `1` and the patch's "1" are one quantity)."""
    if isinstance(node, dict):
        return {
            k: {n: str(v) for n, v in value.items()}
            if k in ("limits", "requests") and isinstance(value, dict)
            else as_quantities(value)
            for k, value in node.items()
        }
    return [as_quantities(v) for v in node] if isinstance(node, list) else node


def documents_of(text: str) -> list:
    return [round_trip().load(chunk) for chunk in split_documents(text.removeprefix(BOM))]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("path", CORPUS, ids=[p.name for p in CORPUS])
def test_corpus_output_is_the_input_but_for_gpu_lines_and_parses_to_the_webhook_s_object(path, target):
    text = path.read_text(encoding="utf-8")
    placement_refused: set[int] = set()
    output = translate_text(text, target, placement_refused)
    assert output.startswith(BOM) == text.startswith(BOM)
    changed_lines_are_gpu_entries(text, output)
    before_chunks, after_chunks = (
        split_documents(text.removeprefix(BOM)),
        split_documents(output.removeprefix(BOM)),
    )
    assert len(before_chunks) == len(after_chunks)
    for number, (before, after) in enumerate(zip(before_chunks, after_chunks, strict=True)):
        if number in placement_refused:
            assert after == before  # its pods translated beside it would be half a translation
            continue
        document = round_trip().load(before)
        try:
            as_plain = plain(document)
        except (TypeError, ValueError):
            assert after == before  # a document JSON cannot hold (a {{template}} key) is never edited
            continue
        expected = webhook_result(as_plain, target) if isinstance(as_plain, dict) else as_plain
        if expected == as_plain:
            assert after == before, "a document gpuport does not change is printed byte for byte"
        else:
            assert as_quantities(plain(round_trip().load(after))) == as_quantities(expected)
            assert ("\r\n" in after) == ("\r\n" in before)


def test_the_corpus_has_forty_manifests_in_varied_styles():
    assert len(CORPUS) >= 40
    texts = [p.read_bytes() for p in CORPUS]
    assert any(t.startswith(BOM.encode()) for t in texts)
    assert any(b"\r\n" in t for t in texts)
    assert any(b"\n - name" in t or b"\n   - name" in t for t in texts)  # odd indents


def test_a_template_placeholder_secret_comes_back_as_written():
    text = (Path(__file__).parents[1] / "manifests" / "secret-and-deployment.yaml").read_text()
    output = translate_text(text, "eks")
    assert "HF_TOKEN: {{HF_TOKEN}}\n" in output
    assert output.split("---")[1] == text.split("---")[1]


def test_diff_shows_only_the_changed_lines(tmp_path, capsys):
    from webhook.commands.cli import main

    path = tmp_path / "pod.yaml"
    path.write_text((Path(__file__).parents[1] / "manifests" / "comments-everywhere.yaml").read_text())
    assert main(["translate", "--to", "eks", "--diff", str(path)]) == 0
    diff = capsys.readouterr().out
    changes = [line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert changes == [
        "+  annotations:",
        '+    gpuport.io/translated-from: \'{"containers[0]":{"nvidia.com/gpu":"1"},"nodeSelector":'
        '{"cloud.google.com/gke-accelerator":"nvidia-tesla-a100"}}\'',
        "-    cloud.google.com/gke-accelerator: nvidia-tesla-a100  # A2 machines",
        "+    node.kubernetes.io/instance-type: p4d.24xlarge       # A2 machines",  # the label said again
    ]


# Hypothesis: the same pods written in many styles.

STYLE = st.fixed_dictionaries(
    {
        "indent": st.integers(1, 4),
        "dash": st.integers(0, 4),
        "flow": st.sets(st.sampled_from(["nodeSelector", "limits", "labels", "container"])),
        "comments": st.booleans(),
        "crlf": st.booleans(),
        "bom": st.booleans(),
        "anchor": st.booleans(),
        "preamble": st.booleans(),
        "source": st.sampled_from(
            [
                ({"nvidia.com/gpu": 2}, {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"}),
                ({"nvidia.com/gpu": 1}, {"node.kubernetes.io/instance-type": "p5.48xlarge"}),
                ({"nvidia.com/mig-1g.10gb": 1}, {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}),
                ({"aliyun.com/gpu-mem": 8}, {}),
                ({"nvidia.com/gpu": 1}, {}),
            ]
        ),
        "target": st.sampled_from(TARGETS),
    }
)


def styled_manifest(style) -> str:
    resources, selector = style["source"]
    limits = CommentedMap(resources)
    container = CommentedMap(name="main", image="nvidia/cuda:12.4.0-base-ubuntu22.04")
    container["resources"] = CommentedMap(limits=limits)
    spec = CommentedMap()
    if selector:
        spec["nodeSelector"] = CommentedMap(selector)
    spec["containers"] = CommentedSeq([container])
    labels = CommentedMap(app="work")
    pod = CommentedMap(apiVersion="v1", kind="Pod")
    pod["metadata"] = CommentedMap(name="work", labels=labels)
    pod["spec"] = spec
    for name, node in (("nodeSelector", spec.get("nodeSelector")), ("limits", limits), ("labels", labels)):
        if name in style["flow"] and node is not None:
            node.fa.set_flow_style()
    if "container" in style["flow"]:
        container.fa.set_flow_style()
    if style["comments"]:
        pod.yaml_add_eol_comment("# the pod", "kind")
        container.yaml_add_eol_comment("# its image", "image") if "container" not in style["flow"] else None
        if "nodeSelector" in spec and "nodeSelector" not in style["flow"]:
            spec["nodeSelector"].yaml_add_eol_comment("# where", next(iter(spec["nodeSelector"])))
    if style["anchor"]:
        env = CommentedSeq([CommentedMap(name="MODE", value="train")])
        env.yaml_set_anchor("env", always_dump=True)
        container["env"] = env
    yaml = round_trip()
    indent, dash = style["indent"], min(style["dash"], style["indent"])
    yaml.indent(mapping=indent, sequence=dash + 2, offset=dash)
    import io

    out = io.StringIO()
    documents = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "1"}},
        pod,
    ]
    yaml.dump_all(documents, out)
    text = out.getvalue()
    if style["preamble"]:
        text = "# generated for the test\n---\n" + text
    if style["crlf"]:
        text = text.replace("\n", "\r\n")
    return (BOM if style["bom"] else "") + text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(STYLE)
def test_any_style_round_trips_to_the_webhook_s_object_with_only_gpu_lines_changed(style):
    text = styled_manifest(style)
    output = translate_text(text, style["target"])
    changed_lines_are_gpu_entries(text, output)
    before_chunks, after_chunks = (
        split_documents(text.removeprefix(BOM)),
        split_documents(output.removeprefix(BOM)),
    )
    for before, after in zip(before_chunks, after_chunks, strict=True):
        document = plain(round_trip().load(before))
        expected = webhook_result(document, style["target"]) if isinstance(document, dict) else document
        if expected == document:
            assert after == before
        else:
            assert as_quantities(plain(round_trip().load(after))) == as_quantities(expected)
    json.dumps(plain(documents_of(output)))  # every document parses


def test_corpus_needs_no_whole_document_re_dump(monkeypatch):
    import webhook.adapters.files.yamledit

    def refuse(text, edited):
        raise AssertionError(f"re-dumped:\n{text}")

    monkeypatch.setattr(webhook.adapters.files.yamledit, "redump", refuse)
    for path in CORPUS:
        for target in TARGETS:
            translate_text(path.read_text(encoding="utf-8"), target)


def test_a_change_the_splice_cannot_place_is_re_dumped_and_still_exact():
    # Container b inherits its resources through a merge key: the ask it changes is not written in b.
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: merged\nspec:\n  containers:\n"
        "  - &a\n    name: a\n    image: x\n    resources:\n      limits:\n        aliyun.com/gpu-mem: 8\n"
        "  - <<: *a\n    name: b\n"
    )
    output = translate_text(text, "eks")
    expected = webhook_result(plain(round_trip().load(text)), "eks")
    assert plain(round_trip().load(output))["spec"]["containers"][1]["resources"]["limits"] == {
        "nvidia.com/gpu.shared": 1  # a count, as its author wrote counts
    }
    assert as_quantities(plain(round_trip().load(output))) == as_quantities(expected)


def test_a_translation_that_would_not_read_back_is_never_printed(tmp_path, capsys, monkeypatch):
    import webhook.adapters.files.yamledit
    from webhook.commands.cli import main

    monkeypatch.setattr(webhook.adapters.files.yamledit, "_parses_to", lambda text, edited: False)
    path = tmp_path / "pod.yaml"
    path.write_text((Path(__file__).parents[1] / "manifests" / "eks-p5-pod.yaml").read_text())
    assert main(["translate", "--to", "gke", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "does not parse back to the translated object" in err


def test_comments_stay_with_their_lines_and_go_only_with_a_deleted_entry(tmp_path, capsys):
    # A comment above an entry gpuport removes goes with it; a trailing comment stays at its column,
    # on an entry whose value changes too (after a longer value, two spaces after it, as yamllint asks).
    text = (
        "apiVersion: v1\n"
        "kind: Pod\n"
        "metadata:\n"
        "  name: c\n"
        "  annotations:\n"
        "    team: ml # owner\n"
        "    # only A100s, please\n"
        '    nvidia.com/use-gputype: "A100"\n'
        "spec:\n"
        "  nodeSelector:\n"
        "    # the A100 pool\n"
        "    node.kubernetes.io/instance-type: p4d.24xlarge   # eight A100s\n"
        "  containers:\n"
        "  - name: c\n"
        "    image: x\n"
        "    resources:\n"
        "      limits:\n"
        "        nvidia.com/gpu: 8 # request eight GPUs\n"
    )
    output = translate_text(text, "aks")
    assert "    team: ml # owner\n    gpuport.io/translated-from: " in output
    assert "only A100s" not in output and "use-gputype" not in output.split("translated-from")[0]
    assert (
        "    # the A100 pool\n    node.kubernetes.io/instance-type: Standard_ND96asr_v4  # eight A100s\n"
        in output
    )
    assert "        nvidia.com/gpu: 8 # request eight GPUs\n" in output


def test_a_trailing_comment_keeps_its_column_beside_a_quoted_or_shorter_value():
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: c\nspec:\n  nodeSelector:\n"
        '    node.kubernetes.io/instance-type: "Standard_ND96asr_v4"   # Bob\'s pool, "eight"\n'
        "  containers:\n  - name: c\n    image: x\n    resources:\n      limits:\n"
        "        nvidia.com/gpu: 8\n"
    )
    column = text.index("# Bob") - text.rindex("\n", 0, text.index("# Bob")) - 1
    output = translate_text(text, "eks")
    [line] = [x for x in output.splitlines() if "instance-type" in x and "translated-from" not in x]
    assert line.startswith('    node.kubernetes.io/instance-type: "p4d.24xlarge"')
    assert line.index('# Bob\'s pool, "eight"') == column  # at its column, though the value is shorter


# A resource ask gpuport rewrites keeps the author's comments: the rewritten entry takes the line of the
# ask it replaces (the one with the same amount, else the closest name) and its trailing comment, at its
# column; a full-line comment stays above its line; only a deleted line takes its comments with it.


def cli_translate(tmp_path, capsys, text: str, source: str, target: str) -> str:
    """`gpuport translate --from SOURCE --to TARGET`'s output, its translated-from record elided."""
    import re

    from webhook.commands.cli import main

    path = tmp_path / "manifest.yaml"
    path.write_bytes(text.encode())
    assert main(["translate", "--from", source, "--to", target, str(path)]) == 0
    output = capsys.readouterr().out
    return re.sub(r"gpuport\.io/translated-from: .*", "gpuport.io/translated-from: ...", output)


ACK_CGPU_JOB = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: tensorflow-mnist
spec:
  parallelism: 1
  template:
    metadata:
      labels:
        app: tensorflow-mnist
    spec:
      containers:
      - name: tensorflow-mnist
        image: registry.cn-beijing.aliyuncs.com/ai-samples/gpushare-sample:tensorflow-1.5
        command:
        - python
        - tensorflow-sample-code/tfjob/docker/mnist/main.py
        resources:
          limits:
            # One cGPU share of one card.
            aliyun.com/gpu-mem: 4 # Apply for 4 GiB of GPU memory.
            cpu: "1"      # host CPU stays
          requests:
            aliyun.com/gpu-mem: 4                          # same as the limit
        workingDir: /root
      restartPolicy: Never
"""


def ack_job(annotation_then_resources: tuple[str, str], tail: str = "") -> str:
    head, rest = ACK_CGPU_JOB.split("      containers:\n")
    _, after = rest.split("        workingDir: /root\n")
    container = rest.split("        resources:\n")[0]
    return (
        head.replace(
            "        app: tensorflow-mnist\n",
            "        app: tensorflow-mnist\n" + annotation_then_resources[0],
        )
        + "      containers:\n"
        + container
        + annotation_then_resources[1]
        + "        workingDir: /root\n"
        + after
        + tail
    )


def test_an_ack_cgpu_ask_rewritten_for_hami_keeps_its_comments_at_their_columns(tmp_path, capsys):
    output = cli_translate(tmp_path, capsys, ACK_CGPU_JOB, "ack", "hami")
    expected = ack_job(
        (
            "      annotations:\n        gpuport.io/translated-from: ...\n",
            "        resources:\n"
            "          limits:\n"
            "            # One cGPU share of one card.\n"
            "            nvidia.com/gpumem: 4096 # Apply for 4 GiB of GPU memory.\n"
            "            nvidia.com/gpu: 1\n"
            '            cpu: "1"      # host CPU stays\n'
            "          requests:\n"
            "            nvidia.com/gpumem: 4096                        # same as the limit\n"
            "            nvidia.com/gpu: 1\n",
        ),
        "      schedulerName: hami-scheduler\n",
    )
    assert output == expected
    column = ACK_CGPU_JOB.splitlines()[23].index("# same")
    assert output.splitlines()[26].index("# same as the limit") == column == 59


def test_an_ack_cgpu_ask_rewritten_for_tke_keeps_its_comments(tmp_path, capsys):
    output = cli_translate(tmp_path, capsys, ACK_CGPU_JOB, "ack", "tke")
    expected = ack_job(
        (
            "      annotations:\n        gpuport.io/translated-from: ...\n",
            "        resources:\n"
            "          limits:\n"
            "            # One cGPU share of one card.\n"
            "            tke.cloud.tencent.com/qgpu-memory: 4 # Apply for 4 GiB of GPU memory.\n"
            '            cpu: "1"      # host CPU stays\n'
            "          requests:\n"
            "            tke.cloud.tencent.com/qgpu-memory: 4           # same as the limit\n",
        )
    )
    assert output == expected


HAMI_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: gpu-pod
spec:
  containers:
    - name: ubuntu-container
      image: ubuntu:18.04
      command: ["bash", "-c", "sleep 86400"]
      resources:
        # HAMi's own example
        limits:
          nvidia.com/gpu: 2 # declare how many physical GPUs the pod needs
          # Optional, integer
          nvidia.com/gpumem: 3000 # identifies 3000M GPU memory each physical GPU allocates to the pod
          nvidia.com/gpucores: 30 # identifies 30% GPU core each physical GPU allocates to the pod
"""
HAMI_HEAD = HAMI_POD.split("spec:\n")[0] + "  annotations:\n    gpuport.io/translated-from: ...\nspec:\n"
HAMI_CONTAINER = HAMI_POD.split("spec:\n")[1].split("        limits:\n")[0] + "        limits:\n"


def test_hami_s_sample_for_ack_keeps_each_comment_with_the_ask_of_the_same_amount(tmp_path, capsys):
    output = cli_translate(tmp_path, capsys, HAMI_POD, "hami", "ack")
    assert output == (
        HAMI_HEAD
        + HAMI_CONTAINER
        + "          aliyun.com/gpu-count: 2 # declare how many physical GPUs the pod needs\n"
        "          # Optional, integer\n"
        "          aliyun.com/gpu-mem: 3   # identifies 3000M GPU memory each physical GPU allocates"
        " to the pod\n"
        "          aliyun.com/gpu-core.percentage: 30 # identifies 30% GPU core each physical GPU allocates"
        " to the pod\n"
    )
    # The memory ask's comment is at the column its author gave it.
    assert output.splitlines()[16].index("# identifies 3000M") == HAMI_POD.splitlines()[14].index("#") == 34


def test_hami_s_sample_shared_drops_only_the_deleted_asks_and_their_comments(tmp_path, capsys):
    output = cli_translate(tmp_path, capsys, HAMI_POD, "hami", "generic")
    assert output == (
        HAMI_HEAD
        + HAMI_CONTAINER
        + "          nvidia.com/gpu.shared: 2 # declare how many physical GPUs the pod needs\n"
    )


PLAIN_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: cuda-vectoradd
spec:
  restartPolicy: OnFailure
  containers:
  - name: cuda-vectoradd
    image: "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda11.7.1-ubuntu20.04"
    resources:
      # one whole GPU, on any node that has one
      limits:
        # the card
        nvidia.com/gpu: 1  # one GPU
        memory: 2Gi        # host memory
"""


def test_a_gpu_ask_moved_to_a_claim_goes_with_its_comments_and_the_rest_stays(tmp_path, capsys):
    output = cli_translate(tmp_path, capsys, PLAIN_POD, "gke", "dra-nvidia")
    pod = output.split("---\n")[0]
    head = PLAIN_POD.split("spec:\n")[0] + "  annotations:\n    gpuport.io/translated-from: ...\nspec:\n"
    assert pod.startswith(
        head
        + PLAIN_POD.split("spec:\n")[1].split("        # the card\n")[0]
        + "        memory: 2Gi        # host memory\n"
        "      claims:\n"
        "      - name: gpuport-cuda-vectoradd\n"
        "  resourceClaims:\n"
        "  - name: gpuport-cuda-vectoradd\n"
    ), pod


MIG_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: mig-pod
spec:
  containers:
  - name: cuda
    image: nvcr.io/nvidia/cuda:12.4.0-base-ubuntu22.04
    resources:
      limits:
        # two slices of an A100
        nvidia.com/mig-1g.10gb: 2     # two 1g.10gb instances
        memory: 8Gi   # host
"""


@pytest.mark.parametrize(
    ("target", "asks"),
    [
        ("generic-mig-single", ["        nvidia.com/gpu: 2             # two 1g.10gb instances\n"]),
        (
            "volcano",
            [
                "        volcano.sh/vgpu-number: 2     # two 1g.10gb instances\n",
                "        volcano.sh/vgpu-memory: 10240\n",
            ],
        ),
    ],
)
def test_a_mig_ask_rewritten_keeps_its_comments_and_its_neighbours_bytes(tmp_path, capsys, target, asks):
    output = cli_translate(tmp_path, capsys, MIG_POD, "generic", target)
    lines = output.splitlines(keepends=True)
    start = lines.index("      limits:\n")
    assert lines[start : start + 3 + len(asks)] == [
        "      limits:\n",
        "        # two slices of an A100\n",
        *asks,
        "        memory: 8Gi   # host\n",
    ]
    assert lines[start - 4 : start] == MIG_POD.splitlines(keepends=True)[5:9]


def test_an_ask_deleted_beside_an_unchanged_one_leaves_that_one_byte_for_byte(tmp_path, capsys):
    text = PLAIN_POD.replace(
        "        memory: 2Gi        # host memory\n",
        "        # HAMi's memory cap\n        nvidia.com/gpumem: 81920   # all of it\n",
    )
    output = cli_translate(tmp_path, capsys, text, "hami", "gke")
    assert output.split("    resources:\n")[1].startswith(
        "      # one whole GPU, on any node that has one\n"
        "      limits:\n"
        "        # the card\n"
        "        nvidia.com/gpu: 1  # one GPU\n"
        "  nodeSelector:\n"
    ), output


def test_an_ask_whose_amount_alone_changes_keeps_its_line_s_comment_at_its_column():
    from webhook.adapters.files.yamledit import edit_document

    text = PLAIN_POD.replace("nvidia.com/gpu: 1  # one GPU", "nvidia.com/gpu: 1        # one GPU")
    original, edited = round_trip().load(text), round_trip().load(text)
    edited["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 2
    assert edit_document(text, original, edited, [""]) == text.replace(
        "nvidia.com/gpu: 1        # one GPU", "nvidia.com/gpu: 2        # one GPU"
    )
    edited["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "20000000000000000000000"
    # Longer than the comment's column: the author's gap, at most two spaces (yamllint's default).
    assert '        nvidia.com/gpu: "20000000000000000000000"  # one GPU\n' in edit_document(
        text, original, edited, [""]
    )


def test_a_flow_mapping_of_asks_rewritten_whole_keeps_its_comment_once(tmp_path, capsys):
    text = PLAIN_POD.replace(
        PLAIN_POD[PLAIN_POD.index("      limits:") :],
        "      limits: {aliyun.com/gpu-mem: 8, memory: 2Gi}  # the share\n",
    )
    output = cli_translate(tmp_path, capsys, text, "ack", "hami")
    assert "      limits: {memory: 2Gi, nvidia.com/gpumem: 8192, nvidia.com/gpu: 1}  # the share\n" in output


@pytest.mark.parametrize("indentless", [False, True])
def test_tolerations_gained_are_added_after_the_authors_own_which_keep_their_comments(indentless):
    # AKS pools are tainted sku=gpu: the translation adds a toleration. The author's own, the comments
    # among them and the comment of what follows stay where they were, once.
    dash = "" if indentless else "  "
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n"
        "  tolerations:\n"
        f"  {dash}# our own taint\n"
        f"  {dash}- key: dedicated\n"
        f"  {dash}  operator: Equal   # exact\n"
        f"  {dash}  effect: NoSchedule\n"
        "\n"
        "  # the app\n"
        "  containers:\n"
        f"  {dash}- name: c\n"
        f"  {dash}  image: x\n"
        f"  {dash}  resources:\n"
        f"  {dash}    limits:\n"
        f"  {dash}      nvidia.com/gpu: 1\n"
    )
    out = translate_text(text, "aks")
    assert out.count("# the app") == 1 and out.count("# our own taint") == 1
    authors = text.split("  containers:")[0].split("\n\n")[0]
    added = (
        f"  {dash}- key: sku\n  {dash}  operator: Equal\n  {dash}  value: gpu\n  {dash}  effect: NoSchedule\n"
    )
    assert authors + "\n" + added + "\n  # the app\n  containers:" in out


def test_a_crlf_manifest_comes_out_in_crlf_from_the_command(tmp_path, capsys):
    # Read from a file as written: universal newlines would turn every line of it into LF.
    path = tmp_path / "pod.yaml"
    from webhook.commands.cli import main

    path.write_bytes((Path(__file__).parents[1] / "manifests" / "indent-4-crlf.yaml").read_bytes())
    assert main(["translate", "--to", "eks", str(path)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines(keepends=True)
    assert lines and all(line.endswith("\r\n") for line in lines)
    assert "nvidia.com/gpu" in out


# GKE's "Run GPUs in Spot VMs" shape: a node selector naming the accelerator and Spot, each commented.
SPOT_L4 = """apiVersion: v1
kind: Pod
metadata:
  name: infer
spec:
  nodeSelector:
{first}
{second}
  containers:
  - name: server
    image: vllm/vllm-openai:v0.6.0
    resources:
      limits:
        nvidia.com/gpu: 1   # one L4
"""
ACCELERATOR = "    cloud.google.com/gke-accelerator: nvidia-l4   # L4 pool"
SPOT = '    cloud.google.com/gke-spot: "true"  # cheap'


@pytest.mark.parametrize("order", ["accelerator first", "spot first"])
@pytest.mark.parametrize("target", ["generic", "eks", "aks"])
def test_a_node_selector_comment_goes_to_the_line_that_says_the_same_thing_again(target, order):
    # The comment on the accelerator is about the GPU, the one on Spot about the capacity: each goes to
    # the line of the target that says the same (a model label or an expression on an instance type,
    # a capacity label or expression), never one to the other's line, whatever their order.
    first, second = (ACCELERATOR, SPOT) if order == "accelerator first" else (SPOT, ACCELERATOR)
    out = translate_text(SPOT_L4.format(first=first, second=second), target)
    for comment, about in (
        ("# L4 pool", ("gpu.product", "instance-type")),
        ("# cheap", ("capacity", "priority")),
    ):
        lines = [line for line in out.splitlines() if comment in line]
        assert len(lines) <= 1, out
        assert all(any(word in line for word in about) for line in lines), out
    assert "# L4 pool" in out, out  # every target says the GPU again
    assert ("# cheap" in out) == (target != "generic"), out  # generic has no capacity label: it goes
