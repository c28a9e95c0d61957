"""The device-plugin half of the budget's judge (tests/core/test_allocator_kubelet.py): what one node's
scheduler and kubelet give a pod that asks for GPUs by extended resource name, in GPU-equivalents.

Written from Kubernetes' rules and the catalogue's numbers alone, never from gpuport's functions:

- Per resource name, the scheduler reserves and the device manager allocates the pod's effective
  request (resourcehelper.PodRequests, KEP-753): the larger of each init container's ask plus the
  sidecars (restartable init containers) started before it, and the app containers' plus every
  sidecar's. An init container's devices are reused only by later containers asking the same name, so
  a name only an init container asks for is held for the pod's life.
- A unit of a name is worth: a whole GPU 1 (nvidia.com/gpu, amd.com/gpu); a MIG slice of the mixed
  strategy (nvidia.com/mig-<profile>) the larger of its compute slices over its GPU's
  (cloudmaps/gpus.yaml) and its memory slices over its GPU's (the placement's size in
  webhook/config/geometry/mig.yaml), on the pinned model, else the model where that is most; any other
  name under a GPU vendor's domain 1, the most one device of a device plugin may be (a passthrough GPU).
- A name outside the GPU vendors' domains gives no GPU.
"""

import re
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
MODELS: Mapping[str, Mapping] = yaml.safe_load((REPO / "cloudmaps" / "gpus.yaml").read_text())["models"]
GEOMETRY: Mapping[str, Mapping] = yaml.safe_load(
    (REPO / "webhook" / "config" / "geometry" / "mig.yaml").read_text()
)["models"]
GPU_DOMAINS = ("nvidia.com", "amd.com", "gpu.intel.com")
MIG_NAME = re.compile(r"^nvidia\.com/mig-(?P<profile>\d+g\.\d+gb.*)$")

# (kind, {resource name: count}) in the pod's order: kind is "init", "sidecar" or "app".
Container = tuple[str, Mapping[str, int]]


def effective_requests(containers: Sequence[Container]) -> dict[str, int]:
    """Per name, what the scheduler reserves and the kubelet's device manager gives the pod."""
    names = {n for _, asks in containers for n in asks}
    held = {}
    for name in names:
        apps = sum(asks.get(name, 0) for kind, asks in containers if kind in ("app", "sidecar"))
        sidecars, peak = 0, 0
        for kind, asks in containers:
            if kind == "sidecar":
                sidecars += asks.get(name, 0)
                peak = max(peak, sidecars)
            elif kind == "init":
                peak = max(peak, sidecars + asks.get(name, 0))
        held[name] = max(peak, apps)
    return held


def slice_worth(model: str, profile: str) -> Fraction | None:
    """What one instance of `profile` holds of a `model` GPU; None where the geometry has no placement."""
    geometry = GEOMETRY.get(model)
    placement = (geometry or {}).get("placements", {}).get(profile)
    if geometry is None or placement is None:
        return None
    compute = int(profile.split("g.", 1)[0])
    slots = int(placement.rsplit(":", 1)[1])
    return max(
        Fraction(compute, MODELS[model]["mig"]["compute_slices"]), Fraction(slots, geometry["memory_slices"])
    )


def unit_worth(name: str, pinned: str | None) -> Fraction:
    """The most one unit of `name` holds of a GPU on a node of the `pinned` model (None: any)."""
    domain = name.partition("/")[0]
    if not any(domain == d or domain.endswith("." + d) for d in GPU_DOMAINS):
        return Fraction(0)
    found = MIG_NAME.match(name)
    if found is None:
        return Fraction(1)
    profile = found["profile"]
    worths = [slice_worth(pinned, profile)] if pinned is not None else []
    if not any(w is not None for w in worths):  # the pinned model has no such slice: any model's
        worths = [slice_worth(m, profile) for m in GEOMETRY]
    return max((w for w in worths if w is not None), default=Fraction(1))


def most_held(containers: Sequence[Container], pinned: str | None) -> Fraction:
    """GPU-equivalents a node gives the pod."""
    return sum(
        (count * unit_worth(name, pinned) for name, count in effective_requests(containers).items()),
        Fraction(0),
    )


def mig_profiles() -> list[str]:
    """Every profile some model's geometry places."""
    return sorted({p for g in GEOMETRY.values() for p in g["placements"]})


def product_names(models: Iterable[str]) -> dict[str, str]:
    """A product name GFD writes for each model (nvidia.com/gpu.product), by model."""
    return {m: MODELS[m]["names"][0] for m in models if MODELS[m].get("names")}
