"""The GPU budget judged by a model of the software sharing layers (issue 45): whatever KAI, HAMi or Volcano
give a pod, as their source reads it, gpuport charges at least that much, or refuses the pod in a budget
namespace as one it cannot count. The judge below is written from the layers' source, not from gpuport:

- KAI (NVIDIA/KAI-Scheduler: pkg/scheduler/api/pod_info updatePodAdditionalFields, pkg/common/resources
  gpu_sharing.go, the admission's gpu_request_validator.go, docs/gpu-sharing for the NvFractions keys):
  `gpu-fraction` f (strconv.ParseFloat) reserves f of each of `gpu-fraction-num-devices` GPUs, and the
  bind request records it as `%.2f`; `gpu-memory` m MiB (ParseInt) reserves m on each; the per-container
  `nvidia.com/container.<c>.gpu-memory.request` / `.limit` quantities reserve the request (the limit when
  left out) and let the container use up to the limit. The judge writes each number it chose in one of
  the spellings Go accepts (hexadecimal, exponents, a sign, underscores between digits), so it knows the
  value without parsing it.
- HAMi (Project-HAMi/HAMi pkg/device/nvidia/device.go GenerateResourceRequests) and Volcano
  (volcano-sh/volcano pkg/scheduler/api/devices/nvidia/vgpu/utils.go resourcereqs): n cards, each with
  m MiB if asked (> 0), else p % of the card if asked (> 0), else all of it; cores c %.
- A GPU model named by HAMi's nvidia.com/use-gputype binds only where HAMi schedules the pod; the default
  scheduler gives any card.

A card is any the map offers: a share measured in MiB is at least m / (smallest card) of a GPU, and a share
measured in parts of a card holds that part of the largest. The charge must be at least the judge's, in
GPU-equivalents and in GPU memory.
"""

import math
from fractions import Fraction

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.helpers import context
from tests.translation_cases import kai_pod, pod
from webhook.core.asks.demand import read_demand
from webhook.core.budget.equivalents import pod_use


def _cards(cloud):
    ctx = context(cloud)
    catalogue = ctx.dialects.catalogue
    offered = [catalogue.models[m] for m in ctx.dialects.models_offered(ctx.target)]
    mib = [m.memory_bytes >> 20 for m in offered if m.vendor == "nvidia"]
    return min(mib), max(mib)


class Given:
    """What a layer gives a pod: GPU-equivalents (a part of a card, per card) and GPU memory in MiB."""

    def __init__(self, equivalents=Fraction(0), memory_mib=0):
        self.equivalents, self.memory_mib = equivalents, memory_mib


def charged_at_least(obj, cloud, given):
    ctx = context(cloud)
    demand = read_demand(obj, ctx.dialects)
    if demand.unreadable:
        return  # refused in every budget namespace: nothing is given uncharged
    charge = pod_use(demand, ctx.target, ctx.dialects.catalogue)
    assert charge.equivalents >= given.equivalents, (obj, charge, vars(given))
    assert charge.memory_mib >= given.memory_mib, (obj, charge, vars(given))


# KAI -----------------------------------------------------------------------------------------------


def go_spellings(value: float):
    """Texts strconv.ParseFloat reads as exactly `value`."""
    plain = repr(value)
    spellings = [
        plain,
        f"{value:e}" if float(f"{value:e}") == value else plain,
        value.hex(),
        value.hex().upper(),
    ]
    spellings.append("+" + plain)
    if plain.startswith("0."):
        spellings.append(plain[1:])  # ".5"
    digits = plain.replace("0.", "", 1)
    if plain.startswith("0.") and len(digits) >= 2 and digits.isdigit():
        spellings.append("0." + digits[0] + "_" + digits[1:])  # underscores between digits
    return st.sampled_from(spellings)


def kai_fraction():
    exact = st.integers(1, 9999).map(lambda n: n / 10000)
    binary = st.integers(1, 255).map(lambda n: n / 256)  # 0x1.ccp-1 and friends
    return st.one_of(exact, binary).flatmap(lambda f: st.tuples(st.just(f), go_spellings(f)))


@st.composite
def kai_cases(draw):
    annotations = {}
    fraction = memory = None
    count = draw(st.integers(1, 8))
    if draw(st.booleans()):
        fraction, annotations["gpu-fraction"] = draw(kai_fraction())
    if draw(st.booleans()):
        memory = draw(st.integers(1, 200_000))
        annotations["gpu-memory"] = draw(st.sampled_from([str(memory), f"+{memory}"]))
    request = limit = None
    if draw(st.booleans()) or (fraction is None and memory is None):
        key = "nvidia.com/container.main.gpu-memory."
        request = draw(st.none() | st.integers(1, 100).map(lambda g: g * 2**30))
        limit = draw(st.none() | st.integers(1, 100).map(lambda g: g * 2**30))
        if request is None and limit is None:
            request = 2**30
        if request is not None:
            annotations[key + "request"] = f"{request >> 30}Gi"
        if limit is not None:
            annotations[key + "limit"] = f"{limit >> 30}Gi"
    if count > 1 or draw(st.booleans()):
        annotations["gpu-fraction-num-devices"] = str(count)
    return annotations, fraction, memory, request, limit, count


def kai_gives(fraction, memory, request, limit, count):
    smallest, largest = _cards("kai")
    parts, mib = [], 0
    if fraction is not None:
        # The decimal the double stands for: KAI packs ten 0.1 shares on a GPU (0.1 × 10 in float64 is
        # below 1), so its share is 1/10, not the double's 0.1000000000000000055.
        parts += [Fraction(repr(fraction)), Fraction(f"{fraction:.2f}")]
        mib = max(mib, math.floor(fraction * largest))
    for asked in (memory, *(b >> 20 for b in (request, limit) if b is not None)):
        if asked is not None:
            parts.append(Fraction(asked, smallest))
            mib = max(mib, asked)
    return Given(min(max(parts), Fraction(1)) * count, mib * count)


FRACTION_IN_HEX = ({"gpu-fraction": "0x1.ccp-1"}, 0.8984375, None, None, None, 1)
ROUNDED_DOWN = ({"gpu-fraction": "0.0199"}, 0.0199, None, None, None, 1)
PER_CONTAINER = (
    {"nvidia.com/container.main.gpu-memory.request": "80Gi", "gpu-fraction-num-devices": "8"},
    None,
    None,
    80 * 2**30,
    None,
    8,
)
LIMIT_ABOVE_REQUEST = (
    {
        "nvidia.com/container.main.gpu-memory.request": "1Gi",
        "nvidia.com/container.main.gpu-memory.limit": "40Gi",
    },
    None,
    None,
    2**30,
    40 * 2**30,
    1,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kai_cases())
@example(FRACTION_IN_HEX)
@example(ROUNDED_DOWN)
@example(PER_CONTAINER)
@example(LIMIT_ABOVE_REQUEST)
@example(({"gpu-fraction": "1e-1"}, 0.1, None, None, None, 1))
@example(({"gpu-fraction": "+.5"}, 0.5, None, None, None, 1))
def test_kai_shares_are_charged_at_least_what_kai_gives(case):
    annotations, fraction, memory, request, limit, count = case
    charged_at_least(kai_pod(annotations), "kai", kai_gives(fraction, memory, request, limit, count))


@settings(max_examples=60, deadline=None)
@given(kai_cases(), st.sampled_from(["busybox", "init"]))
def test_a_kai_share_named_for_another_container_is_charged_all_the_same(case, where):
    """The container KAI gives the share (gpu-fraction-container-name; init containers first) changes
    nothing of what it gives."""
    annotations, fraction, memory, request, limit, count = case
    obj = kai_pod(annotations)
    if where == "busybox":
        name = "cuda"
        obj["spec"]["containers"] = [{"name": "busybox", "image": "busybox"}, {"name": name, "image": "cuda"}]
    else:
        name = "prep"
        obj["spec"]["initContainers"] = [{"name": name, "image": "cuda"}]
    keys = {k.replace(".main.", f".{name}."): v for k, v in annotations.items()}
    if "gpu-fraction" in keys or "gpu-memory" in keys:
        keys["gpu-fraction-container-name"] = name
    obj["metadata"]["annotations"] = keys
    charged_at_least(obj, "kai", kai_gives(fraction, memory, request, limit, count))


# HAMi and Volcano ------------------------------------------------------------------------------------

NAMES = {
    "hami": ("nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpumem-percentage", "nvidia.com/gpucores"),
    "volcano": (
        "volcano.sh/vgpu-number",
        "volcano.sh/vgpu-memory",
        "volcano.sh/vgpu-memory-percentage",
        "volcano.sh/vgpu-cores",
    ),
}


@st.composite
def vgpu_cases(draw):
    cloud = draw(st.sampled_from(sorted(NAMES)))
    cards = draw(st.integers(1, 96))
    memory = draw(st.none() | st.integers(0, 80_000))
    percent = draw(st.none() | st.integers(0, 100))
    cores = draw(st.none() | st.integers(0, 100))
    return cloud, cards, memory, percent, cores


def vgpu_gives(cloud, cards, memory, percent, cores):
    smallest, largest = _cards(cloud)
    if memory:
        part, mib = Fraction(memory, smallest), memory
    elif percent:
        part, mib = Fraction(percent, 100), largest * percent // 100
    else:  # neither asked: all of the card (mempnum 100)
        part, mib = Fraction(1), largest
    part = max(part, Fraction(cores or 0, 100))
    return Given(min(part, Fraction(1)) * cards, mib * cards)


@settings(max_examples=150, deadline=None)
@given(vgpu_cases())
@example(("volcano", 96, None, None, 1))  # 96 cards under a quota of 1
@example(("hami", 2, None, None, 1))
@example(("hami", 1, 0, None, 30))  # gpumem: 0 is HAMi's "unset"
def test_vgpu_shares_are_charged_at_least_what_hami_and_volcano_give(case):
    cloud, cards, memory, percent, cores = case
    count, memory_name, percent_name, cores_name = NAMES[cloud]
    resources = {count: str(cards)}
    for name, value in ((memory_name, memory), (percent_name, percent), (cores_name, cores)):
        if value is not None:
            resources[name] = str(value)
    charged_at_least(pod(resources), cloud, vgpu_gives(*case))


# Model annotations -----------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(["generic", "hami", "kai", "volcano"]),
    st.integers(1, 16),
    st.sampled_from(["T4", "L4", "A10G", "T4,L4"]),
    st.sampled_from(["nvidia.com/use-gputype", "nvidia.com/nouse-gputype"]),
)
@example("generic", 16, "T4", "nvidia.com/use-gputype")  # 16 × 80 GB under a 400 Gi budget
def test_a_model_annotation_no_scheduler_here_honours_lowers_no_charge(cloud, cards, models, key):
    obj = pod({"nvidia.com/gpu": str(cards)})
    obj["metadata"]["annotations"] = {key: models}
    _, largest = _cards(cloud)
    charged_at_least(obj, cloud, Given(Fraction(cards), cards * largest))
