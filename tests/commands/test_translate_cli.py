"""`gpuport translate` and `gpuport lint`: the same core as the webhook, on manifest files."""

import copy
import json
import shutil
import subprocess
import sys

import jsonpatch
import pytest
import yaml

from tests.helpers import context, parsed, review_of
from tests.translation_cases import SOURCES, TARGETS
from webhook.commands.cli import main
from webhook.config.cloudmap import default_directory
from webhook.core.deciding import pipeline

GKE_DEPLOYMENT = """\
# Training job written for GKE
apiVersion: apps/v1
kind: Deployment
metadata:
  name: trainer  # keep this comment
spec:
  replicas: 2
  template:
    spec:
      nodeSelector:
        cloud.google.com/gke-accelerator: nvidia-tesla-a100
        team: vision
      containers:
        - name: main
          image: nvidia/cuda:12.4.0-base-ubuntu22.04
          resources:
            limits:
              nvidia.com/gpu: 1
"""


def run_cli(*args, stdin=None):
    result = subprocess.run(
        [sys.executable, "-m", "webhook", *args], input=stdin, capture_output=True, text=True, check=False
    )
    return result.returncode, result.stdout, result.stderr


def test_gke_deployment_to_eks_keeps_comments_and_order(tmp_path):
    path = tmp_path / "train.yaml"
    path.write_text(GKE_DEPLOYMENT)
    code, out, err = run_cli("translate", "--to", "eks", str(path))
    assert code == 0, err
    assert out.startswith("# Training job written for GKE\napiVersion: apps/v1\nkind: Deployment\n")
    assert "name: trainer  # keep this comment" in out
    template = yaml.safe_load(out)["spec"]["template"]
    assert template["spec"]["nodeSelector"] == {
        "node.kubernetes.io/instance-type": "p4d.24xlarge",
        "team": "vision",
    }
    assert template["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 1}
    assert "gpuport.io/translated-from" in template["metadata"]["annotations"]
    assert "node selector node.kubernetes.io/instance-type=p4d.24xlarge" in err


def test_the_cli_and_the_webhook_agree_on_every_matrix_pod(tmp_path, capsys):
    docs = "---\n".join(yaml.safe_dump(SOURCES[name][1]) for name in SOURCES)
    (tmp_path / "all.yaml").write_text(docs)
    for target in TARGETS:
        capsys.readouterr()
        code = main(["translate", "--to", target, str(tmp_path / "all.yaml")])
        assert code in (0, 1), target  # 1: some pod is refused here, and said so
        out = capsys.readouterr().out
        translated = list(yaml.safe_load_all(out))
        assert len(translated) >= len(SOURCES), target  # every document printed, refused ones as written
        templates = {}
        for name, cli_result in zip(SOURCES, translated[: len(SOURCES)], strict=True):
            source = SOURCES[name][1]
            decision = pipeline.decide(parsed(review_of(copy.deepcopy(source))), context(target))
            expected = jsonpatch.apply_patch(source, list(decision.patch)) if decision.allowed else source
            # The webhook also records what it changed on the pod (for kubectl describe and the pod's
            # Event); the CLI says it on stderr.
            (expected.get("metadata") or {}).get("annotations", {}).pop("gpuport.io/rewrites", None)
            # The patch writes every amount as a quantity string; the CLI writes a count as the author
            # writes counts (`1` where none is quoted): the same quantity.
            assert _counts_as_numbers(cli_result) == _counts_as_numbers(expected), f"{name} → {target}"
            for template in decision.claim_templates:
                placed = copy.deepcopy(template)
                placed["metadata"]["namespace"] = source["metadata"]["namespace"]
                templates[placed["metadata"]["name"]] = placed
        # After the workloads: the claim templates they refer to (DRA targets), once each.
        assert translated[len(SOURCES) :] == list(templates.values()), target


def _counts_as_numbers(pod):
    pod = copy.deepcopy(pod)
    for container in [*pod["spec"].get("containers", []), *pod["spec"].get("initContainers", [])]:
        for section in (container.get("resources") or {}).values():
            if isinstance(section, dict):
                for name, value in section.items():
                    if isinstance(value, str) and value.isdigit():
                        section[name] = int(value)
    return pod


EMPTY_KEYS_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: trainer
  labels:
  annotations:
spec:
  affinity:
  tolerations:
  nodeSelector:
    cloud.google.com/gke-accelerator: nvidia-h100-80gb
  containers:
  - name: main
    image: nvcr.io/nvidia/pytorch:24.05-py3
    resources:
      limits:
        nvidia.com/gpu: 1
"""


@pytest.mark.parametrize("target", ["generic", "aks"])
def test_keys_left_empty_in_yaml_are_filled_not_a_crash(tmp_path, target):
    # `annotations:` with nothing under it is null in YAML; gpuport adds under it as under an absent one.
    path = tmp_path / "pod.yaml"
    path.write_text(EMPTY_KEYS_POD)
    code, out, err = run_cli("translate", "--to", target, str(path))
    assert code == 0, err
    assert "Traceback" not in err
    pod = yaml.safe_load(out)
    assert pod["metadata"]["labels"] is None  # untouched: left as written
    assert "gpuport.io/translated-from" in pod["metadata"]["annotations"]
    # One GPU has no peer to reach, so it keeps the H100's PCIe card beside its SXM5 module: two product
    # names, a required node affinity under the null `affinity:`.
    if target == "generic":
        (term,) = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ]
        assert term["matchExpressions"][0]["key"] == "nvidia.com/gpu.product"
    else:
        assert pod["spec"]["nodeSelector"] == {"node.kubernetes.io/instance-type": "Standard_ND96isr_H100_v5"}
    expected_tolerations = [dict(t) for t in context(target).target.tolerations] or None
    assert pod["spec"]["tolerations"] == expected_tolerations


TERMS = (
    "  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n"
    "        nodeSelectorTerms:\n"
)


@pytest.mark.parametrize(
    ("empty", "written", "said"),
    [
        ("  annotations:\n", "  annotations: []\n", "annotations is a list; Kubernetes reads a map there"),
        ("  annotations:\n", "  annotations: 3\n", "annotations is the int 3; Kubernetes reads a map there"),
        (
            "  affinity:\n",
            TERMS + "        - just-a-string\n",
            "nodeSelectorTerms holds the str 'just-a-string'; Kubernetes reads maps there",
        ),
        (
            "  affinity:\n",
            TERMS + "        - matchExpressions: [oops]\n",
            "matchExpressions holds the str 'oops'; Kubernetes reads maps there",
        ),
        (
            "  affinity:\n",
            TERMS + "          matchExpressions: []\n",
            "nodeSelectorTerms is a map; Kubernetes reads a list there",
        ),
    ],
)
def test_a_field_of_the_wrong_kind_is_said_with_its_name_not_a_traceback(tmp_path, empty, written, said):
    path = tmp_path / "pod.yaml"
    path.write_text(EMPTY_KEYS_POD.replace(empty, written))
    code, _, err = run_cli("translate", "--to", "generic", str(path))
    assert code == 1
    assert "Traceback" not in err
    assert f"Pod/trainer: denied: cannot edit the pod: {said}" in err


def test_json_output_lists_decisions_and_denials_exit_1(tmp_path):
    path = tmp_path / "pods.yaml"
    path.write_text(yaml.safe_dump(SOURCES["gke-mig"][1]) + "---\n" + yaml.safe_dump(SOURCES["gke-whole"][1]))
    code, out, _ = run_cli("translate", "--to", "oke", "-o", "json", str(path))
    assert code == 1
    decisions = json.loads(out)
    assert [d["allowed"] for d in decisions] == [False, True]
    assert "oke offers no MIG slices" in decisions[0]["messages"][0]
    assert decisions[1]["patch"]


def test_diff_output_and_stdin():
    code, out, _ = run_cli("translate", "--to", "eks", "--diff", "-", stdin=GKE_DEPLOYMENT)
    assert code == 0
    assert "-        cloud.google.com/gke-accelerator: nvidia-tesla-a100\n" in out
    assert "+        node.kubernetes.io/instance-type: p4d.24xlarge\n" in out
    assert "-          - name" not in out  # untouched lines keep their indentation


@pytest.mark.parametrize(
    ("manifest", "pointer"),
    [
        (
            {
                "apiVersion": "batch/v1",
                "kind": "CronJob",
                "metadata": {"name": "c"},
                "spec": {"jobTemplate": {"spec": {"template": {"spec": "POD"}}}},
            },
            ["spec", "jobTemplate", "spec", "template"],
        ),
        (
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "PyTorchJob",
                "metadata": {"name": "t"},
                "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 4, "template": {"spec": "POD"}}}},
            },
            ["spec", "pytorchReplicaSpecs", "Worker", "template"],
        ),
        (
            {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "metadata": {"name": "j"},
                "spec": {
                    "replicatedJobs": [{"name": "w", "template": {"spec": {"template": {"spec": "POD"}}}}]
                },
            },
            ["spec", "replicatedJobs", 0, "template", "spec", "template"],
        ),
    ],
)
def test_every_workload_kind_has_its_template_translated(tmp_path, manifest, pointer):
    text = yaml.safe_dump(manifest).replace(
        "spec: POD", "spec: " + json.dumps(SOURCES["gke-whole"][1]["spec"])
    )
    (tmp_path / "w.yaml").write_text(text)
    code, out, err = run_cli("translate", "--to", "eks", str(tmp_path / "w.yaml"))
    assert code == 0, err
    node = yaml.safe_load(out)
    for part in pointer:
        node = node[part]
    assert node["spec"]["nodeSelector"] == {"node.kubernetes.io/instance-type": "p4d.24xlarge"}


def test_from_restricts_the_dialect_read(tmp_path):
    # p4d.24xlarge means an A100 on EKS; read as AKS it is an unknown VM size.
    source = SOURCES["eks-whole"][1]
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(source))
    assert run_cli("translate", "--from", "eks", "--to", "gke", str(tmp_path / "p.yaml"))[0] == 0
    code, _, err = run_cli("translate", "--from", "aks", "--to", "gke", str(tmp_path / "p.yaml"))
    assert code == 1
    assert "names no GPU model gpuport knows" in err


def test_bad_input_exits_2(tmp_path, capsys):
    (tmp_path / "bad.yaml").write_text("a: [\n")
    assert main(["translate", "--to", "eks", str(tmp_path / "bad.yaml")]) == 2
    assert "not valid YAML" in capsys.readouterr().err
    assert main(["translate", "--to", "mars", str(tmp_path / "bad.yaml")]) == 2
    assert main(["translate", "--from", "venus", "--to", "eks", str(tmp_path / "bad.yaml")]) == 2
    assert "no cloud map named 'venus'" in capsys.readouterr().err


def test_lint_passes_the_shipped_maps():
    files = sorted(default_directory().glob("*.yaml"))
    code, out, _ = run_cli("lint", *map(str, files))
    assert code == 0
    said = out.strip().splitlines()
    assert len(said) == len(files) == 18 and all(line.endswith(": ok") for line in said)
    assert f"{default_directory() / 'gke.yaml'}: cloud map gke: ok" in said
    assert f"{default_directory() / 'gpus.yaml'}: GPU catalogue (22 models): ok" in said


def test_lint_says_every_schema_error_with_the_forms_allowed_and_what_it_does_not_lint(tmp_path):
    bad = tmp_path / "lab.yaml"
    bad.write_text(
        "name: lab\nresources:\n  whole: nvidia.com/gpu\n  mig:\n    form: mixed\n"
        "  shared:\n    form: timeslice\npolicy:\n  fractional: maybe\n"
    )
    pod = tmp_path / "pod.yaml"
    pod.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n")
    code, out, _ = run_cli("lint", str(bad), str(pod))
    assert code == 1
    assert out.strip().splitlines() == [
        f"{bad}:4: resources.mig: 'resource_prefix' is a required property",
        f"{bad}:6: resources.shared: not one of the forms it may take: none; resource (with resource); label "
        "(with label, values); memory (with memory_resource, memory_unit_bytes); annotation (with "
        "fraction_annotation, memory_annotation)",
        f"{bad}:9: policy.fractional: 'maybe' is not one of ['deny', 'mig', 'shared']",
        f"{pod}: nothing gpuport lints (Pod; it lints cloud maps, the GPU catalogue, ResourceQuotas and "
        "LimitRanges)",
    ]


def test_lint_points_at_the_broken_line(tmp_path):
    maps = tmp_path / "maps"
    shutil.copytree(default_directory(), maps)
    text = (maps / "gke.yaml").read_text().replace("      A100-40GB: nvidia-tesla-a100", "      A100-41GB: x")
    (maps / "gke.yaml").write_text(text)
    line = text.splitlines().index("      A100-41GB: x") + 1
    code, out, _ = run_cli("lint", str(maps / "gke.yaml"), str(maps / "eks.yaml"))
    assert code == 1
    assert out.strip().splitlines() == [
        f"{maps / 'gke.yaml'}:{line}: unknown GPU model 'A100-41GB' (models are the keys of gpus.yaml)",
        f"{maps / 'eks.yaml'}: cloud map eks: ok",
    ]


def test_lint_fails_a_map_whose_node_kinds_do_not_say_one_gpu_count_each(tmp_path):
    # A size a model label pins with no count, or with two, may be given a pod it cannot hold.
    maps = tmp_path / "maps"
    shutil.copytree(default_directory(), maps)
    text = (maps / "aks.yaml").read_text()
    text = text.replace("      Standard_NC64as_T4_v3: 4\n", "", 1)  # the T4 size's count is gone
    # A second entry of the same label (as EKS has for SageMaker sizes) counts one size again, wrongly.
    text = text.replace(
        "  - label: beta.kubernetes.io/instance-type",
        "  - label: node.kubernetes.io/instance-type\n    values: {H100-80GB: Standard_ND96isr_H100_v5}\n"
        "    gpus: {Standard_ND96isr_H100_v5: 4}\n  - label: beta.kubernetes.io/instance-type",
    )
    (maps / "aks.yaml").write_text(text)
    lines = text.splitlines()
    t4 = next(n for n, line in enumerate(lines, 1) if line.startswith("      T4: ["))
    again = next(n for n, line in enumerate(lines, 1) if "{Standard_ND96isr_H100_v5: 4}" in line)
    code, out, _ = run_cli("lint", str(maps / "aks.yaml"))
    assert code == 1
    label, where = "node.kubernetes.io/instance-type", maps / "aks.yaml"
    missing = "but says no GPU count, though its label counts others: a pod needing more GPUs than it holds"
    assert out.strip().splitlines() == [
        f"{where}:{t4}: {label}=Standard_NC64as_T4_v3 pins T4 {missing} may be sent there",
        f"{where}:{again}: {label}=Standard_ND96isr_H100_v5 holds 4 GPUs here but 8 in model_labels entry 1: "
        "a pod may be sent to a node that cannot hold it",
        # The alias entry shares the sizes' lines (a YAML alias): said at the same line.
        f"{where}:{t4}: beta.kubernetes.io/instance-type=Standard_NC64as_T4_v3 pins T4 {missing} "
        "may be sent there",
    ]


def test_lint_flags_limits_quota_keys_for_gpus(tmp_path):
    quota = tmp_path / "quota.yaml"
    quota.write_text(
        "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: gpus\nspec:\n  hard:\n"
        "    requests.nvidia.com/gpu: 8\n    limits.nvidia.com/gpu: 8\n    limits.cpu: 10\n"
    )
    code, out, _ = run_cli("lint", str(quota))
    assert code == 1
    assert out.strip() == (
        f"{quota}:8: limits.nvidia.com/gpu is never counted for extended resources; "
        "use requests.nvidia.com/gpu"
    )


def test_lint_reports_duplicate_map_names(tmp_path):
    maps = tmp_path / "maps"
    shutil.copytree(default_directory(), maps)
    shutil.copy(maps / "gke.yaml", maps / "gke-copy.yaml")
    code, out, _ = run_cli("lint", str(maps / "gke.yaml"), str(maps / "gke-copy.yaml"))
    assert code == 1
    assert "map name 'gke' is already used by" in out


def test_the_readme_s_first_try_prints_what_the_readme_shows():
    from tests.helpers import REPO

    readme = (REPO / "README.md").read_text()
    section = readme.split("## Try it on your manifests", 1)[1]
    command = section.split("```sh", 1)[1].split("```", 1)[0].strip().splitlines()[-1]
    shown = section.split("says each change on stderr:", 1)[1].split("```", 2)[1].strip()
    arguments = command.split("gpuport ", 1)[1].split()
    result = subprocess.run(
        [sys.executable, "-m", "webhook", *arguments], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == shown


def test_lint_says_every_kind_of_error_of_every_file_in_one_run(tmp_path):
    # A schema error, a model the catalogue lacks, a node kind without its GPU count and a name already
    # used, all in one file: one run says them all, not one kind per run.
    maps = tmp_path / "maps"
    shutil.copytree(default_directory(), maps)
    text = (maps / "aks.yaml").read_text()
    text = text.replace("      Standard_NC64as_T4_v3: 4\n", "", 1)
    text = text.replace(
        "      H100-80GB: Standard_ND96isr_H100_v5", "      H100-81GB: Standard_ND96isr_H100_v5", 1
    )
    text += "policy:\n  fractional: maybe\n"
    (maps / "aks-copy.yaml").write_text(text)
    lines = text.splitlines()
    code, out, _ = run_cli("lint", str(maps / "aks.yaml"), str(maps / "aks-copy.yaml"))
    assert code == 1
    said = [line for line in out.strip().splitlines() if line.startswith(str(maps / "aks-copy.yaml"))]
    where = maps / "aks-copy.yaml"
    assert f"{where}:{len(lines)}: policy.fractional: 'maybe' is not one of ['deny', 'mig', 'shared']" in said
    unknown = lines.index("      H100-81GB: Standard_ND96isr_H100_v5") + 1
    assert f"{where}:{unknown}: unknown GPU model 'H100-81GB' (models are the keys of gpus.yaml)" in said
    assert any("Standard_NC64as_T4_v3 pins T4 but says no GPU count" in line for line in said)
    assert f"{where}:1: map name 'aks' is already used by {maps / 'aks.yaml'}" in said


def test_lint_says_every_error_of_a_catalogue_in_one_run(tmp_path):
    maps = tmp_path / "maps"
    shutil.copytree(default_directory(), maps)
    catalogue = maps / "gpus.yaml"
    catalogue.write_text(catalogue.read_text() + "  X1:\n    memory_gib: lots\n  X2:\n    memory_gib: many\n")
    code, out, _ = run_cli("lint", str(catalogue))
    assert code == 1
    said = out.strip().splitlines()
    assert len([line for line in said if "memory_gib" in line or "X1" in line or "X2" in line]) >= 2, said
