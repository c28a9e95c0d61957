"""Device-plugin asks in Dynamic Resource Allocation's words: a request for devices of a class, with
CEL selectors on the driver's attributes, in a ResourceClaimTemplate the pod's claim is made from.

Templates are content-addressed: the name is a digest of the spec, so every pod asking for the same
thing (the replicas of a Deployment, a second identical Job) refers to one template, creating it
again is harmless, and a template's name can never come to mean something else.
"""

import hashlib
import json
from dataclasses import dataclass, replace
from typing import Any

from webhook.core.asks.pod_claims import TEMPLATE_PREFIX
from webhook.core.vocabulary import dra_api
from webhook.core.vocabulary.platform import DraForm

MANAGED_BY = {"app.kubernetes.io/managed-by": "gpuport"}
ASKS_ANNOTATION = "gpuport.io/asks"  # what the template asks for, in words, for `kubectl describe`


@dataclass(frozen=True)
class DeviceRequest:
    """k devices of one class, each matching every selector (CEL expressions, ANDed)."""

    request_name: str  # "gpu" or "mig": the request's name in the template, and in its name
    device_class: str
    count: int
    selectors: tuple[str, ...]
    words: str  # "2 × A100-80GB", for the template's annotation and the warning


@dataclass(frozen=True)
class DeviceAsk:
    """What one container's claim asks for, in gpuport's words: `count` whole GPUs ("gpu") or MIG
    slices of `profile` ("mig"), on `models` (any when empty) and never on `avoid`. Translating an ask
    says this much; plan_claims says it in the cluster's device classes and CEL."""

    kind: str
    count: int
    models: tuple[str, ...] = ()
    avoid: tuple[str, ...] = ()
    profile: str = ""


def device_request(form: DraForm, ask: DeviceAsk) -> DeviceRequest:
    if ask.kind == "mig":
        return mig_request(form, ask.count, ask.profile, ask.models, ask.avoid)
    return whole_request(form, ask.count, ask.models, ask.avoid)


def attribute(form: DraForm, name: str) -> str:
    return f'device.attributes["{form.driver}"].{name}'


def one_of(form: DraForm, name: str, values: tuple[str, ...]) -> str:
    """`attr == "v"`, or `attr in ["v", "w"]`. Values come from a cloud map whose schema allows
    no quote or backslash in them, so json.dumps is a CEL string literal."""
    if len(values) == 1:
        return f"{attribute(form, name)} == {json.dumps(values[0])}"
    return f"{attribute(form, name)} in [{', '.join(json.dumps(v) for v in values)}]"


def product_selector(form: DraForm, models: tuple[str, ...], avoid: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The models asked for, or else those refused, as the product attribute says them: a refusal
    stays a refusal (`!(… in […])`), so a GPU the map does not list is still acceptable."""
    names = tuple(n for m in models for n in form.product_names.get(m, ()))
    if names:
        return (one_of(form, form.product_attribute, names),)
    refused = tuple(n for m in avoid for n in form.product_names.get(m, ()))
    return (f"!({one_of(form, form.product_attribute, refused)})",) if refused else ()


def _models_words(models: tuple[str, ...]) -> str:
    if len(models) > 3:
        return f"one of {len(models)} models"
    return " or ".join(models)


def whole_request(
    form: DraForm, count: int, models: tuple[str, ...], avoid: tuple[str, ...] = ()
) -> DeviceRequest:
    refusing = f" (not {_models_words(avoid)})" if avoid and not models else ""
    words = f"{count} × {_models_words(models) or 'any GPU'}{refusing}"
    kind = (one_of(form, "type", (form.whole_type,)),) if form.whole_type else ()
    selectors = (*kind, *product_selector(form, models, avoid))
    return DeviceRequest("gpu", form.whole_class, count, selectors, words)


def mig_request(
    form: DraForm, count: int, profile: str, models: tuple[str, ...], avoid: tuple[str, ...] = ()
) -> DeviceRequest:
    on = f" on {_models_words(models)}" if models else ""
    # `profile` is a MigProfile's name, the short form: what the driver publishes for a whole MIG
    # device (cloudmaps/dra-nvidia.yaml says where); a long form would match no device.
    selectors = (one_of(form, form.profile_attribute, (profile,)), *product_selector(form, models, avoid))
    return DeviceRequest("mig", form.mig_class, count, selectors, f"{count} × MIG {profile}{on}")


def claim_template(form: DraForm, *requests: DeviceRequest) -> dict[str, Any]:
    """The ResourceClaimTemplate for a claim of these requests, named by a digest of its spec (and
    by the first request's kind: gpuport-gpu-…, gpuport-mig-…)."""
    entries = []
    for request in requests:
        exact: dict[str, Any] = {
            "deviceClassName": request.device_class,
            "allocationMode": "ExactCount",
            "count": request.count,
        }
        if request.selectors:
            exact["selectors"] = [{"cel": {"expression": e}} for e in request.selectors]
        entries.append(dra_api.request_entry(form.api_version, request.request_name, exact))
    spec = {"spec": {"devices": {"requests": entries}}}
    digest = hashlib.sha256(json.dumps([form.api_version, spec], sort_keys=True).encode()).hexdigest()[:12]
    kind = "mig" if requests[0].device_class == form.mig_class else "gpu"
    return {
        "apiVersion": form.api_version,
        "kind": "ResourceClaimTemplate",
        "metadata": {
            "name": f"{TEMPLATE_PREFIX}{kind}-{digest}",
            "labels": dict(MANAGED_BY),
            "annotations": {ASKS_ANNOTATION: " + ".join(r.words for r in requests)},
        },
        "spec": spec,
    }


@dataclass(frozen=True)
class ClaimPlan:
    """Which claim a container uses, made from which template: all of it, or one `request` of it (an
    app container's own devices in a claim its init containers use whole). `words` says what the
    container is given, for the warning."""

    claim: str
    template: dict[str, Any]
    words: str
    request: str = ""


Planned = tuple[str, int, str, DeviceRequest]  # (list name, index, container name, request)
Asked = tuple[str, int, str, DeviceAsk]  # (list name, index, container name, what its claim asks for)
SPARE = "init"  # the request holding what init containers need beyond the app containers' devices


def plan_claims(
    form: DraForm, asked: list[Asked], sidecars: set[int], taken: frozenset[str] = frozenset()
) -> dict[tuple[str, int], ClaimPlan]:
    """The claims a translated pod gets, holding what a device plugin would give it: init containers
    run one at a time before the app containers, so the pod holds max(largest init, sum of the app
    containers) devices, never their sum. App and init containers asking for the same devices share
    one claim: each app container has a request of its own in it, the init containers use all of it
    (an extra request `init` holds what they need beyond the app containers' devices). Sidecars
    (restartable init containers) run beside the others and keep claims of their own."""
    plans: dict[tuple[str, int], ClaimPlan] = {}
    groups: dict[tuple[str, tuple[str, ...]], list[Planned]] = {}
    for list_name, index, name, device in asked:
        request = device_request(form, device)
        groups.setdefault((request.device_class, request.selectors), []).append(
            (list_name, index, name, request)
        )
    names = _Names(set(taken))
    for group in groups.values():
        inits = [p for p in group if p[0] == "initContainers" and p[1] not in sidecars]
        running = [p for p in group if p not in inits]
        apps = [p for p in running if p[0] == "containers"]
        for list_name, index, name, request in (
            running if not inits else [p for p in running if p not in apps]
        ):
            claim = names.new(claim_name(list_name, index, name))
            plans[(list_name, index)] = ClaimPlan(claim, claim_template(form, request), request.words)
        if inits:
            plans.update(_shared_claim(form, apps, inits, names))
    return plans


class _Names:
    """A pod's claim names, each used once: a container named c0 and the fallback name of another
    container's claim (gpuport-c0) must not become one claim the two share."""

    def __init__(self, taken: set[str]):
        self.taken = taken

    def new(self, wanted: str) -> str:
        name, n = wanted, 1
        while name in self.taken:
            n += 1
            name = f"{wanted[: 63 - len(str(n)) - 1]}-{n}"
        self.taken.add(name)
        return name


def _shared_claim(
    form: DraForm, apps: list[Planned], inits: list[Planned], names: _Names
) -> dict[tuple[str, int], ClaimPlan]:
    """One claim for app containers and the init containers that run before them."""
    first = apps[0] if apps else inits[0]
    claim = names.new(claim_name(first[0], first[1], first[2]))
    held = sum(p[3].count for p in apps)
    most = max(p[3].count for p in inits)
    requests = _request_names([p[2] for p in apps])
    parts = [replace(p[3], request_name=n) for p, n in zip(apps, requests, strict=True)]
    if most > held:
        base = inits[0][3]
        spare = _spare_name(requests) if apps else base.request_name
        parts.append(replace(base, request_name=spare, count=most - held, words=_words(base, most - held)))
    template = claim_template(form, *parts)
    whole = _words(inits[0][3], max(held, most))
    later = f", {held} of them the app's after it" if apps else ""
    plans = {(p[0], p[1]): ClaimPlan(claim, template, f"all {whole}{later}") for p in inits}
    for (list_name, index, _, request), part in zip(apps, parts, strict=False):
        words = f"{request.words}, request {part.request_name}"
        plans[(list_name, index)] = ClaimPlan(claim, template, words, part.request_name)
    return plans


def _words(request: DeviceRequest, count: int) -> str:
    return f"{count} × {request.words.split(' × ', 1)[-1]}"


def _request_names(containers: list[str]) -> list[str]:
    """A request name per app container: its own name (a DNS label, like a request's), unique."""
    names: list[str] = []
    for index, name in enumerate(containers):
        names.append(name if name not in names and name != "?" else f"c{index}")
    return names


def _spare_name(taken: list[str]) -> str:
    name, n = SPARE, 0
    while name in taken:
        n += 1
        name = f"{SPARE}-{n}"
    return name


def claim_name(list_name: str, index: int, container_name: str) -> str:
    """The pod's name for the claim one container uses: readable where the container's name allows
    (a pod's claim names are DNS labels, at most 63 characters)."""
    name = f"{TEMPLATE_PREFIX}{container_name}"
    if len(name) <= 63 and container_name != "?":
        return name
    return f"{TEMPLATE_PREFIX}{'init' if list_name == 'initContainers' else 'c'}{index}"
