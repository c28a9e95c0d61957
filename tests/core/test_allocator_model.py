"""The GPU budget judged by a model of the allocator (issue 35): whatever a pod's DRA claims and the
extended resources a DeviceClass stands for (KEP-5004) could be given on any one node, gpuport charges
at least that much against a GPU quota, or refuses the pod as one it cannot count.

Clusters are generated in the shapes NVIDIA's and AMD's DRA drivers publish (whole GPUs, MIG devices in
valid layouts, AMD GPUs in SPX mode or split into partitions that carry their GPU's PCI bus id), with
the drivers' own DeviceClasses and others an administrator may add (any selector, with or without an
extendedResourceName, made at different times); pods name claims by template and claims made ahead,
of every v1 shape: counts, All, firstAvailable, selectors, capacity.requests, adminAccess. The judge
is tests/reference_allocator.py, an upper bound of what the real allocator could give. gpuport is
asked the way a quota'd pod create asks it: the cluster adapter reads what the pod needs from a fake
API server, the pipeline reads the pod's demand, and the quota gate decides against a quota just below
what the judge found.

Admin access is charged like any other request: such a claim ignores every other claim to its devices,
so its pod may run work on GPUs it would otherwise not get, and a namespace allowed admin access (its
`resource.kubernetes.io/admin-access` label) is still held to its GPU budget. Charging a GPU another
namespace also pays for errs on the safe side; not charging it would be a way past the budget.
"""

import json
from decimal import Decimal
from fractions import Fraction

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from kubernetes.client.exceptions import ApiException

from tests.helpers import parsed, review_of
from tests.quota_fakes import FakeView
from tests.reference_allocator import (
    CLASS_RESOURCE_PREFIX,
    PCI_BUS,
    Cluster,
    Device,
    DeviceClass,
    Expr,
    Request,
    most_on_a_node,
    render,
)
from webhook.adapters.kube.claim_templates import ClaimTemplateStore
from webhook.adapters.kube.quota_gate import QuotaGate
from webhook.config.cloudmap import default_directory, load_directory
from webhook.config.loading import ClusterDra, with_cluster_dra
from webhook.core.budget.equivalents import pod_use
from webhook.core.budget.quota import Quota
from webhook.core.deciding.context import Context
from webhook.core.deciding.pipeline import read_pod_demand
from webhook.core.vocabulary.catalogue import MigProfile
from webhook.core.vocabulary.dialects import Dialects
from webhook.core.vocabulary.workloads import read_pod

LOADED = load_directory(default_directory())
CATALOGUE = LOADED.catalogue
NV, AMD = "gpu.nvidia.com", "gpu.amd.com"
NAMESPACE = "team-a"

# What each driver names its models (the maps' product_names: the drivers' published values), for the
# models the catalogue holds.
NV_PRODUCTS = {
    model: names
    for model, names in LOADED.maps["dra-nvidia"].dra.product_names.items()
    if model in CATALOGUE.models
}
MI300X = LOADED.maps["dra-amd"].dra.product_names["MI300X"][0]
PRODUCTS = sorted({n for names in NV_PRODUCTS.values() for n in names} | {MI300X})
PROFILES = sorted({p for model in NV_PRODUCTS for p in CATALOGUE.models[model].profiles})
ARCHITECTURES = sorted({CATALOGUE.models[m].architecture for m in NV_PRODUCTS})
# AMD's compute partitioning modes and the partitions each splits a GPU into (SPX: the whole GPU).
AMD_MODES = {"spx": 1, "dpx": 2, "qpx": 4, "cpx": 8}
TYPES = ("gpu", "mig", "amdgpu", "amdgpu-partition")
# The classes the drivers install (NVIDIA's chart, AMD's chart): published selectors, published names.
DRIVER_CLASSES = {
    NV: (("and", ("driver", "==", NV), ("attr", NV, "type", "==", "gpu")),),
    "mig.nvidia.com": (("and", ("driver", "==", NV), ("attr", NV, "type", "==", "mig")),),
    AMD: (("driver", "==", AMD),),
}
EXTENDED_NAMES = ("example.com/gpu", "nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "amd.com/gpu")
CREATED = ("2026-01-01T00:00:00Z", "2026-06-01T00:00:00Z")


def bus_id(node: int, gpu: int) -> str:
    return f"0000:{node:02x}:{gpu:02x}.0"


@st.composite
def mig_layout(draw, model):
    """MIG profiles one GPU can hold at once: within its compute slices and each profile's instances."""
    found = CATALOGUE.models[model]
    wanted = draw(st.lists(st.sampled_from(sorted(found.profiles)), max_size=7))
    layout: list[str] = []
    for name in wanted:
        used = sum(MigProfile.parse(p).compute for p in layout)
        if (
            used + MigProfile.parse(name).compute <= found.compute_slices
            and layout.count(name) < found.profiles[name]
        ):
            layout.append(name)
    return layout


@st.composite
def nvidia_node(draw, node):
    """A node's devices as k8s-dra-driver-gpu publishes them: a GPU of one model per card, or its MIG
    devices (the parent's attributes, its profile and the profile's memory)."""
    model = draw(st.sampled_from(sorted(NV_PRODUCTS)))
    found = CATALOGUE.models[model]
    product = draw(st.sampled_from(NV_PRODUCTS[model]))
    with_bus = draw(st.booleans())  # the PCI bus id: newer driver releases publish it
    devices = []
    for gpu in range(draw(st.integers(1, 8))):
        common = {"productName": product, "architecture": found.architecture, "brand": "Nvidia"}
        if with_bus:
            common[PCI_BUS] = bus_id(node, gpu)
        layout = draw(mig_layout(model)) if found.profiles and draw(st.booleans()) else None
        if layout is None:
            devices.append(
                Device(f"gpu-{gpu}", NV, {"type": "gpu", **common}, found.memory_mib * 2**20, Fraction(1))
            )
            continue
        for index, name in enumerate(layout):
            profile = MigProfile.parse(name)
            devices.append(
                Device(
                    f"gpu-{gpu}-mig-{index}",
                    NV,
                    {"type": "mig", "profile": name, **common},
                    profile.memory_gb * 10**9 * 95 // 100,  # below the name, as NVML reports it
                    Fraction(profile.compute, found.compute_slices),
                )
            )
    return devices


@st.composite
def amd_node(draw, node):
    """A node's devices as AMD's driver publishes them: an MI300X in SPX mode as one amdgpu device,
    in another mode as its partitions, each with its GPU's PCI bus id."""
    memory = CATALOGUE.models["MI300X"].memory_mib * 2**20
    with_bus = draw(st.booleans())
    devices = []
    for gpu in range(draw(st.integers(1, 8))):
        mode = draw(st.sampled_from(sorted(AMD_MODES)))
        parts = AMD_MODES[mode]
        if parts == 1:
            attributes = {"type": "amdgpu", "productName": MI300X, "deviceID": str(1000 + gpu)}
            if with_bus:
                attributes[PCI_BUS] = bus_id(node, gpu)
            devices.append(Device(f"gpu-{gpu}", AMD, attributes, memory, Fraction(1)))
            continue
        for part in range(parts):
            attributes = {
                "type": "amdgpu-partition",
                "productName": MI300X,
                "partitionProfile": f"{mode}_nps1",
                PCI_BUS: bus_id(node, gpu),
            }
            devices.append(
                Device(f"gpu-{gpu}-{mode}-{part}", AMD, attributes, memory // parts, Fraction(1, parts))
            )
    return devices


def atoms(domain):
    return st.one_of(
        st.tuples(
            st.just("attr"),
            st.just(domain),
            st.just("type"),
            st.sampled_from(("==", "!=")),
            st.sampled_from(TYPES),
        ),
        st.tuples(
            st.just("attr"), st.just(domain), st.just("productName"), st.just("=="), st.sampled_from(PRODUCTS)
        ),
        st.tuples(
            st.just("attr"),
            st.just(domain),
            st.just("productName"),
            st.just("in"),
            st.lists(st.sampled_from(PRODUCTS), min_size=1, max_size=3, unique=True).map(tuple),
        ),
        st.tuples(
            st.just("attr"),
            st.just(domain),
            st.just("productName"),
            st.just("startsWith"),
            st.sampled_from(("NVIDIA H", "NVIDIA A", "AMD_")),
        ),
        st.tuples(
            st.just("attr"), st.just(domain), st.just("profile"), st.just("=="), st.sampled_from(PROFILES)
        ),
        st.tuples(
            st.just("attr"),
            st.just(domain),
            st.just("architecture"),
            st.just("=="),
            st.sampled_from(ARCHITECTURES),
        ),
        st.tuples(
            st.just("attr"), st.just(domain), st.just("partitionProfile"), st.just("=="), st.just("cpx_nps1")
        ),
        st.tuples(
            st.just("memory_at_least"), st.just(domain), st.sampled_from(("10Gi", "40Gi", "80Gi", "141Gi"))
        ),
        st.tuples(st.just("driver"), st.sampled_from(("==", "!=")), st.just(domain)),
    )


@st.composite
def selector(draw):
    domain = draw(st.sampled_from((NV, AMD)))
    first = draw(atoms(domain))
    shape = draw(st.sampled_from(("atom", "and", "or", "not")))
    if shape == "atom":
        return first
    if shape == "not":
        return ("not", first)
    return (shape, first, draw(atoms(domain)))


@st.composite
def admin_class(draw, index):
    """A class an administrator adds: any selectors, perhaps pinning a driver, perhaps standing for an
    extended resource (one the maps read, or not)."""
    selectors: list[Expr] = []
    if draw(st.booleans()):
        selectors.append(("driver", "==", draw(st.sampled_from((NV, AMD)))))
    selectors += draw(st.lists(selector(), max_size=2))
    return DeviceClass(
        f"x{index}.example.com",
        tuple(selectors) or (("true",),),
        draw(st.sampled_from(("", *EXTENDED_NAMES))),
        draw(st.sampled_from(CREATED)),
    )


@st.composite
def clusters(draw):
    nodes = {}
    for node in range(draw(st.integers(1, 3))):
        shape = nvidia_node if draw(st.booleans()) else amd_node
        nodes[f"node-{node}"] = draw(shape(node))
    classes = {
        name: DeviceClass(
            name,
            selectors,
            # NVIDIA's chart may have its whole-GPU class stand for the device plugin's name.
            draw(st.sampled_from(("", "nvidia.com/gpu"))) if name == NV else "",
            draw(st.sampled_from(CREATED)),
        )
        for name, selectors in DRIVER_CLASSES.items()
    }
    for index in range(draw(st.integers(0, 2))):
        found = draw(admin_class(index))
        classes[found.name] = found
    return Cluster(nodes, classes)


@st.composite
def requests(draw, class_names, alternatives=True):
    if alternatives and draw(st.integers(0, 4)) == 0:
        return Request(
            "", alternatives=tuple(draw(st.lists(requests(class_names, False), min_size=1, max_size=3)))
        )
    # Mostly a class that exists, and few selectors: most requests then match some device.
    missing = draw(st.integers(0, 9)) == 0
    return Request(
        "missing.example.com" if missing else draw(st.sampled_from(class_names)),
        tuple(draw(selector()) for _ in range(draw(st.sampled_from((0, 0, 1, 2))))),
        draw(st.booleans()),
        draw(st.integers(1, 4)),
        draw(st.sampled_from(("", "", "20Gi", "80Gi"))),
        alternatives and draw(st.integers(0, 5)) == 0,  # adminAccess: not on subrequests (v1)
    )


def exactly(request: Request) -> dict:
    """A request's (or subrequest's) fields, as v1 writes them."""
    fields: dict = {"deviceClassName": request.device_class}
    if request.selectors:
        fields["selectors"] = [{"cel": {"expression": render(s)}} for s in request.selectors]
    if request.all_devices:
        fields["allocationMode"] = "All"
    else:
        fields["count"] = request.count
    if request.memory:
        fields["capacity"] = {"requests": {"memory": request.memory}}
    if request.admin_access:
        fields["adminAccess"] = True
    return fields


def claim_spec(claim: list[Request]) -> dict:
    written = []
    for index, request in enumerate(claim):
        if request.alternatives:
            subrequests = [{"name": f"s{j}", **exactly(a)} for j, a in enumerate(request.alternatives)]
            written.append({"name": f"r{index}", "firstAvailable": subrequests})
        else:
            written.append({"name": f"r{index}", "exactly": exactly(request)})
    return {"devices": {"requests": written}}


def slices_of(cluster: Cluster) -> list[dict]:
    found = []
    for node, devices in cluster.nodes.items():
        for driver in sorted({d.driver for d in devices}):
            found.append(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceSlice",
                    "metadata": {"name": f"{node}-{driver}"},
                    "spec": {
                        "driver": driver,
                        "nodeName": node,
                        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                        "devices": [_published(d) for d in devices if d.driver == driver],
                    },
                }
            )
    return found


def _published(device: Device) -> dict:
    published = {"name": device.name, "attributes": {k: {"string": v} for k, v in device.attributes.items()}}
    if device.memory is not None:
        published["capacity"] = {"memory": {"value": str(device.memory)}}
    return published


def class_object(device_class: DeviceClass) -> dict:
    spec: dict = {"selectors": [{"cel": {"expression": render(s)}} for s in device_class.selectors]}
    if device_class.extended_resource:
        spec["extendedResourceName"] = device_class.extended_resource
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": device_class.name, "creationTimestamp": device_class.created},
        "spec": spec,
    }


class ApiServer:
    """The resource.k8s.io objects of one cluster, answered as the API server answers the adapter."""

    def __init__(self, templates, claims, classes, slices):
        self.namespaced = {"resourceclaimtemplates": templates, "resourceclaims": claims}
        self.classes = {c["metadata"]["name"]: c for c in classes}
        self.slices = slices

    def get_namespaced_custom_object(self, group, version, namespace, plural, name, **_):
        found = self.namespaced[plural].get(name) if namespace == NAMESPACE else None
        if found is None:
            raise ApiException(status=404, reason="Not Found")
        return json.loads(json.dumps(found))

    def get_cluster_custom_object(self, group, version, plural, name, **_):
        if name not in self.classes:
            raise ApiException(status=404, reason="Not Found")
        return self.classes[name]

    def list_cluster_custom_object(self, group, version, plural, limit=None, _continue=None, **_):
        if plural == "deviceclasses":
            return {"items": list(self.classes.values())}
        return {"items": self.slices, "metadata": {}}


class Ledger:
    """A reservation store with nothing reserved: the pod is judged alone against its quota."""

    def reserve(self, namespace, reservation, decide, now, counted, write, mark, deadline=None):
        return decide([])


@st.composite
def cases(draw):
    cluster = draw(clusters())
    names = sorted(cluster.classes)
    # A pod of extended resources alone (KEP-5004) one time in four, else one naming claims.
    alone = draw(st.integers(0, 3)) == 0
    claims = (
        []
        if alone
        else draw(st.lists(st.lists(requests(names), min_size=1, max_size=2), min_size=1, max_size=3))
    )
    ahead = draw(st.lists(st.booleans(), min_size=len(claims), max_size=len(claims)))
    # Mostly names some class stands for: the others are the device plugins' (not this model's).
    standing = sorted({c.extended_resource for c in cluster.classes.values()} - {""})
    resources = (*standing, *standing, *EXTENDED_NAMES, *(CLASS_RESOURCE_PREFIX + n for n in names))
    extended = draw(
        st.dictionaries(st.sampled_from(resources), st.integers(1, 3), min_size=int(alone), max_size=2)
    )
    target = draw(st.sampled_from(("dra-nvidia", "dra-amd")))
    return cluster, claims, ahead, sorted(extended.items()), target


def the_pod(claims, ahead, extended):
    entries, templates, made = [], {}, {}
    for index, (claim, shared) in enumerate(zip(claims, ahead, strict=True)):
        name = f"c{index}"
        if shared:
            entries.append({"name": name, "resourceClaimName": f"shared-{index}"})
            made[f"shared-{index}"] = {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": f"shared-{index}", "namespace": NAMESPACE},
                "spec": claim_spec(claim),
            }
        else:
            entries.append({"name": name, "resourceClaimTemplateName": f"t{index}"})
            templates[f"t{index}"] = {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": f"t{index}", "namespace": NAMESPACE},
                "spec": {"spec": claim_spec(claim)},
            }
    resources: dict = {"claims": [{"name": e["name"]} for e in entries]}
    if extended:
        resources["limits"] = {n: str(a) for n, a in extended}
        resources["requests"] = dict(resources["limits"])
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": NAMESPACE, "uid": "p-uid"},
        "spec": {"containers": [{"name": "main", "image": "x", "resources": resources}]},
    }
    if entries:
        pod["spec"]["resourceClaims"] = entries
    return pod, templates, made


def cluster_context(target: str, classes: list[dict]) -> Context:
    """The decision context a server on this cluster decides with (what build_context makes, from
    maps loaded once: the classes that stand for extended resources are the cluster's)."""
    maps = dict(LOADED.maps)
    maps[target] = with_cluster_dra(maps[target], ClusterDra("resource.k8s.io/v1", tuple(classes)), LOADED)
    return Context(target=maps[target], dialects=Dialects(tuple(maps.values()), CATALOGUE))


def quota_just_below(most: Fraction) -> Decimal:
    """The largest quota (in thousandths, as a quantity can say) below `most` GPU-equivalents."""
    thousandths = -((-most * 1000) // 1) - 1  # ceil(most × 1000) − 1
    return Decimal(int(thousandths)) / 1000


def _h100s(count: int) -> list[Device]:
    attributes = {"type": "gpu", "productName": "NVIDIA H100 80GB HBM3", "architecture": "Hopper"}
    return [Device(f"gpu-{g}", NV, attributes, 81559 * 2**20, Fraction(1)) for g in range(count)]


def _cpx_mi300xs(count: int) -> list[Device]:
    return [
        Device(
            f"gpu-{g}-cpx-{p}",
            AMD,
            {
                "type": "amdgpu-partition",
                "productName": MI300X,
                "partitionProfile": "cpx_nps1",
                PCI_BUS: bus_id(0, g),
            },
            None,
            Fraction(1, 8),
        )
        for g in range(count)
        for p in range(8)
    ]


def _driver_classes(**extended: str) -> dict[str, DeviceClass]:
    return {n: DeviceClass(n, s, extended.get(n, ""), CREATED[0]) for n, s in DRIVER_CLASSES.items()}


# The cases, always tried (the search finds each only now and then). AMD's class selects the
# driver alone: All takes an 8×MI300X CPX node's 64 partitions, 8 GPUs.
AMD_ALL_OVER_PARTITIONS = (
    Cluster(
        {"cpx": _cpx_mi300xs(8), "spx": [Device("gpu-0", AMD, {"type": "amdgpu"}, None, Fraction(1))]},
        _driver_classes(),
    ),
    [[Request(AMD, all_devices=True)]],
    [False],
    [],
    "dra-amd",
)
# As NVIDIA's extended-resources demo writes a class of one MIG profile.
_ONE_G = (("driver", "==", NV), ("attr", NV, "type", "==", "mig"), ("attr", NV, "profile", "==", "1g.10gb"))
# Two classes stand for example.com/gpu: the scheduler uses the newer (whole GPUs), whatever the names.
NEWEST_CLASS_WINS = (
    Cluster(
        {"h100": _h100s(8)},
        {
            **_driver_classes(),
            "a-whole.example.com": DeviceClass(
                "a-whole.example.com", DRIVER_CLASSES[NV], "example.com/gpu", CREATED[1]
            ),
            "z-slices.example.com": DeviceClass(
                "z-slices.example.com", _ONE_G, "example.com/gpu", CREATED[0]
            ),
        },
    ),
    [],
    [],
    [("example.com/gpu", 3)],
    "dra-nvidia",
)
# A class standing for a MIG name the maps read, whose selectors allow any of the driver's devices:
# charged by the devices it gives (whole GPUs), not by the name's meaning (1/7 each).
CLASS_BY_ITS_DEVICES = (
    Cluster(
        {"h100": _h100s(8)},
        {
            **_driver_classes(),
            "x.example.com": DeviceClass(
                "x.example.com", (("driver", "==", NV),), "nvidia.com/mig-1g.10gb", CREATED[0]
            ),
        },
    ),
    [],
    [],
    [("nvidia.com/mig-1g.10gb", 2)],
    "dra-nvidia",
)


# A GPU driver no map describes (Intel's DRA driver, its class gpu.intel.com): its devices are GPUs,
# never another driver's devices charged nothing (issue 45).
INTEL = "gpu.intel.com"
UNKNOWN_GPU_DRIVER = (
    Cluster(
        {
            "intel": [
                Device(f"card-{g}", INTEL, {"model": "Data Center GPU Max 1550"}, None, Fraction(1))
                for g in range(8)
            ]
        },
        {**_driver_classes(), INTEL: DeviceClass(INTEL, (("driver", "==", INTEL),), "", CREATED[0])},
    ),
    [[Request(INTEL, count=8)]],
    [False],
    [],
    "dra-nvidia",
)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
@example(AMD_ALL_OVER_PARTITIONS)
@example(NEWEST_CLASS_WINS)
@example(CLASS_BY_ITS_DEVICES)
@example(UNKNOWN_GPU_DRIVER)
def test_the_budget_charges_at_least_what_any_node_could_give_the_pod(case):
    cluster, claims, ahead, extended, target = case
    most, node = most_on_a_node(cluster, claims, extended)
    if most <= 0:
        return  # nothing a node could give: nothing to hold the charge to
    pod, templates, made = the_pod(claims, ahead, extended)
    classes = [class_object(c) for c in cluster.classes.values()]
    store = ClaimTemplateStore(None, "resource.k8s.io/v1")
    store.api = ApiServer(templates, made, classes, slices_of(cluster))
    context = cluster_context(target, classes)
    demand = read_pod_demand(read_pod(pod), NAMESPACE, context, store)
    hard = quota_just_below(most)
    view = FakeView([Quota("gpus", {f"requests.{context.target.whole_gpu}": hard})])
    refused = QuotaGate(view, Ledger(), templates=store).admit(parsed(review_of(pod)), context, demand)
    charged = pod_use(demand, context.target, CATALOGUE).equivalents
    assert refused is not None and refused.reason in (
        "quota-exceeded",
        "quota-claims-uncountable",
        "quota-gpu-name-unread",
    ), (
        f"{node} could give the pod {most} GPUs ({float(most):.3f}); gpuport charged {charged} "
        f"({float(charged):.3f}) and admitted it under a quota of {hard}: "
        f"{json.dumps(pod['spec'])} {json.dumps(templates)} {json.dumps(made)} {json.dumps(classes)}"
    )
