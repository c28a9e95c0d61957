"""The DRA drivers' published shapes (tests/manifests/dra/, written for this project in the shapes of
NVIDIA's demo and bats specs and AMD's examples), translated with `gpuport translate` to gke, eks and
generic as a platform engineer would run it: each is translated (its claims gone, the target's
resources in their place) or refused naming the field that cannot be said; none exits 0 with its GPU
claims still in place."""

from pathlib import Path

import pytest
import yaml

from webhook.commands.cli import main
from webhook.core.vocabulary.templates import pod_templates

SHAPES = Path(__file__).parents[1] / "manifests" / "dra"
TARGETS = ["gke", "eks", "generic"]

# What each shape becomes on a device-plugin cluster: the resources its containers ask for, or the
# words of the refusal that names what cannot be said.
TRANSLATED = {
    "nvidia-gpu-per-pod.yaml": [{"nvidia.com/gpu": 1}],
    "nvidia-two-gpus-v1beta1.yaml": [{"nvidia.com/gpu": 2}],
    "nvidia-first-available.yaml": [{"nvidia.com/gpu": 1}],  # the H100, its first alternative
}
REFUSED = {
    "nvidia-two-containers-one-gpu.yaml": 'claim shared is shared by containers[0] "left" and',
    "nvidia-claim-shared-by-pods.yaml": "spec.resourceClaims[name=shared].resourceClaimName",
    "nvidia-mig-one-parent.yaml": "devices.constraints",
    "nvidia-sharing-config.yaml": "devices.config (GpuConfig)",
    "nvidia-a100-time-sliced.yaml": "lowerAscii().matches",
    "nvidia-any-mig.yaml": "asks for any MIG device",
    "nvidia-mig-by-capacity.yaml": "bounds the capacity multiprocessors",
    "amd-claim-shared-by-pods.yaml": "resourceClaimName",
    "amd-partitions.yaml": "asks for GPU partitions",
    "amd-single-gpu.yaml": "asks for an AMD GPU",
    # Without the target's nodes nobody can say how many GPUs "every one of a node" is.
    "gke-every-gpu-of-node.yaml": "(allocationMode: All), and gpuport cannot see how many devices",
}


def translate(capsys, name, target, *extra):
    code = main(["translate", "--to", target, str(SHAPES / name), *extra])
    out, err = capsys.readouterr()
    return code, [d for d in yaml.safe_load_all(out) if d], err


def gpu_claims_left(documents):
    """Pod templates that still name a claim."""
    return [
        template
        for doc in documents
        for _, template in pod_templates(doc)
        if (template.get("spec") or {}).get("resourceClaims")
    ]


def test_every_shape_is_covered():
    assert {p.name for p in SHAPES.glob("*.yaml")} == set(TRANSLATED) | set(REFUSED) | {
        "nvidia-mig-class.yaml",
        "nvidia-mig-per-container.yaml",
    }


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", sorted(p.name for p in SHAPES.glob("*.yaml")))
def test_no_shape_exits_0_with_its_gpu_claims_in_place(capsys, name, target):
    code, documents, err = translate(capsys, name, target)
    if code == 0:
        assert gpu_claims_left(documents) == [], err
        assert not [d for d in documents if d.get("kind") in ("ResourceClaimTemplate", "DeviceClass")], err
    else:
        assert code == 1 and "denied: " in err


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(("name", "limits"), sorted(TRANSLATED.items()))
def test_shapes_a_device_plugin_can_say_are_translated(capsys, name, limits, target):
    code, documents, err = translate(capsys, name, target)
    assert code == 0, err
    pods = [t["spec"] for d in documents for _, t in pod_templates(d)]
    assert pods and all([c["resources"].get("limits") for c in spec["containers"]] == limits for spec in pods)
    assert all("claims" not in c["resources"] for spec in pods for c in spec["containers"])


# EKS sells AMD GPUs (g4ad): an AMD claim becomes amd.com/gpu there (test_an_amd_claim_becomes_eks_s_amd_gpu).
SAYABLE = {("amd-single-gpu.yaml", "eks")}


@pytest.mark.parametrize(
    ("name", "words", "target"),
    [(n, w, t) for n, w in sorted(REFUSED.items()) for t in TARGETS if (n, t) not in SAYABLE],
)
def test_shapes_a_device_plugin_cannot_say_are_refused_naming_the_field(capsys, name, words, target):
    code, _, err = translate(capsys, name, target)
    assert code == 1
    assert words in err


def test_first_available_takes_the_first_alternative_the_target_offers_and_says_which(capsys):
    code, documents, err = translate(capsys, "nvidia-first-available.yaml", "generic")
    assert code == 0
    assert "request gpu lists alternatives (firstAvailable): the first gpuport can say is h100" in err
    (pod,) = documents
    assert "NVIDIA-H100-80GB-HBM3" in str(pod["spec"]["affinity"])


def test_requests_per_container_become_each_container_s_own_slice(capsys):
    code, documents, err = translate(capsys, "nvidia-mig-per-container.yaml", "generic")
    assert code == 0, err
    (job,) = documents
    containers = job["spec"]["template"]["spec"]["containers"]
    assert [c["resources"]["limits"] for c in containers] == [
        {"nvidia.com/mig-1g.10gb": 1},
        {"nvidia.com/mig-3g.40gb": 1},
    ]
    # GKE partitions a node one way: two sizes in one pod cannot both be had there, and are refused
    # rather than both given the larger.
    code, _, err = translate(capsys, "nvidia-mig-per-container.yaml", "gke")
    assert code == 1
    assert "different cloud.google.com/gke-gpu-partition-size (1g.10gb and 3g.40gb)" in err


def test_a_class_no_map_names_is_read_from_its_device_class_or_refused_naming_it(capsys, tmp_path):
    code, documents, err = translate(capsys, "nvidia-mig-class.yaml", "generic")
    assert code == 0, err
    (pod,) = documents  # the template and the class are left out with it
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/mig-1g.12gb": 1}
    assert "DeviceClass/mig-1g-12gb.gpu.nvidia.com: gpuport: left out" in err
    # Without the DeviceClass beside it, gpuport cannot tell what the class gives: said, exit 1.
    text = (SHAPES / "nvidia-mig-class.yaml").read_text()
    without = tmp_path / "without-class.yaml"
    without.write_text(text.split("---\n", 1)[1])
    code = main(["translate", "--to", "eks", str(without)])
    _, err = capsys.readouterr()
    assert code == 1
    assert "device class 'mig-1g-12gb.gpu.nvidia.com' is not one a loaded map names" in err
    # To a DRA cluster it runs as written, and what a GPU quota would do with it is said, not passed over.
    code = main(["translate", "--to", "dra-nvidia", str(without)])
    _, err = capsys.readouterr()
    assert code == 0
    assert (
        "gpuport: claim slice (ResourceClaimTemplate small-slice): request 'slice': device class "
        "'mig-1g-12gb.gpu.nvidia.com' is not one a loaded map names, and gpuport could not read it; a "
        "namespace with a GPU quota or GPU limits refuses this pod"
    ) in err


def test_the_preflight_lists_a_claim_it_cannot_count_among_what_it_did_not_look_into():
    from tests.helpers import context
    from webhook.core.migration.preflight import preflight

    documents = [d for d in yaml.safe_load_all((SHAPES / "nvidia-mig-class.yaml").read_text()) if d][1:]
    report = preflight(documents, context("dra-nvidia").target, context("eks"), None)
    assert report.unread == [
        "Pod/dra-demo/by-class: claim slice (ResourceClaimTemplate small-slice): request 'slice': device "
        "class 'mig-1g-12gb.gpu.nvidia.com' is not one a loaded map names, and gpuport could not read it"
    ]


def test_amd_s_single_gpu_example_becomes_a_rocm_device_plugin_ask_and_says_the_type_was_assumed(capsys):
    code, documents, err = translate(capsys, "amd-single-gpu.yaml", "amd")
    assert code == 0, err
    (pod,) = documents
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"amd.com/gpu": 1}
    assert "request gpu of gpu.amd.com does not select a type: read as whole GPUs" in err


@pytest.mark.parametrize("name", sorted(p.name for p in SHAPES.glob("*.yaml")))
def test_to_a_dra_cluster_every_shape_runs_as_written(capsys, name):
    """Claims, classes and templates unchanged; only the map's GPU-node toleration is added where a pod
    lacks it (it would not schedule on a tainted GPU node without)."""
    target = "dra-amd" if name.startswith("amd-") else "dra-nvidia"
    code, documents, err = translate(capsys, name, target)
    assert code == 0, err
    written = [d for d in yaml.safe_load_all((SHAPES / name).read_text()) if d]
    for doc in (*documents, *written):
        for _, template in pod_templates(doc):
            template["spec"].pop("tolerations", None)
            template.pop("metadata", None)  # where the toleration's translated-from record goes
    assert documents == written


def node(name, labels, gpus):
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": {"nvidia.com/gpu": str(gpus)}},
    }


def inventory(tmp_path, *nodes):
    path = tmp_path / "nodes.yaml"
    path.write_text(yaml.safe_dump_all(nodes))
    return str(path)


KIND, ACCELERATOR = "node.kubernetes.io/instance-type", "cloud.google.com/gke-accelerator"
PARTITION = "cloud.google.com/gke-gpu-partition-size"


def test_every_gpu_of_a_node_is_the_count_each_of_the_targets_gpu_nodes_holds(capsys, tmp_path):
    h100 = {KIND: "a3-highgpu-8g", ACCELERATOR: "nvidia-h100-80gb"}
    # A partitioned pool's nvidia.com/gpu counts partitions, not GPUs: it does not say the number.
    nodes = inventory(
        tmp_path,
        node("a", h100, 8),
        node("b", h100, 8),
        node("mig", {**h100, PARTITION: "1g.10gb"}, 7),
    )
    code, documents, err = translate(capsys, "gke-every-gpu-of-node.yaml", "gke", "--inventory", nodes)
    assert code == 0, err
    (spec,) = [t["spec"] for d in documents for _, t in pod_templates(d)]
    assert spec["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": 8}}
    assert "resourceClaims" not in spec and not [d for d in documents if d["kind"] == "ResourceClaimTemplate"]
    assert "(allocationMode: All): 8, what each GPU node holds" in err


def test_every_gpu_of_a_node_is_refused_naming_each_kinds_count_when_nodes_differ(capsys, tmp_path):
    nodes = inventory(
        tmp_path,
        node("a", {KIND: "a3-highgpu-8g", ACCELERATOR: "nvidia-h100-80gb"}, 8),
        node("b", {KIND: "g2-standard-4", ACCELERATOR: "nvidia-l4"}, 1),
    )
    code, _, err = translate(capsys, "gke-every-gpu-of-node.yaml", "gke", "--inventory", nodes)
    assert code == 1
    assert "do not all hold one number (8 on a3-highgpu-8g, 1 on g2-standard-4): ask for a count" in err
    assert err.count("denied:") == 1 and err.count("allocationMode: All") == 1


def test_the_webhook_reads_every_gpu_of_a_node_from_its_view_of_the_nodes_as_translate_does():
    # One mechanism: the claim objects a pod's claims are read from answer how many GPUs a node holds
    # from the context's view of the nodes, for the webhook's pipeline as for the offline commands.
    from tests.helpers import parsed, review_of
    from webhook.config.cloudmap import default_directory
    from webhook.config.loading import build_context
    from webhook.core.deciding import pipeline
    from webhook.core.vocabulary.inventory import parse_inventory

    documents = list(yaml.safe_load_all((SHAPES / "gke-every-gpu-of-node.yaml").read_text()))
    claim_template = next(d for d in documents if d["kind"] == "ResourceClaimTemplate")
    (_, template), *_ = [t for d in documents for t in pod_templates(d)]
    h100 = {KIND: "a3-highgpu-8g", ACCELERATOR: "nvidia-h100-80gb"}
    inventory = parse_inventory([node("a", h100, 8), node("b", h100, 8)])
    ctx = build_context(default_directory(), "gke", inventory=inventory)

    class Templates:  # the cluster adapter, answering the pod's template and no ResourceSlices
        def referenced(self, namespace, pod):
            return {"node-gpus": claim_template}.get

        def charged_uids(self, namespace, names, context):
            return {}  # no GPU budget here

    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}, **template}
    decision = pipeline.mutate(parsed(review_of(body)), ctx, claims=Templates())
    assert decision.allowed, decision.message
    assert any(
        op["value"] == {"nvidia.com/gpu": "8"} for op in decision.patch if op["path"].endswith("/limits")
    )


def test_an_amd_claim_becomes_eks_s_amd_gpu(capsys):
    # EKS's g4ad instances (AMD Radeon Pro V520) run AMD's device plugin: one AMD GPU by claim is one
    # amd.com/gpu there, where every other target here refuses it.
    code, documents, err = translate(capsys, "amd-single-gpu.yaml", "eks")
    assert code == 0, err
    (pod,) = documents
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"amd.com/gpu": 1}
    assert "resourceClaims" not in pod["spec"]
