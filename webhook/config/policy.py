"""The ValidatingAdmissionPolicy safety net, rendered for the cloud map in force.

When gpuport is down its mutating webhook fails open, and a pod still written for another cloud
(aliyun.com/gpu-mem on an EKS cluster) would be created and wait forever for a resource no node has.
The policy runs inside the API server and refuses, with a message that says what it enforces and why,
any pod that asks for a GPU resource this cluster does not offer but another known platform does. It
is rendered from the cluster's own map (gpuport registers it, and keeps it in step when the map
changes), so the cluster's own vendor is never refused by it. While gpuport runs it never fires:
gpuport has already translated or denied such pods. (Fractional GPUs need no policy: the API server's
own validation refuses them before any validating step.)
"""

import json
from collections.abc import Mapping
from typing import Any

from webhook.core.vocabulary.platform import CloudMap

POLICY_NAME = "gpuport-gpu-names"


def foreign_names(target: CloudMap, maps: tuple[CloudMap, ...]) -> list[str]:
    """The GPU resource names another loaded platform reads that this cluster does not offer."""
    known = set().union(*(m.resource_names() for m in maps))
    if target.dra is not None:
        # A DRA cluster gives GPUs by claim, but for the resources a DeviceClass stands for (KEP-5004):
        # the scheduler turns those into claims, and gpuport leaves them as written.
        return sorted(known - set(target.dra.extended_resources))
    return sorted(n for n in known if not target.is_accelerator(n))


def policy_objects(
    target: CloudMap, maps: tuple[CloudMap, ...], namespace_selector: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The policy and its binding. `namespace_selector` is the one gpuport's own webhooks use, so the
    policy can never hold where the webhooks would not."""
    names = foreign_names(target, maps)
    listed = json.dumps(names)

    def clean(containers: str) -> str:
        return (
            f"{containers}.all(c, !has(c.resources) || ("
            f"(!has(c.resources.limits) || c.resources.limits.all(k, !(k in {listed}))) && "
            f"(!has(c.resources.requests) || c.resources.requests.all(k, !(k in {listed})))))"
        )

    expression = (
        f"{clean('object.spec.containers')} && "
        f"(!has(object.spec.initContainers) || {clean('object.spec.initContainers')})"
    )
    offered = ", ".join(sorted(n for n in target.resource_names() if target.is_accelerator(n)))
    if target.dra is not None:
        offered = ", ".join(["DRA claims", *sorted(target.dra.extended_resources)])
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY_NAME},
        "spec": {
            "failurePolicy": "Fail",
            # Written out with the API server's defaults: these structs are atomic for server-side apply,
            # so a value the server would complete conflicts with a client-side apply made before it.
            "matchConstraints": {
                "matchPolicy": "Equivalent",
                "namespaceSelector": {},
                "objectSelector": {},
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                        "scope": "*",
                    }
                ],
            },
            "validations": [
                {
                    "expression": expression,
                    "message": (
                        f"gpuport's safety net for this cluster ({target.name}): this pod asks for a GPU "
                        "resource written for another platform, which no node here offers (it would wait "
                        "forever). gpuport translates such pods but is not answering now: retry shortly, "
                        f"or ask for this cluster's GPUs ({offered})."
                    ),
                    "reason": "Invalid",
                }
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": POLICY_NAME},
        "spec": {
            "policyName": POLICY_NAME,
            "validationActions": ["Deny"],
            "matchResources": {
                "matchPolicy": "Equivalent",
                "namespaceSelector": dict(namespace_selector),
                "objectSelector": {},
            },
        },
    }
    return [policy, binding]
