"""Device-plugin asks in Dynamic Resource Allocation's words: a request for devices of a class, with
CEL selectors on the driver's attributes, in a ResourceClaimTemplate the pod's claim is made from.

Templates are content-addressed: the name is a digest of the spec, so every pod asking for the same
thing (the replicas of a Deployment, a second identical Job) refers to one template, creating it
again is harmless, and a template's name can never come to mean something else.
"""

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.platform import DraForm
from webhook.core.workloads import editable

TEMPLATE_PREFIX = "gpuport-"
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


def attribute(form: DraForm, name: str) -> str:
    return f'device.attributes["{form.driver}"].{name}'


def one_of(form: DraForm, name: str, values: tuple[str, ...]) -> str:
    """`attr == "v"`, or `attr in ["v", "w"]`. Values come from a cloud map whose schema allows
    no quote or backslash in them, so json.dumps is a CEL string literal."""
    if len(values) == 1:
        return f"{attribute(form, name)} == {json.dumps(values[0])}"
    return f"{attribute(form, name)} in [{', '.join(json.dumps(v) for v in values)}]"


def product_selector(form: DraForm, models: tuple[str, ...]) -> tuple[str, ...]:
    names = tuple(n for m in models for n in form.product_names.get(m, ()))
    return (one_of(form, form.product_attribute, names),) if names else ()


def _models_words(models: tuple[str, ...]) -> str:
    if len(models) > 3:
        return f"one of {len(models)} models"
    return " or ".join(models)


def whole_request(form: DraForm, count: int, models: tuple[str, ...]) -> DeviceRequest:
    words = f"{count} × {_models_words(models) or 'any GPU'}"
    kind = (one_of(form, "type", (form.whole_type,)),) if form.whole_type else ()
    return DeviceRequest("gpu", form.whole_class, count, (*kind, *product_selector(form, models)), words)


def mig_request(form: DraForm, count: int, profile: str, models: tuple[str, ...]) -> DeviceRequest:
    on = f" on {_models_words(models)}" if models else ""
    selectors = (one_of(form, form.profile_attribute, (profile,)), *product_selector(form, models))
    return DeviceRequest("mig", form.mig_class, count, selectors, f"{count} × MIG {profile}{on}")


def claim_template(form: DraForm, request: DeviceRequest) -> dict[str, Any]:
    """The ResourceClaimTemplate for one container's request, named by a digest of its spec."""
    exact: dict[str, Any] = {
        "deviceClassName": request.device_class,
        "allocationMode": "ExactCount",
        "count": request.count,
    }
    if request.selectors:
        exact["selectors"] = [{"cel": {"expression": e}} for e in request.selectors]
    name = {"name": request.request_name}
    entry = {**name, "exactly": exact} if form.nests_requests else {**name, **exact}
    spec = {"spec": {"devices": {"requests": [entry]}}}
    digest = hashlib.sha256(json.dumps([form.api_version, spec], sort_keys=True).encode()).hexdigest()[:12]
    return {
        "apiVersion": form.api_version,
        "kind": "ResourceClaimTemplate",
        "metadata": {
            "name": f"{TEMPLATE_PREFIX}{request.request_name}-{digest}",
            "labels": dict(MANAGED_BY),
            "annotations": {ASKS_ANNOTATION: request.words},
        },
        "spec": spec,
    }


@dataclass(frozen=True)
class ClaimPlan:
    """Which claim a container uses, made from which template; `shared_with` names the app
    container whose claim an init container reuses."""

    claim: str
    template: dict[str, Any]
    shared_with: str = ""


def plan_claims(
    form: DraForm, requests: list[tuple[str, int, str, DeviceRequest]], sidecars: set[int]
) -> dict[tuple[str, int], ClaimPlan]:
    """A claim per (list name, index, container name, request). An init container that runs to
    completion before the app containers start (not a sidecar) reuses an app container's claim
    when it asks for no more of the same devices: a device plugin hands the same GPUs on, and a
    claim of its own would hold more devices than the pod ever uses at once."""
    plans: dict[tuple[str, int], ClaimPlan] = {}
    app = [(r, name, index) for list_name, index, name, r in requests if list_name == "containers"]
    for list_name, index, name, request in sorted(requests, key=lambda r: r[0] != "containers"):
        if list_name == "initContainers" and index not in sidecars:
            host = next(
                (
                    (plans[("containers", i)], n)
                    for r, n, i in app
                    if (r.device_class, r.selectors) == (request.device_class, request.selectors)
                    and r.count >= request.count
                ),
                None,
            )
            if host is not None:
                plans[(list_name, index)] = ClaimPlan(host[0].claim, host[0].template, host[1])
                continue
        plans[(list_name, index)] = ClaimPlan(
            claim_name(list_name, index, name), claim_template(form, request)
        )
    return plans


def claim_name(list_name: str, index: int, container_name: str) -> str:
    """The pod's name for the claim one container uses: readable where the container's name allows
    (a pod's claim names are DNS labels, at most 63 characters)."""
    name = f"{TEMPLATE_PREFIX}{container_name}"
    if len(name) <= 63 and container_name != "?":
        return name
    return f"{TEMPLATE_PREFIX}{'init' if list_name == 'initContainers' else 'c'}{index}"


def add_claim(spec: dict[str, Any], list_name: str, index: int, name: str, template: str) -> None:
    """Give the pod a claim made from `template` and the container a reference to it."""
    claims = editable(spec, "resourceClaims", list)
    claims[:] = [c for c in claims if not (isinstance(c, Mapping) and c.get("name") == name)]
    claims.append({"name": name, "resourceClaimTemplateName": template})
    used = editable(editable(spec[list_name][index], "resources", dict), "claims", list)
    if not any(isinstance(c, Mapping) and c.get("name") == name for c in used):
        used.append({"name": name})


def remove_claim(spec: dict[str, Any], list_name: str, index: int, name: str) -> None:
    """Take the claim from the container, and from the pod once no container refers to it."""
    resources = spec[list_name][index].get("resources")
    used = resources.get("claims") if isinstance(resources, dict) else None
    if isinstance(used, list):
        resources["claims"] = [c for c in used if not (isinstance(c, Mapping) and c.get("name") == name)]
        if not resources["claims"]:
            del resources["claims"]
    still_used = any(
        name in _claims_used(c) for key in ("initContainers", "containers") for c in _list(spec, key)
    )
    if not still_used and isinstance(spec.get("resourceClaims"), list):
        kept = [c for c in spec["resourceClaims"] if not (isinstance(c, Mapping) and c.get("name") == name)]
        if kept:
            spec["resourceClaims"] = kept
        else:
            del spec["resourceClaims"]


def _list(mapping: Mapping[str, Any], key: str) -> list[Any]:
    found = mapping.get(key)
    return found if isinstance(found, list) else []


def _claims_used(container: Any) -> set[str]:
    resources = container.get("resources") if isinstance(container, Mapping) else None
    used = _list(resources, "claims") if isinstance(resources, Mapping) else []
    return {c["name"] for c in used if isinstance(c, Mapping) and isinstance(c.get("name"), str)}
