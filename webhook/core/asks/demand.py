"""Canonical demand: every container's GPU ask, read from any loaded dialect, in one model.

Whole GPUs, MIG slices and shared GPUs look different on every platform (a resource per profile, a
node label naming the profile, a memory resource, a sharing label...). Translation works from this
model only, so N platforms need N maps rather than N² rules.

Why one module of ~440 lines: every dialect's way of asking (resources, selector labels, affinity,
annotations) must be read together to tell one kind of ask from another (a count resource is a whole
GPU alone and part of a share next to a memory resource); the reading is one decision. DRA claims are
read in claims.py and only become asks here.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

from webhook.core.asks.annotation_share import SharedAsk, read_annotation_share
from webhook.core.asks.checks import is_extended_resource
from webhook.core.asks.claims import CLASS_RESOURCE_PREFIX
from webhook.core.asks.pod_claims import (
    NO_CLAIMS,
    PodClaims,
    TemplateLookup,
    class_standing,
    read_pod_claims,
    stood_for,
)
from webhook.core.asks.unread import unread_gpu_names
from webhook.core.vocabulary import quantity
from webhook.core.vocabulary.catalogue import MigProfile
from webhook.core.vocabulary.dialects import MEANINGS_KEPT, Dialects
from webhook.core.vocabulary.sharing import SharedForm
from webhook.core.vocabulary.workloads import (
    ContainerRef,
    PodRead,
    held_at_once,
    is_map,
    read_pod,
    required_terms,
)

AskKind = Literal["whole", "mig", "shared", "fraction"]


class ContainerAsk(NamedTuple):
    # The read values of a pod are NamedTuples: immutable like a frozen dataclass, at a fraction of
    # its cost to build (one is built per container, several per decision). `index` and `count`
    # shadow tuple's methods of those names, which nothing calls on an ask.
    list_name: str
    index: int  # type: ignore[assignment]
    name: str
    kind: AskKind
    count: int  # type: ignore[assignment]
    vendor: str = "nvidia"
    profile: MigProfile | None = None
    share: SharedAsk | None = None
    fraction: Fraction | None = None  # a fractional whole-GPU ask, translated only by policy
    written: Mapping[str, str] = MappingProxyType({})  # the resource entries as the user wrote them
    # Asked by DRA claim: the pod's name for the claim (written is {"resourceClaims <name>": template}).
    claim: str = ""
    sidecar: bool = False  # a restartable init container: it runs beside the app containers
    # The extended resources this ask was read from (one name, or a share's count and memory names):
    # the scheduler and the kubelet add a pod's containers up per name (equivalents.pod_use).
    resources: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.list_name}[{self.index}]"

    def describe(self) -> str:
        return ", ".join(f"{k}: {v}" for k, v in sorted(self.written.items()))

    @property
    def mig_profile(self) -> MigProfile:
        """The slice a "mig" ask names; asking it of another kind is a programming error."""
        if self.profile is None:
            raise TypeError(f"{self.label} is a {self.kind} ask, not a MIG slice")
        return self.profile

    @property
    def gpu_share(self) -> SharedAsk:
        """The share of one GPU a "shared" ask names (empty when only the sharing is asked for)."""
        if self.share is None:
            raise TypeError(f"{self.label} is a {self.kind} ask, not a shared GPU")
        return self.share

    @property
    def gpu_fraction(self) -> Fraction:
        """How much of one GPU a "fraction" ask names."""
        if self.fraction is None:
            raise TypeError(f"{self.label} is a {self.kind} ask, not a fraction of a GPU")
        return self.fraction


@dataclass(slots=True)
class _Site:
    """Where an ask was written and in which words: what every kind of ask carries."""

    container: ContainerRef
    written: Mapping[str, str]

    def ask(
        self,
        kind: AskKind,
        count: int,
        vendor: str,
        profile: MigProfile | None = None,
        share: SharedAsk | None = None,
        fraction: Fraction | None = None,
        resources: tuple[str, ...] = (),
    ) -> ContainerAsk:
        where = self.container
        return ContainerAsk(
            where.list_name,
            where.index,
            where.name,
            kind,
            count,
            vendor,
            profile,
            share,
            fraction,
            self.written,
            sidecar=where.sidecar,
            resources=resources,
        )


class Selection(NamedTuple):
    """What the pod's node selector and required node affinity say about GPUs."""

    models: frozenset[str] | None = None  # acceptable GPU models; None = any
    profile: MigProfile | None = None  # a MIG profile chosen by label (partition size, -MIG- product)
    shared: bool = False  # a sharing label (time-sharing, MPS, -SHARED product)
    keys: frozenset[str] = frozenset()  # every GPU-meaning label key the pod used
    unknown: tuple[str, ...] = ()  # label values that name no known model
    annotations: frozenset[str] = frozenset()  # model-choosing annotation keys the pod used
    avoid: frozenset[str] = frozenset()  # models the pod refuses (HAMi's nouse-gputype)
    # sxm | pcie when every node the labels admit has GPUs joined that way (p4d.24xlarge: sxm)
    interconnect: str = ""


# A pod that names no GPU label (the usual one): immutable, so every such pod shares it.
NO_SELECTION = Selection()

Constraint = tuple[str, str, tuple[str, ...]]  # (label key, operator, values) a pod puts on its node


class PodDemand(NamedTuple):
    asks: tuple[ContainerAsk, ...]
    selection: Selection
    problems: tuple[str, ...] = ()
    # Every node-label requirement of the pod as read (node_constraints), kept so that deciding
    # whether and how to translate does not walk the selector and affinity again.
    constraints: tuple[Constraint, ...] = ()
    # Every resource name the containers' limits and requests write (GPU or not, any amount): what a
    # pod left as written asks the nodes for, without walking its containers again.
    resource_names: frozenset[str] = frozenset()
    # The pod's DRA claims, read when there are objects to read them from: what each charges to the
    # GPU budget, what cannot be counted, and what cannot be said in device-plugin words.
    claims: PodClaims = NO_CLAIMS
    # Extended resources that name a GPU but that no map reads and no DeviceClass stands for: a GPU
    # budget cannot count them, so it refuses them (unread.py).
    unread: tuple[str, ...] = ()
    # Why a share its scheduler reads cannot be counted as that scheduler reads it (a KAI gpu-fraction
    # Go parses and gpuport does not, a container name no container has): "" when none. A budget
    # refuses such a pod rather than charge it nothing.
    unreadable: str = ""
    # The models the pod may be given here, which its charge reads: `selection.models` less what model
    # annotations no scheduler of this pod honours narrowed (HAMi's use-gputype on a pod HAMi does not
    # schedule); None: any.
    charged_models: frozenset[str] | None = None

    @property
    def gpus_on_one_node(self) -> int:
        """GPUs (or slices, or shares) the pod needs on its node, counted as Kubernetes counts a
        pod's requests (app containers and sidecars add up, init containers run one at a time)."""
        return max(held_at_once([(a, a.count) for a in self.asks], 0, max), 1)

    @property
    def claim_problems(self) -> tuple[str, ...]:
        """Why the pod's claims cannot become device-plugin asks: a device-plugin target refuses the
        pod (a claim it cannot count is one of them); a DRA cluster runs it as written."""
        found = self.claims.problems + self.claims.uncountable
        # A request that can neither be said nor counted is said once, in its longer words.
        return tuple(p for p in found if not any(q != p and q.startswith(p) for q in found))


def read_demand(
    pod: Mapping[str, Any] | PodRead, dialects: Dialects, templates: TemplateLookup | None = None
) -> PodDemand:
    """The pod's asks (from the pod, or the pod as already read); with `templates` (the
    ResourceClaimTemplates of the pod's namespace, by name), the devices its DRA claims ask for too."""
    read = pod if isinstance(pod, PodRead) else read_pod(pod)
    spec, annotations, names = read.spec, read.annotations, read.resource_names
    constraints = tuple(node_constraints(spec))
    labels = read_selection(spec, dialects, constraints)
    selection = with_model_annotations(labels, annotations, dialects)
    # What the pod meant on its platform (translation reads every model annotation) and what it is given
    # here (the charge reads only those the pod's scheduler honours).
    charged = selection
    if selection.annotations:
        charged = with_model_annotations(labels, annotations, dialects, spec.get("schedulerName"))
    asks: list[ContainerAsk] = []
    problems: list[str] = []
    for container in read.containers:
        found, problem = _read_container(container, selection, dialects)
        asks += found
        if problem:
            problems.append(problem)
    claims = NO_CLAIMS
    unread: tuple[str, ...] = ()
    unread = unread_gpu_names(
        names,
        dialects.__contains__,
        class_standing(templates),
        dialects.declares_device,
        dialects.gpu_vendor_domains,
    )
    if templates is not None and (reads_claims(read, dialects) or stood_for(read, templates)):
        # Claims, or extended resources no map reads, which a DeviceClass may stand for (KEP-5004).
        claims = read_pod_claims(read, templates, dialects.maps, dialects.catalogue, dialects.__contains__)
        claimed, models, avoid = _claim_asks(claims)
        if any(a.list_name == c.list_name and a.index == c.index for a in asks for c in claimed):
            problems.append("a container asks for GPUs by resource and by DRA claim at once; ask one way")
        asks += claimed
        selection = _narrowed(selection, models, avoid)
        charged = _narrowed(charged, models, avoid)
    asks, used = _dynamic_mig(asks, annotations, dialects)
    selection = selection._replace(annotations=selection.annotations | used)
    shared, problem, unreadable = _annotation_share(read, annotations, dialects)
    if shared is not None:
        if any(a.list_name == shared.list_name and a.index == shared.index for a in asks):
            problem = f"{shared.label} asks for a GPU share by annotation and GPU resources at once"
        # Charged beside the resources either way: a scheduler without its own admission check gives both.
        asks.append(shared)
        selection = selection._replace(annotations=selection.annotations | set(shared.written))
    if problem:
        problems.append(problem)
    return PodDemand(
        tuple(asks),
        selection,
        tuple(problems),
        constraints,
        names,
        claims,
        unread,
        unreadable,
        charged.models,
    )


def _narrowed(selection: Selection, models: frozenset[str] | None, avoid: frozenset[str]) -> Selection:
    """The selection with the models the pod's claims accept and refuse."""
    if models is not None:
        narrowed = models if selection.models is None else selection.models & models
        selection = selection._replace(models=narrowed)
    if avoid:
        kept = None if selection.models is None else selection.models - avoid
        selection = selection._replace(models=kept, avoid=selection.avoid | avoid)
    return selection


def reads_claims(read: PodRead, dialects: Dialects) -> bool:
    """Whether the pod's asks need claim objects read: it names claims, or asks for a resource a
    DeviceClass may stand for (KEP-5004: the deviceclass.resource.kubernetes.io/<class> names, or an
    extended resource no loaded map reads)."""
    return bool(read.spec.get("resourceClaims")) or any(
        n.startswith(CLASS_RESOURCE_PREFIX) or (is_extended_resource(n) and n not in dialects)
        for n in read.resource_names
    )


def _claim_asks(
    claims: PodClaims,
) -> tuple[list[ContainerAsk], frozenset[str] | None, frozenset[str]]:
    """One ask per container that uses a GPU claim, the models those claims accept, and those they
    refuse."""
    asks: list[ContainerAsk] = []
    models: frozenset[str] | None = None
    avoid: frozenset[str] = frozenset()
    for use in claims.uses:
        wanted = use.devices
        site = _Site(use.container, {f"resourceClaims {use.claim}": use.template})
        ask = site.ask(wanted.kind, wanted.count, wanted.vendor, profile=wanted.profile)
        asks.append(ask._replace(claim=use.claim))
        if wanted.models is not None:
            models = wanted.models if models is None else models & wanted.models
        avoid |= wanted.avoid
    return asks, models, avoid


def _annotation_share(
    read: PodRead, annotations: Mapping[str, Any], dialects: Dialects
) -> tuple[ContainerAsk | None, str, str]:
    """A share of one container's GPU asked by pod annotation (KAI scheduler's gpu-fraction or
    gpu-memory, or its per-container nvidia.com/container.<name>.gpu-memory.request/limit), read only
    from pods that scheduler schedules (elsewhere the words mean nothing), as KAI reads it
    (annotation_share.py): the ask, a problem for translation, and why the budget cannot count it ("" when
    it can)."""
    for cloud_map in dialects.annotation_shares:
        if read.spec.get("schedulerName") != cloud_map.scheduler_name:
            continue
        reading = read_annotation_share(cloud_map.shared, annotations, read.containers)
        if reading is None:
            continue
        if reading.unreadable:
            return None, reading.unreadable, reading.unreadable
        if reading.container is None or reading.share is None:
            continue  # a device count alone asks for nothing (KAI reads it only beside a share)
        site = _Site(reading.container, reading.written)
        return site.ask("shared", reading.devices, cloud_map.vendor, share=reading.share), "", ""
    return None, "", ""


def node_constraints(spec: Mapping[str, Any]) -> list[Constraint]:
    """(key, operator, values) of every label requirement the pod puts on its node: nodeSelector
    entries (as In) and each required node-affinity expression (values empty for Exists/DoesNotExist)."""
    found: list[Constraint] = []
    selector = spec.get("nodeSelector")
    if is_map(selector):
        found += [(str(k), "In", (str(v),)) for k, v in selector.items()]
    for expression in required_expressions(spec):
        if isinstance(expression.get("key"), str):
            values = tuple(map(str, expression.get("values") or ()))
            found.append((expression["key"], str(expression.get("operator")), values))
    return found


def read_selection(
    spec: Mapping[str, Any], dialects: Dialects, read: tuple[Constraint, ...] | None = None
) -> Selection:
    """What the node selector and required affinity say about GPUs; `read` is node_constraints(spec)
    when the caller has it already. The required terms are ORed: the pod may land on a node any one
    of them admits, so each term is read with the node selector and the readings are joined at their
    widest (never a smaller GPU than one term allows)."""
    terms = required_terms(spec)
    if terms is not None and len(terms) > 1:
        return _widest([_read_constraints(_term_constraints(spec, term), dialects) for term in terms])
    return _read_constraints(node_constraints(spec) if read is None else read, dialects)


def _term_constraints(spec: Mapping[str, Any], term: Any) -> list[Constraint]:
    """The node selector and one required term, as node_constraints reads them for a pod with one."""
    one = {"nodeSelector": spec.get("nodeSelector")}
    if is_map(term):
        required = {"nodeSelectorTerms": [term]}
        one["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    return node_constraints(one)


def _read_constraints(every: Iterable[Constraint], dialects: Dialects) -> Selection:
    keys = dialects.selector_keys()
    constraints = tuple([(k, values) for k, op, values in every if k in keys and op == "In"])
    if not constraints:
        return NO_SELECTION
    # The pods of one workload (and every pod translated to one model) repeat their requirements.
    known: Selection | None = dialects.selections.get(constraints)
    if known is None:
        known = _selection_of(constraints, dialects)
        if len(dialects.selections) < MEANINGS_KEPT:
            dialects.selections[constraints] = known
    return known


def _widest(readings: list[Selection]) -> Selection:
    """ORed readings joined: any model one allows, a slice only if every one asks for slices (the
    largest), shared only if every one asks for a share."""
    model_sets = [r.models for r in readings if r.models is not None]
    profiles = [r.profile for r in readings if r.profile is not None]
    return Selection(
        models=frozenset().union(*model_sets) if len(model_sets) == len(readings) else None,
        profile=max(profiles, key=_size) if len(profiles) == len(readings) else None,
        shared=all(r.shared for r in readings),
        keys=frozenset().union(*(r.keys for r in readings)),
        unknown=tuple(u for r in readings for u in r.unknown),
        interconnect=_one({r.interconnect for r in readings}),
    )


def _one(words: set[str]) -> str:
    """The word all of them say ("" among them: not known), else ""."""
    return words.pop() if len(words) == 1 else ""


def _size(profile: MigProfile | None) -> tuple[int, int]:
    return (profile.compute, profile.memory_gb) if profile is not None else (0, 0)


def _larger(a: MigProfile | None, b: MigProfile | None) -> MigProfile | None:
    return b if a is None or (b is not None and _size(b) > _size(a)) else a


def _selection_of(constraints: tuple[tuple[str, tuple[str, ...]], ...], dialects: Dialects) -> Selection:
    models: frozenset[str] | None = None
    profile: MigProfile | None = None
    shared = False
    unknown: list[str] = []
    interconnect = ""
    for key, values in constraints:
        named: set[str] = set()
        names_models = False
        # Values of one requirement are ORed: the scheduler may pick a node with any of them, so the
        # key says "a slice" only if every value names one, and then the largest it allows (a pod
        # selecting partition sizes [7g.80gb, 1g.10gb] may be given seven 7g slices); "shared" only
        # if every value says so.
        key_profiles: list[MigProfile | None] = []
        key_shared = True
        links: set[str] = set()
        for value in values:
            meaning = dialects.label_meaning(key, value)
            links.add(meaning.interconnect)
            names_models = names_models or meaning.names_models
            named |= meaning.models
            key_profiles.append(meaning.profile)
            key_shared = key_shared and meaning.shared
            unknown += meaning.unparsed
        if key_profiles and all(p is not None for p in key_profiles):
            for found in key_profiles:
                profile = _larger(profile, found)
        shared = shared or (key_shared and bool(values))
        # Requirements are ANDed: one that admits only sxm nodes makes the pod's nodes sxm.
        interconnect = interconnect or _one(links)
        if names_models:
            if named:
                models = frozenset(named) if models is None else models & named
            else:
                unknown.append(f"{key} in {list(values)}")
    keys = frozenset([k for k, _ in constraints])
    return Selection(models, profile, shared, keys, tuple(unknown), interconnect=interconnect)


_EVERY_SCHEDULER = object()


def with_model_annotations(
    selection: Selection,
    annotations: Mapping[str, Any],
    dialects: Dialects,
    scheduler: Any = _EVERY_SCHEDULER,
) -> Selection:
    """Narrow the acceptable models by annotations such as HAMi's nvidia.com/use-gputype: "A100,H100"
    and nvidia.com/nouse-gputype: "T4" (comma-separated, matched as words of the model's names). With
    `scheduler` (the pod's schedulerName), only those the layer scheduling it honours (HAMi's webhook
    sets hami-scheduler on every pod it serves): anywhere else nothing schedules by them, and a smaller
    model they name would lower the charge of GPUs the node gives unnarrowed."""
    if not annotations:
        return selection
    models = selection.models
    avoid: frozenset[str] = frozenset()
    used: set[str] = set()
    unknown = list(selection.unknown)
    for key, keep, honoured_by in dialects.model_annotations:
        value = annotations.get(key)
        unhonoured = scheduler is not _EVERY_SCHEDULER and honoured_by and scheduler != honoured_by
        if not isinstance(value, str) or unhonoured:
            continue
        used.add(key)
        named = _models_named(value, dialects)
        if keep and not named:
            unknown.append(f"{key}={value}")
        if keep:
            models = named if models is None else models & named
        else:
            avoid |= named
    if not used:
        return selection
    if models is not None:
        models -= avoid
    return selection._replace(models=models, unknown=tuple(unknown), annotations=frozenset(used), avoid=avoid)


def _models_named(value: str, dialects: Dialects) -> frozenset[str]:
    tokens = [t.strip().upper() for t in value.split(",") if t.strip()]
    return frozenset(
        model.id
        for model in dialects.catalogue.models.values()
        for token in tokens
        if any(token in name.upper() for name in (model.id, *model.names))
    )


def required_expressions(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    expressions = []
    for term in required_terms(spec) or ():
        if is_map(term):
            expressions += [e for e in term.get("matchExpressions") or () if is_map(e)]
    return expressions


def _read_container(
    container: ContainerRef, selection: Selection, dialects: Dialects
) -> tuple[tuple[ContainerAsk, ...], str]:
    """The container's GPU asks, one per kind, and a problem when there is more than one: the device
    plugins serve such a container (a 7g and a 1g slice side by side), so the budget counts every
    kind, while translation, which says one ask in the target's words, refuses it."""
    limits, requests = container.limits, container.requests
    written: dict[str, str] = {}
    amounts: dict[str, Decimal] = {}
    for name in (*limits, *(n for n in requests if n not in limits)):
        if not is_extended_resource(name) or name not in dialects:
            continue
        raw = limits.get(name, requests.get(name))
        try:
            amount = quantity.parse(raw)
        except quantity.QuantityError:
            continue  # the checks have already denied it
        if amount == 0:
            continue  # "nvidia.com/gpu: 0" asks for nothing
        amounts[name] = amount
        written[name] = str(raw)
    if not amounts:
        return (), ""
    site = _Site(container, written)

    kinds: list[ContainerAsk] = []
    problem = ""
    if not dialects.share_resource_names.isdisjoint(amounts):
        for form, vendor, share_names in dialects.memory_forms:
            if not share_names.isdisjoint(amounts):
                share, problem = _read_share(form, vendor, amounts, site)
                taken = share_names | {form.count_resource}
                if share is not None:
                    kinds.append(share._replace(resources=tuple(sorted(n for n in amounts if n in taken))))
                # The names beside the share are asks of their own (a MIG slice next to a memory
                # share): read below, never dropped with it.
                amounts = {n: a for n, a in amounts.items() if n not in taken}
                break

    for name, amount in amounts.items():
        meaning = dialects.resource_meaning(name)
        if meaning.kind == "mig":
            kinds.append(
                site.ask("mig", int(amount), meaning.vendor, profile=meaning.profile, resources=(name,))
            )
        elif meaning.kind == "shared":
            kinds.append(
                site.ask("shared", int(amount), meaning.vendor, share=SharedAsk(), resources=(name,))
            )
        elif meaning.kind == "whole":
            kinds.append(_whole(amount, meaning.vendor, selection, site, (name,)))
    if len(kinds) > 1:
        problem = (
            f"{container.label} asks for {len(kinds)} kinds of GPU at once ({', '.join(sorted(written))}); "
            "ask for one"
        )
    return tuple(kinds), problem


def _read_share(
    form: SharedForm, vendor: str, amounts: Mapping[str, Decimal], site: _Site
) -> tuple[ContainerAsk | None, str]:
    memory = amounts.get(form.memory_resource)
    percent = amounts.get(form.memory_percent_resource) if form.memory_percent_resource else None
    core = amounts.get(form.core_resource) if form.core_resource else None
    count = amounts.get(form.count_resource, Decimal(1)) if form.count_resource else Decimal(1)
    core_percent = int(core * 100 / form.core_per_gpu) if core is not None else None
    if form.default_memory_percent and not memory and not percent:
        # Neither memory nor a percentage (or 0 of them): the layer's default, all of each card's
        # memory in HAMi and Volcano, whatever the cores say.
        memory, percent = None, Decimal(form.default_memory_percent)
    if percent is not None and memory is None and percent >= 100:
        # All of a card's memory is no share at all: an exclusive GPU (HAMi gpumem-percentage: 100
        # with gpucores 100 or unset; Koordinator gpu-memory-ratio: 200 is two whole cards).
        cards, rest = divmod(int(percent), 100)
        if rest:
            where = site.container.label
            return None, f"{where} asks for {percent}% of a GPU's memory; ask for whole GPUs or at most 100%"
        if core_percent is None or core_percent >= 100 * cards:
            whole = int(count) if form.count_resource in amounts else cards
            return site.ask("whole", whole, vendor), ""
    share = SharedAsk(
        memory_mib=int(memory * form.memory_unit_bytes / quantity.MIB) if memory is not None else None,
        core_percent=core_percent,
        memory_percent=int(percent) if percent is not None else None,
    )
    return site.ask("shared", int(count), vendor, share=share), ""


def _dynamic_mig(
    asks: list[ContainerAsk], annotations: Mapping[str, Any], dialects: Dialects
) -> tuple[list[ContainerAsk], frozenset[str]]:
    """Memory shares a pod asks to have cut as MIG instances (the annotations of a map whose MIG form
    is by-memory: HAMi's nvidia.com/vgpu-mode, Volcano's volcano.sh/vgpu-mode), marked isolated; and
    the annotations that said so (they carry GPU meaning: another platform's are removed)."""
    used: set[str] = set()
    for wanted, memory in dialects.dynamic_mig:  # read once per loaded maps, usually one or none
        if any(str(annotations.get(k)) != v for k, v in wanted.items()):
            continue
        marked = [
            a._replace(share=a.share._replace(isolated=True))
            if a.kind == "shared" and a.share is not None and memory in a.written
            else a
            for a in asks
        ]
        if marked != asks:
            asks, used = marked, used | set(wanted)
    return asks, frozenset(used)


def _whole(
    amount: Decimal, vendor: str, selection: Selection, site: _Site, resources: tuple[str, ...]
) -> ContainerAsk:
    if not quantity.is_whole(amount):
        return site.ask("fraction", 0, vendor, fraction=Fraction(amount), resources=resources)
    if selection.profile is not None:
        return site.ask("mig", int(amount), vendor, profile=selection.profile, resources=resources)
    if selection.shared:
        return site.ask("shared", int(amount), vendor, share=SharedAsk(), resources=resources)
    return site.ask("whole", int(amount), vendor, resources=resources)
