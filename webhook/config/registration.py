"""What gpuport registers with the API server once it is ready: its mutating and validating webhook
configurations (webhook/config/admission/) pointed at its Service (or a URL) with its CA bundle, and the
safety-net policy rendered for the cloud map in force, and the policy that refuses GPUs asked by
environment variable in the namespaces with a GPU budget (policy.py).

Nothing of it is in the install's manifests: before gpuport has been ready once, no webhook and no
policy can refuse a pod. The quota webhook fails closed only in the namespaces that have a GPU budget
(a GPU quota or GPU limits), which gpuport names here as it sees them; everywhere else the same checks
fail open.
"""

import base64
import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

from webhook.config.policy import env_policy_objects, policy_objects
from webhook.core.budget.frozen import charge_annotations
from webhook.core.vocabulary.platform import CloudMap

NAME = "gpuport"  # both webhook configurations
FAIL_CLOSED = "pods.validate.gpuport.io"  # quota and limits: refuses while gpuport is down
FAIL_OPEN = "pods.check.gpuport.io"  # the same checks where there is no budget to protect
CLAIMS_FAIL_CLOSED = "claims.validate.gpuport.io"  # claims made under names pods hold (budgets)
CLAIMS_FAIL_OPEN = "claims.check.gpuport.io"
CLOSED_HOOKS = (FAIL_CLOSED, CLAIMS_FAIL_CLOSED)
BUDGET_SPLIT = (FAIL_CLOSED, FAIL_OPEN, CLAIMS_FAIL_CLOSED, CLAIMS_FAIL_OPEN)
NAMESPACE_KEY = "kubernetes.io/metadata.name"
# The charge annotations the packaged pod hooks name (the shipped maps'): a registration for other maps
# names theirs instead, so that every update of one reaches gpuport (core/budget/frozen.py).
PACKAGED_CHARGE_KEYS = (
    "gpu-fraction",
    "gpu-fraction-container-name",
    "gpu-fraction-num-devices",
    "gpu-memory",
    "gpuport.io/claim-templates",
    "nvidia.com/nouse-gputype",
    "nvidia.com/use-gputype",
    "nvidia.com/vgpu-mode",
    "volcano.sh/vgpu-mode",
)


@dataclass(frozen=True)
class Endpoint:
    """Where the API server calls gpuport: its Service (in the cluster), or a URL (outside it)."""

    service: str = "gpuport"
    namespace: str = "gpuport-system"
    url: str = ""  # https://host:port, the routes' paths appended

    def client_config(self, path: str, ca_bundle: bytes) -> dict[str, Any]:
        found: dict[str, Any] = (
            {"url": f"{self.url.rstrip('/')}{path}"}
            if self.url
            else {"service": {"name": self.service, "namespace": self.namespace, "path": path, "port": 443}}
        )
        if ca_bundle:
            found["caBundle"] = base64.b64encode(ca_bundle).decode()
        return found


def packaged(name: str) -> dict[str, Any]:
    text = resources.files("webhook.config").joinpath(f"admission/{name}.yaml").read_text(encoding="utf-8")
    found: dict[str, Any] = yaml.safe_load(text)
    return found


def _cel_list(keys: Iterable[str]) -> str:
    return "[" + ", ".join(f"'{k}'" for k in keys) + "]"


def with_charge_keys(hook: dict[str, Any], keys: Iterable[str]) -> None:
    """Name `keys` (with the packaged ones) wherever the pod hook's conditions name charge annotations."""
    packaged_list = _cel_list(PACKAGED_CHARGE_KEYS)
    wanted = _cel_list(sorted(set(PACKAGED_CHARGE_KEYS) | set(keys)))
    for condition in hook.get("matchConditions", ()):
        condition["expression"] = condition["expression"].replace(packaged_list, wanted)


def webhook_configurations(
    endpoint: Endpoint,
    ca_bundle: bytes,
    budget_namespaces: Iterable[str] = (),
    charge_keys: Iterable[str] = (),
) -> list[dict[str, Any]]:
    """The mutating and validating configurations, ready to register; `charge_keys`: the annotations
    the loaded maps read as GPU asks, beside the shipped maps' (an update changing one is reviewed)."""
    budget = sorted(set(budget_namespaces))
    charge_keys = tuple(charge_keys)
    configs = []
    for name in ("mutating", "validating"):
        config = copy.deepcopy(packaged(name))
        hooks = []
        for hook in config["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = endpoint.client_config(path, ca_bundle)
            if hook["name"] in BUDGET_SPLIT:
                with_charge_keys(hook, charge_keys)
                # `In`/`NotIn` need at least one value: with no budget anywhere, only the open hook stays.
                if not budget:
                    if hook["name"] in CLOSED_HOOKS:
                        continue
                else:
                    operator = "In" if hook["name"] in CLOSED_HOOKS else "NotIn"
                    expressions = hook["namespaceSelector"]["matchExpressions"]
                    expressions.append({"key": NAMESPACE_KEY, "operator": operator, "values": budget})
            hooks.append(hook)
        config["webhooks"] = hooks
        configs.append(config)
    return configs


def excluded_namespaces() -> Mapping[str, Any]:
    """The namespaces gpuport's webhooks skip (system ones, its own, opted out), as a selector."""
    hook = packaged("validating")["webhooks"][0]
    selector: Mapping[str, Any] = hook["namespaceSelector"]
    return selector


def budget_namespaces_selector(budget_namespaces: Iterable[str]) -> dict[str, Any]:
    """The namespaces with a GPU budget, as the fail-closed webhook selects them (the skipped ones
    stay skipped). With none, a selector that matches no namespace: the API server gives every
    namespace this label, and `In` needs a value; the binding stays, so that the registrar, which never
    deletes, replaces the last list with it rather than leaving that list in force."""
    selector = copy.deepcopy(dict(excluded_namespaces()))
    budget = sorted(set(budget_namespaces))
    narrowed = (
        {"key": NAMESPACE_KEY, "operator": "In", "values": budget}
        if budget
        else {"key": NAMESPACE_KEY, "operator": "DoesNotExist"}
    )
    selector["matchExpressions"] = [*selector.get("matchExpressions", []), narrowed]
    return selector


def registered_objects(
    target: CloudMap,
    maps: tuple[CloudMap, ...],
    endpoint: Endpoint,
    ca_bundle: bytes,
    budget_namespaces: Iterable[str] = (),
) -> list[dict[str, Any]]:
    """Everything gpuport registers, in the order to register it: the names policy before the webhooks
    that make it redundant while gpuport runs; the env policy last, as a registrar round stops at the
    first object it may not write (an RBAC not yet updated must not keep the webhooks out)."""
    budget = sorted(set(budget_namespaces))
    return [
        *policy_objects(target, maps, excluded_namespaces()),
        *webhook_configurations(endpoint, ca_bundle, budget, charge_annotations(maps)),
        *env_policy_objects(target, maps, budget_namespaces_selector(budget)),
    ]
