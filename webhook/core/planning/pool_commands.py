"""The node pools a per-pool target needs (GKE partition sizes, AKS --gpu-instance-profile), in nodes:
a pool is created by its node count, and a node carries all the GPUs of its machine (an AKS
Standard_ND96asr_v4 has 8 A100s, a GKE a2-highgpu-8g too), so "2 GPUs of 1g.5gb" is one node, not two.
Each pool comes with the complete command that creates it, the machine and GPUs per node read from the
inventory's nodes of the model (their instance-type label), or from the map where it names one machine
for the model; the cluster and its location stay shell variables the user sets once."""

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from webhook.core.planning.mig_plan import Pool
from webhook.core.planning.planner import Gpu
from webhook.core.vocabulary.catalogue import MigProfile
from webhook.core.vocabulary.inventory import Inventory
from webhook.core.vocabulary.platform import CloudMap

INSTANCE_TYPE = "node.kubernetes.io/instance-type"
GKE_ACCELERATOR = "cloud.google.com/gke-accelerator"


@dataclass(frozen=True)
class Shape:
    """A model's nodes: the machine they are and the GPUs each holds (0: unknown)."""

    machine: str
    gpus_per_node: int


@dataclass(frozen=True)
class PoolToCreate:
    pool: Pool
    nodes: int  # 0: unknown (no node of the model in the inventory, and the map names no machine)
    gpus_per_node: int
    command: str  # "" when gpuport knows no command for the target


def pools_to_create(
    pools: Sequence[Pool], gpus: Sequence[Gpu], inventory: Inventory, target: CloudMap
) -> list[PoolToCreate]:
    shapes = _shapes(gpus, inventory, target)
    made = []
    for pool in pools:
        shape = shapes.get(pool.model, Shape("", 0))
        nodes = -(-pool.gpus // shape.gpus_per_node) if shape.gpus_per_node else 0
        made.append(PoolToCreate(pool, nodes, shape.gpus_per_node, _command(pool, shape, nodes, target)))
    return made


def _shapes(gpus: Sequence[Gpu], inventory: Inventory, target: CloudMap) -> dict[str, Shape]:
    """Per model, the commonest machine among its nodes and the GPUs such a node holds; where the
    inventory has none, the map's one machine for the model (AKS's instance-type table)."""
    per_node = Counter(gpu.node for gpu in gpus)
    model_of = {gpu.node: gpu.model for gpu in gpus}
    labels = {node.name: node.labels for node in inventory.nodes}
    seen: dict[str, Counter[tuple[str, int]]] = {}
    for node, count in per_node.items():
        machine = labels.get(node, {}).get(INSTANCE_TYPE, "")
        seen.setdefault(model_of[node], Counter())[(machine, count)] += 1
    shapes = {model: Shape(*counts.most_common(1)[0][0]) for model, counts in seen.items()}
    for label in target.model_labels:
        if label.label != INSTANCE_TYPE:
            continue
        for model, values in label.values.items():
            if model not in shapes and len(values) == 1 and values[0] in label.gpus:
                shapes[model] = Shape(values[0], label.gpus[values[0]])
    return shapes


def _command(pool: Pool, shape: Shape, nodes: int, target: CloudMap) -> str:
    profile = MigProfile.parse(pool.profile)
    machine = shape.machine or '"$MACHINE_TYPE"'
    count = str(nodes) if nodes else '"$NODES"'
    if target.mig.form == "partition-label":
        accelerator = next(
            (
                label.values[pool.model][0]
                for label in target.model_labels
                if label.label == GKE_ACCELERATOR and pool.model in label.values
            ),
            "",
        )
        if not accelerator:
            return ""
        name = f"mig-{pool.model}-{pool.profile}".lower().replace(".", "-").replace("+", "-")
        per_node = shape.gpus_per_node or '"$GPUS_PER_NODE"'
        return (
            f'gcloud container node-pools create {name} --cluster "$CLUSTER" --location "$LOCATION" '
            f"--machine-type {machine} --num-nodes {count} "
            f"--accelerator type={accelerator},count={per_node},gpu-partition-size={pool.profile}"
        )
    if "--gpu-instance-profile" in target.mig.requires:
        name = ("mig" + "".join(c for c in pool.profile.lower() if c.isalnum()))[:12]
        return (
            f'az aks nodepool add --resource-group "$RESOURCE_GROUP" --cluster-name "$CLUSTER" --name {name} '
            f"--node-vm-size {machine} --node-count {count} --gpu-instance-profile MIG{profile.compute}g"
        )
    return ""


def variables(made: Sequence[PoolToCreate]) -> list[str]:
    """The shell variables the commands leave to the user, in the order they appear."""
    names = ("CLUSTER", "LOCATION", "RESOURCE_GROUP", "MACHINE_TYPE", "NODES", "GPUS_PER_NODE")
    return [name for name in names if any(f'"${name}"' in p.command for p in made)]
