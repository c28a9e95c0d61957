"""Source manifests, one per dialect, and the expected result on every shipped target map.

Shared by the translation matrix, the round-trip tests and the CLI tests. Expected results are
written by hand from reference/clouds.md and gpus.md, never computed by the code under test.
"""

PRODUCT = "nvidia.com/gpu.product"
A100_40 = ["NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-PCIE-40GB"]
H100 = ["NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-PCIe"]
GKE_ACC = "cloud.google.com/gke-accelerator"
INSTANCE = "node.kubernetes.io/instance-type"
TARGETS = [
    "generic",
    "generic-mig-single",
    "gke",
    "eks",
    "aks",
    "ack",
    "tke",
    "cce",
    "oke",
    "hami",
    "volcano",
    "volcano-gpushare",
    "koordinator",
    "kai",
    "amd",
    "dra-nvidia",
    "dra-amd",
]
AMD_TARGETS = ("amd", "dra-amd")
# A whole GPU on GKE must not land on a MIG partition or a time-shared GPU: both are nvidia.com/gpu there.
ABSENT = "absent"
GKE_WHOLE = {
    "cloud.google.com/gke-gpu-partition-size": ABSENT,
    "cloud.google.com/gke-gpu-sharing-strategy": ABSENT,
}
AKS_TOLERATION = [{"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]


def pod(resources, selector=None, name="work"):
    spec = {
        "containers": [
            {
                "name": "main",
                "image": "nvidia/cuda:12.4.0-base-ubuntu22.04",
                "resources": {"limits": dict(resources), "requests": dict(resources)},
            }
        ]
    }
    if selector:
        spec["nodeSelector"] = dict(selector)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": spec,
    }


def kai_pod(annotations):
    """KAI asks for a share by annotation, for pods its scheduler schedules; no GPU resource."""
    body = pod({})
    del body["spec"]["containers"][0]["resources"]
    body["metadata"]["annotations"] = dict(annotations)
    body["spec"]["schedulerName"] = "kai-scheduler"
    return body


# name → (ask class, pod, targets on which it is already native and must stay byte-for-byte)
SOURCES = {
    "generic-whole": (
        "W1",
        pod({"nvidia.com/gpu": "1"}, {PRODUCT: "NVIDIA-A100-SXM4-40GB"}),
        {"generic", "generic-mig-single", "tke", "hami", "volcano", "volcano-gpushare", "kai"},
    ),
    "gke-whole": ("W1", pod({"nvidia.com/gpu": "1"}, {GKE_ACC: "nvidia-tesla-a100"}), {"gke"}),
    "eks-whole": ("W1", pod({"nvidia.com/gpu": "1"}, {INSTANCE: "p4d.24xlarge"}), {"eks"}),
    "aks-whole": ("W1", pod({"nvidia.com/gpu": "1"}, {INSTANCE: "Standard_ND96asr_v4"}), {"aks"}),
    "oke-whole": ("W1", pod({"nvidia.com/gpu": "1"}, {INSTANCE: "BM.GPU4.8"}), {"oke"}),
    "ack-whole": (
        "W1",
        pod({"nvidia.com/gpu": "1"}, {"aliyun.accelerator/nvidia_name": "NVIDIA-A100-SXM4-40GB"}),
        {"ack"},
    ),
    "cce-whole": ("W1", pod({"nvidia.com/gpu": "1"}, {"accelerator": "nvidia-a100-40g"}), {"cce"}),
    "generic-8": (
        "W8",
        pod({"nvidia.com/gpu": "8"}, {PRODUCT: "NVIDIA-H100-80GB-HBM3"}),
        {"generic", "generic-mig-single", "tke", "hami", "volcano", "volcano-gpushare", "kai"},
    ),
    "gke-8": ("W8", pod({"nvidia.com/gpu": "8"}, {GKE_ACC: "nvidia-h100-80gb"}), {"gke"}),
    "eks-8": ("W8", pod({"nvidia.com/gpu": "8"}, {INSTANCE: "p5.48xlarge"}), {"eks"}),
    "generic-mig": (
        "M",
        pod({"nvidia.com/mig-1g.10gb": "1"}, {PRODUCT: "NVIDIA-H100-80GB-HBM3"}),
        {"generic", "kai", "hami"},  # HAMi serves the mixed-strategy names as written
    ),
    "mig-single": (
        "M",
        pod({"nvidia.com/gpu": "1"}, {PRODUCT: "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"}),
        {"generic-mig-single"},
    ),
    "gke-mig": (
        "M",
        pod(
            {"nvidia.com/gpu": "1"},
            {GKE_ACC: "nvidia-h100-80gb", "cloud.google.com/gke-gpu-partition-size": "1g.10gb"},
        ),
        {"gke"},
    ),
    "generic-shared": ("S", pod({"nvidia.com/gpu.shared": "1"}), {"generic", "generic-mig-single", "eks"}),
    "gke-shared": (
        "S",
        pod({"nvidia.com/gpu": "1"}, {"cloud.google.com/gke-gpu-sharing-strategy": "time-sharing"}),
        {"gke"},
    ),
    "ack-shared": ("S8", pod({"aliyun.com/gpu-mem": "8"}), {"ack"}),
    "tke-shared": ("S8", pod({"tke.cloud.tencent.com/qgpu-memory": "8"}), {"tke"}),
    "cce-shared": ("S8", pod({"volcano.sh/gpu-mem.128Mi": "64"}), {"cce"}),
    # Native pods are left alone even without the layer's schedulerName: its own webhook sets that.
    "hami-shared": ("S8", pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "8192"}), {"hami"}),
    "volcano-shared": (
        "S8",
        pod({"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "8192"}),
        {"volcano"},
    ),
    "volcano-legacy-shared": (
        "S8",
        pod({"volcano.sh/gpu-number": "1", "volcano.sh/gpu-memory": "8192"}),
        {"volcano-gpushare"},
    ),
    "kai-shared": ("S8", kai_pod({"gpu-memory": "8192"}), {"kai"}),
    "koordinator-shared": (
        "S8",
        pod({"koordinator.sh/gpu.shared": "1", "koordinator.sh/gpu-memory": "8Gi"}),
        {"koordinator"},
    ),
    # AKS: ND MI300X v5; EKS: g4ad (Radeon Pro V520); OKE: BM.GPU.MI300X.8
    "amd-whole": ("A", pod({"amd.com/gpu": "1"}), {"amd", "aks", "eks", "oke"}),
}


def ok(resources, requires=None, scheduler=None, tolerations=None, claims=None):
    expected = {
        "resources": resources,
        "requires": requires or {},
        "scheduler": scheduler,
        "tolerations": tolerations,
    }
    if claims is not None:
        expected["claims"] = claims
    return expected


# The NVIDIA DRA driver's names (cloudmaps/dra-nvidia.yaml): the driver is the attribute domain.
DRA_PRODUCT = 'device.attributes["gpu.nvidia.com"].productName'
DRA_PROFILE = 'device.attributes["gpu.nvidia.com"].profile'
DRA_TOLERATION = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def dra(device_class, count, *selectors):
    """A pod on the DRA cluster: no GPU resource, one claim whose template asks for this."""
    claim = {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": count}
    if selectors:
        claim["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return ok({}, tolerations=DRA_TOLERATION, claims=[claim])


def denied(text):
    return {"denied": text}


NOT_AMD = denied("amd offers AMD GPUs only")
NOT_DRA_AMD = denied("dra-amd offers AMD GPUs only")
W1_PRODUCT = {PRODUCT: A100_40}
# Every W8 source's nodes join their H100s by NVSwitch (p5.48xlarge, A3's nvidia-h100-80gb, the SXM5
# product name): an 8-GPU pod is never sent to H100 PCIe cards. A one-GPU slice keeps both.
H100_SXM = ["NVIDIA-H100-80GB-HBM3"]
W8_SXM = {PRODUCT: H100_SXM}
W8_PRODUCT = {PRODUCT: H100}

EXPECTED = {
    "W1": {
        "generic": ok({"nvidia.com/gpu": "1"}, W1_PRODUCT),
        "generic-mig-single": ok({"nvidia.com/gpu": "1"}, W1_PRODUCT),
        "gke": ok({"nvidia.com/gpu": "1"}, {GKE_ACC: ["nvidia-tesla-a100"], **GKE_WHOLE}),
        "eks": ok({"nvidia.com/gpu": "1"}, {INSTANCE: ["p4d.24xlarge"]}),
        "aks": ok({"nvidia.com/gpu": "1"}, {INSTANCE: ["Standard_ND96asr_v4"]}, tolerations=AKS_TOLERATION),
        "ack": ok({"nvidia.com/gpu": "1"}, {"aliyun.accelerator/nvidia_name": ["NVIDIA-A100-SXM4-40GB"]}),
        "tke": ok({"nvidia.com/gpu": "1"}, W1_PRODUCT),
        "cce": ok({"nvidia.com/gpu": "1"}, {"accelerator": ["nvidia-a100-40g"]}),
        "oke": ok({"nvidia.com/gpu": "1"}, {INSTANCE: ["BM.GPU4.8"]}),
        "hami": ok({"nvidia.com/gpu": "1"}, W1_PRODUCT, "hami-scheduler"),
        "volcano": ok({"nvidia.com/gpu": "1"}, W1_PRODUCT, "volcano"),
        "volcano-gpushare": ok({"nvidia.com/gpu": "1"}, W1_PRODUCT, "volcano"),
        "kai": ok({"nvidia.com/gpu": "1"}, W1_PRODUCT, "kai-scheduler"),
        "koordinator": ok(
            {"nvidia.com/gpu": "1"}, {"node.koordinator.sh/gpu-model": A100_40}, "koord-scheduler"
        ),
        "amd": NOT_AMD,
        "dra-amd": NOT_DRA_AMD,
        "dra-nvidia": dra(
            "gpu.nvidia.com", 1, f'{DRA_PRODUCT} in ["NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB"]'
        ),
    },
    "W8": {
        "generic": ok({"nvidia.com/gpu": "8"}, W8_SXM),
        "generic-mig-single": ok({"nvidia.com/gpu": "8"}, W8_SXM),
        "gke": ok(
            {"nvidia.com/gpu": "8"}, {GKE_ACC: ["nvidia-h100-80gb", "nvidia-h100-mega-80gb"], **GKE_WHOLE}
        ),
        "eks": ok({"nvidia.com/gpu": "8"}, {INSTANCE: ["p5.48xlarge"]}),
        "aks": ok(
            {"nvidia.com/gpu": "8"}, {INSTANCE: ["Standard_ND96isr_H100_v5"]}, tolerations=AKS_TOLERATION
        ),
        # ACK and CCE list no H100: the equivalent with at least as much memory is the A100 80GB.
        "ack": ok({"nvidia.com/gpu": "8"}, {"aliyun.accelerator/nvidia_name": ["NVIDIA-A100-SXM4-80GB"]}),
        "tke": ok({"nvidia.com/gpu": "8"}, W8_SXM),
        "cce": ok({"nvidia.com/gpu": "8"}, {"accelerator": ["nvidia-a100-80g"]}),
        "oke": ok({"nvidia.com/gpu": "8"}, {INSTANCE: ["BM.GPU.H100.8"]}),
        "hami": ok({"nvidia.com/gpu": "8"}, W8_SXM, "hami-scheduler"),
        "volcano": ok({"nvidia.com/gpu": "8"}, W8_SXM, "volcano"),
        "volcano-gpushare": ok({"nvidia.com/gpu": "8"}, W8_SXM, "volcano"),
        "kai": ok({"nvidia.com/gpu": "8"}, W8_SXM, "kai-scheduler"),
        "koordinator": ok(
            {"nvidia.com/gpu": "8"}, {"node.koordinator.sh/gpu-model": H100_SXM}, "koord-scheduler"
        ),
        "amd": NOT_AMD,
        "dra-amd": NOT_DRA_AMD,
        "dra-nvidia": dra(
            "gpu.nvidia.com", 8, f'{DRA_PRODUCT} in ["NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe"]'
        ),
    },
    "M": {
        "generic": ok({"nvidia.com/mig-1g.10gb": "1"}, W8_PRODUCT),
        "generic-mig-single": ok({"nvidia.com/gpu": "1"}, {PRODUCT: [f"{n}-MIG-1g.10gb" for n in H100]}),
        "gke": ok(
            {"nvidia.com/gpu": "1"},
            {
                "cloud.google.com/gke-gpu-partition-size": ["1g.10gb"],
                GKE_ACC: ["nvidia-h100-80gb", "nvidia-h100-mega-80gb"],
            },
        ),
        "eks": ok({"nvidia.com/mig-1g.10gb": "1"}, {INSTANCE: ["p5.48xlarge", "p5.4xlarge"]}),
        "aks": ok(
            {"nvidia.com/mig-1g.10gb": "1"},
            {INSTANCE: ["Standard_ND96isr_H100_v5"]},
            tolerations=AKS_TOLERATION,
        ),
        "kai": ok({"nvidia.com/mig-1g.10gb": "1"}, W8_PRODUCT, "kai-scheduler"),
        # HAMi's and Volcano's dynamic MIG cut an instance with at least the memory asked for.
        "hami": ok({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "10240"}, W8_PRODUCT, "hami-scheduler"),
        "volcano": ok(
            {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "10240"}, W8_PRODUCT, "volcano"
        ),
        **{
            t: denied(f"{t} offers no MIG slices")
            for t in ("ack", "tke", "cce", "oke", "volcano-gpushare", "koordinator")
        },
        "amd": NOT_AMD,
        "dra-amd": NOT_DRA_AMD,
        "dra-nvidia": dra(
            "mig.nvidia.com",
            1,
            f'{DRA_PROFILE} == "1g.10gb"',
            f'{DRA_PRODUCT} in ["NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe"]',
        ),
    },
    "S": {
        "generic": ok({"nvidia.com/gpu.shared": "1"}),
        "generic-mig-single": ok({"nvidia.com/gpu.shared": "1"}),
        "gke": ok({"nvidia.com/gpu": "1"}, {"cloud.google.com/gke-gpu-sharing-strategy": ["time-sharing"]}),
        "eks": ok({"nvidia.com/gpu.shared": "1"}),
        "aks": denied("aks offers no GPU sharing"),
        "oke": denied("oke offers no GPU sharing"),
        "kai": denied("kai shares GPUs by gpu-fraction or gpu-memory (MiB)"),
        **{
            t: denied("shared GPU without a memory size")
            for t in ("ack", "tke", "cce", "hami", "volcano", "volcano-gpushare", "koordinator")
        },
        "amd": NOT_AMD,
        "dra-amd": NOT_DRA_AMD,
        "dra-nvidia": denied("a shared GPU there is one claim several pods reference"),
    },
    "S8": {
        "generic": ok({"nvidia.com/gpu.shared": "1"}),
        "generic-mig-single": ok({"nvidia.com/gpu.shared": "1"}),
        "gke": ok({"nvidia.com/gpu": "1"}, {"cloud.google.com/gke-gpu-sharing-strategy": ["time-sharing"]}),
        "eks": ok({"nvidia.com/gpu.shared": "1"}),
        "aks": denied("aks offers no GPU sharing"),
        "oke": denied("oke offers no GPU sharing"),
        "ack": ok({"aliyun.com/gpu-mem": "8"}),
        "tke": ok({"tke.cloud.tencent.com/qgpu-memory": "8"}),
        "cce": ok({"volcano.sh/gpu-mem.128Mi": "64"}),
        "hami": ok({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "8192"}, scheduler="hami-scheduler"),
        "volcano": ok({"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "8192"}, scheduler="volcano"),
        "volcano-gpushare": ok(
            {"volcano.sh/gpu-number": "1", "volcano.sh/gpu-memory": "8192"}, scheduler="volcano"
        ),
        "kai": ok({}, scheduler="kai-scheduler"),  # the share is the gpu-memory annotation
        "koordinator": ok(
            {"koordinator.sh/gpu.shared": "1", "koordinator.sh/gpu-memory": "8192Mi"},
            scheduler="koord-scheduler",
        ),
        "amd": NOT_AMD,
        "dra-amd": NOT_DRA_AMD,
        "dra-nvidia": denied("a shared GPU there is one claim several pods reference"),
    },
    "A": {
        **{
            t: denied(f"asks for an AMD GPU (amd.com/gpu: 1); {t} offers NVIDIA GPUs only")
            for t in TARGETS
            if t not in (*AMD_TARGETS, "aks", "eks", "oke")
        },
        "amd": ok({"amd.com/gpu": "1"}),
        # AKS, EKS and OKE have AMD GPUs too (ND MI300X v5, g4ad, BM.GPU.MI300X.8): the ask is their own
        # there (amd-whole is native on each).
        "aks": ok({"amd.com/gpu": "1"}, tolerations=AKS_TOLERATION),
        "eks": ok({"amd.com/gpu": "1"}),
        "oke": ok({"amd.com/gpu": "1"}),
        "dra-amd": ok(
            {},
            tolerations=None,
            claims=[
                {
                    "deviceClassName": "gpu.amd.com",
                    "allocationMode": "ExactCount",
                    "count": 1,
                    "selectors": [
                        {"cel": {"expression": 'device.attributes["gpu.amd.com"].type == "amdgpu"'}}
                    ],
                }
            ],
        ),
    },
}


# Where one source differs from its ask class: the product label it wrote is HAMi's and Volcano's own,
# so it stays.
EXPECTED_FOR_SOURCE = {
    ("generic-mig", "hami"): ok(
        {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "10240"}, {PRODUCT: H100[:1]}, "hami-scheduler"
    ),
    ("generic-mig", "volcano"): ok(
        {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "10240"}, {PRODUCT: H100[:1]}, "volcano"
    ),
}


def summarize(pod_obj, claim_templates=()):
    """The GPU-relevant outcome of a translated pod, in the shape EXPECTED uses; on a DRA cluster,
    what the first container's claims ask for, read from the templates they are made from."""
    spec = pod_obj["spec"]
    resources = spec["containers"][0].get("resources") or {}
    limits = resources.get("limits", {})
    assert resources.get("requests", limits) == limits, "requests must equal limits for extended resources"
    requires = {k: [v] for k, v in (spec.get("nodeSelector") or {}).items()}
    terms = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    ).get("nodeSelectorTerms") or []
    for term in terms:
        for expression in term.get("matchExpressions") or []:
            assert expression["operator"] in ("In", "DoesNotExist")
            absent = expression["operator"] == "DoesNotExist"
            requires[expression["key"]] = ABSENT if absent else expression["values"]
    summary = {
        "resources": dict(limits),
        "requires": requires,
        "scheduler": spec.get("schedulerName"),
        "tolerations": spec.get("tolerations"),
    }
    if spec.get("resourceClaims"):
        templates = {t["metadata"]["name"]: t for t in claim_templates}
        made_from = {c["name"]: c["resourceClaimTemplateName"] for c in spec["resourceClaims"]}
        summary["claims"] = []
        for used in resources.get("claims", []):
            for request in templates[made_from[used["name"]]]["spec"]["spec"]["devices"]["requests"]:
                # Class, count and selectors, wherever the API version nests them.
                flat = {**request, **request.get("exactly", {})}
                summary["claims"].append({k: v for k, v in flat.items() if k not in ("name", "exactly")})
    return summary
