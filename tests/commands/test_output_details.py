"""`gpuport translate` output in the author's own details, on every shipped map: a plain scalar folded
over lines outside the GPU entries keeps its lines, a comment on a rewritten line stays with it (or with
the key or expression that now says the same), and counts written as numbers stay numbers."""

import re
from pathlib import Path

import pytest

from tests.commands.translating import translate
from tests.helpers import context
from webhook.adapters.files.offline import dump_documents, load_documents, translate_documents
from webhook.adapters.files.yamlstyle import round_trip
from webhook.config.cloudmap import default_directory
from webhook.core.deciding.decision import MAX_WARNING_CHARS, allow
from webhook.core.deciding.review import build_response
from webhook.core.vocabulary.templates import pod_templates
from webhook.core.vocabulary.workloads import container_specs, resource_section

MANIFESTS = Path(__file__).parents[1] / "manifests"
FOLDED = MANIFESTS / "workflows" / "argo-workflow-folded-gke-t4.yaml"
COMMENTED_POD = MANIFESTS / "comments-everywhere.yaml"
MAPS = sorted(p.stem for p in default_directory().glob("*.yaml") if p.stem != "gpus")
# Where a map turns GPU asks into DRA claims, the ask's entry is deleted, and its comment with it.
CLAIMS = {"dra-nvidia", "dra-amd"}
QUOTED_COUNT = re.compile(r'^\s*[\w./-]+: "[0-9]+"')


def test_every_shipped_map_is_tried():
    assert {"gke", "eks", "aks", "volcano", "hami", "dra-nvidia", "generic-mig-single"} <= set(MAPS)


@pytest.mark.parametrize("target", MAPS)
def test_a_folded_plain_scalar_outside_the_gpu_entries_keeps_its_lines(capsys, tmp_path, target):
    text = FOLDED.read_text()
    code, out, _ = translate(capsys, tmp_path, text, target)
    assert out != text or code == 1  # translated, or refused and printed as written
    for block in (
        "          - echo fetching the evaluation set\n"
        "            from the shared bucket\n"
        "            and unpacking it\n",
        "          - --suite=nightly\n            --report=/tmp/report.json\n",
    ):
        assert block in out


@pytest.mark.parametrize("target", sorted(set(MAPS) - CLAIMS))
@pytest.mark.parametrize(
    ("manifest", "comments"),
    [(FOLDED, ["# the T4 pool", "# one per worker"]), (COMMENTED_POD, ["# A2 machines", "# one card"])],
    ids=["argo-workflow", "pod"],
)
def test_a_comment_on_a_rewritten_line_stays_with_the_line_that_says_it_now(
    capsys, tmp_path, manifest, comments, target
):
    _, out, _ = translate(capsys, tmp_path, manifest.read_text(), target)
    for comment in comments:
        [line] = [line for line in out.splitlines() if comment in line]
        assert not line.lstrip().startswith("#"), line  # on an entry's line, not left on its own
        assert re.match(r"^\s*(- )?[\w./-]+: \S", line), line


@pytest.mark.parametrize("target", sorted(CLAIMS))
def test_a_comment_goes_only_with_an_ask_that_became_a_claim(capsys, tmp_path, target):
    code, out, _ = translate(capsys, tmp_path, COMMENTED_POD.read_text(), target)
    if code == 0:
        assert "nvidia.com/gpu:" not in out and "# one card" not in out
    else:  # refused (no NVIDIA GPUs there): printed as written
        assert out == COMMENTED_POD.read_text()


@pytest.mark.parametrize("target", ["eks", "gke", "generic", "volcano"])
@pytest.mark.parametrize(
    "manifest", ["nvidia-gpu-per-pod.yaml", "nvidia-first-available.yaml", "nvidia-two-gpus-v1beta1.yaml"]
)
def test_the_file_s_head_comment_stays_on_top_when_its_first_document_is_left_out(
    capsys, tmp_path, manifest, target
):
    # The claim template opens these files; on a map without DRA the pods ask for GPUs by name and
    # the template is left out, but the comment above it speaks of the whole file.
    text = (MANIFESTS / "dra" / manifest).read_text()
    head = [line for line in text.splitlines() if line.startswith("#")][:1]
    code, out, err = translate(capsys, tmp_path, text, target)
    assert code == 0 and "ResourceClaimTemplate" in err and "left out" in err
    assert "kind: ResourceClaimTemplate" not in out
    assert out.splitlines()[: len(head)] == head


@pytest.mark.parametrize("target", ["eks", "aks", "generic", "kai"])
def test_two_asks_said_as_one_slice_keep_both_comments_on_its_line(capsys, tmp_path, target):
    # HAMi's count and memory (each with its note) become one MIG slice ask: both notes stay with it.
    text = (MANIFESTS / "hami-dynamic-mig.yaml").read_text()
    code, out, _ = translate(capsys, tmp_path, text, target)
    assert code == 0
    [line] = [line for line in out.splitlines() if "/mig-" in line and ":" in line and "#" in line]
    assert line.rstrip().endswith("# two MIG instances  # each with at least 8000 MiB"), line
    assert "gpumem" not in line


def _author_quotes_counts(text: str) -> bool:
    return any(QUOTED_COUNT.match(line) for line in text.splitlines())


@pytest.mark.parametrize("target", MAPS)
def test_counts_written_as_numbers_stay_numbers_across_the_corpus(target):
    translating = context(target)
    quoted = []
    for path in sorted(MANIFESTS.rglob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        if _author_quotes_counts(text):
            continue  # its author quotes counts: a count translation writes may be quoted as well
        manifest = load_documents(text, path.name)
        translate_documents(manifest, translating)
        out = dump_documents(manifest)
        quoted += [f"{path.name}: {name}: {value!r}" for name, value in _asks(out) if isinstance(value, str)]
    assert quoted == []


def _asks(text: str):
    """(resource name, amount as read) of every whole count in the limits and requests of every pod
    template of a manifest's text."""
    for document in round_trip().load_all(text):
        for _, template in pod_templates(document) if hasattr(document, "get") else ():
            spec = template.get("spec") if hasattr(template, "get") else None
            for container in container_specs(spec if hasattr(spec, "get") else {}):
                for section in ("limits", "requests"):
                    for name, value in resource_section(container, section).items():
                        if re.fullmatch("[0-9]+", str(value)):
                            yield name, value


# A whole-GPU pod is kept off MIG-partitioned nodes only where its model can be partitioned on that cloud.

PARTITION = "cloud.google.com/gke-gpu-partition-size"
SHARING = "cloud.google.com/gke-gpu-sharing-strategy"


def _required_keys(out: str) -> set[str]:
    keys = set()
    for document in round_trip().load_all(out):
        for _, template in pod_templates(document):
            affinity = (template.get("spec") or {}).get("affinity") or {}
            required = (affinity.get("nodeAffinity") or {}).get(
                "requiredDuringSchedulingIgnoredDuringExecution"
            )
            for term in (required or {}).get("nodeSelectorTerms") or []:
                keys |= {e["key"] for e in term.get("matchExpressions") or []}
    return keys


def test_an_l4_pod_on_gke_gets_no_mig_partition_exclusion(capsys, tmp_path):
    code, out, err = translate(capsys, tmp_path, (MANIFESTS / "gke-l4-vllm-spot.yaml").read_text(), "gke")
    assert code == 0
    assert PARTITION not in out and PARTITION not in err  # no L4 is ever partitioned
    assert SHARING in _required_keys(out)  # GKE time-shares any GPU model, an L4 too


@pytest.mark.parametrize("manifest", ["comments-everywhere.yaml", "serving/kserve-isvc-eks-t4.yaml"])
def test_the_partition_exclusion_follows_the_model(capsys, tmp_path, manifest):
    """An A100 (comments-everywhere) can be partitioned on GKE; a T4 (the KServe service) cannot."""
    _, out, _ = translate(capsys, tmp_path, (MANIFESTS / manifest).read_text(), "gke")
    assert (PARTITION in _required_keys(out)) == (manifest == "comments-everywhere.yaml")
    assert SHARING in _required_keys(out)


# Every warning gpuport says of the shipped test manifests on every shipped map fits kubectl's 120
# characters in the admission response and still names what the pod gets now.


@pytest.mark.parametrize("target", MAPS)
def test_every_warning_fits_kubectl_and_names_the_change(target):
    translating = context(target)
    unfit = []
    for path in sorted(MANIFESTS.rglob("*.yaml")):
        manifest = load_documents(path.read_text(encoding="utf-8"), path.name)
        said = [w for result in translate_documents(manifest, translating) for w in result.warnings]
        shown = build_response("uid", allow(warnings=said))["response"].get("warnings", [])
        for full, short in zip(said, shown, strict=True):
            now = re.match(
                r"(?:required affinity |required node affinity |claim )?([^\s,:]+)", full.split(" → ")[-1]
            )
            names_it = " → " not in full or (now is not None and now.group(1) in short)
            if len(short) > MAX_WARNING_CHARS or not names_it or not full.startswith(short.split(" ")[0]):
                unfit.append((path.name, short))
    assert unfit == []


@pytest.mark.parametrize("target", ["generic", "oke", "gke"])
def test_a_removed_node_pool_s_comment_goes_with_it_and_lands_on_no_gpu_line(capsys, tmp_path, target):
    # The Karpenter NodePool's name is the old cluster's (removed); the instance family is the GPU
    # (said again). The pool's comment spoke of the pool: on the GPU's new line it would mislead.
    text = (MANIFESTS / "topology" / "eks-karpenter-nodepool-g5.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, target)
    assert code == 0, err
    assert "# the NodePool made for these pods" not in out
    assert "# one A10G" in out  # the ask's own comment stays on its line
