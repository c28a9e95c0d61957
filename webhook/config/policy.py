"""gpuport's two ValidatingAdmissionPolicies: the safety net for foreign GPU names, rendered for the cloud
map in force, and, bound to the namespaces with a GPU budget, the refusal of GPUs asked for by
environment variable (env_policy_objects).

When gpuport is down its mutating webhook fails open, and a pod still written for another cloud
(aliyun.com/gpu-mem on an EKS cluster) would be created and wait forever for a resource no node has.
The policy runs inside the API server and refuses, with a message that says what it enforces and why,
any pod that asks for a GPU resource this cluster does not offer but another known platform does. It
is rendered from the cluster's own map (gpuport registers it, and keeps it in step when the map
changes), so the cluster's own vendor is never refused by it. While gpuport runs it never fires:
gpuport has already translated or denied such pods. (Fractional GPUs need no policy: the API server's
own validation refuses them before any validating step.)

A pod may ask for this cluster's own GPU resource and still be written for another platform in its
node selector (nvidia.com/gpu with cloud.google.com/gke-accelerator on EKS): it too would wait forever,
and a pod's node selector cannot be changed once it exists. The same policy's second check refuses it
(foreign_selectors says which labels): a GPU pod whose node selector, or every required node-affinity
term, requires a label only another platform's nodes carry. It holds the same property: gpuport
translates exactly such pods on /mutate, dropping the foreign requirements (rewriting/translate.py,
DropSelectors), so while it answers no pod reaches this check still naming them.

Why one module of ~400 lines: both policies are CEL over the same pod, read under the same limits of
the API server's type checker (resources through dyn), and both ask the one question of what a GPU ask
is here (_asks_a_gpu); apart, that reading would be written twice and drift.
"""

import json
from collections.abc import Mapping
from typing import Any

from webhook.core.vocabulary.platform import CloudMap

POLICY_NAME = "gpuport-gpu-names"

# Label domains whose keys every cloud's nodes carry, each cloud with its own values: Kubernetes' own
# (node.kubernetes.io/instance-type is p4d.24xlarge on EKS, Standard_ND96asr_v4 on AKS). Their keys say
# nothing of where a pod was written, so they are judged by value: one another platform's map names
# and this cluster's does not. That is worth its few dozen strings: the instance type is the only GPU
# label EKS, AKS and OKE have, so without it a pod written for one of them passes on another.
SHARED_DOMAIN = "kubernetes.io"
# Labels the GPU vendors' own node software writes (NVIDIA's GPU Feature Discovery, AMD's node
# labeller), which runs on any cloud's nodes (the GPU Operator on EKS labels nvidia.com/gpu.product):
# another map reading them says nothing of this cluster's nodes lacking them, so they are never
# refused here. gpuport still translates them when it answers.
VENDOR_LABEL_DOMAINS = ("nvidia.com", "amd.com")


def foreign_names(target: CloudMap, maps: tuple[CloudMap, ...]) -> list[str]:
    """The GPU resource names another loaded platform reads that this cluster does not offer."""
    known = set().union(*(m.resource_names() for m in maps))
    if target.dra is not None:
        # A DRA cluster gives GPUs by claim, but for the resources a DeviceClass stands for (KEP-5004):
        # the scheduler turns those into claims, and gpuport leaves them as written.
        return sorted(known - set(target.dra.extended_resources))
    return sorted(n for n in known if not target.is_accelerator(n))


def _domain(key: str) -> str:
    return key.partition("/")[0] if "/" in key else ""


def _every_cloud_s(key: str) -> bool:
    domain = _domain(key)
    return domain == SHARED_DOMAIN or domain.endswith(f".{SHARED_DOMAIN}")


def foreign_selectors(target: CloudMap, maps: tuple[CloudMap, ...]) -> tuple[list[str], list[str]]:
    """The node-label requirements only another loaded platform's nodes satisfy: (label keys, whatever
    the value; "key=value" pairs of the keys every cloud shares). Read from the GPU labels each map
    reads (model, MIG partition, sharing and instance-type labels: CloudMap.selector_keys); a key or a
    value this cluster's map reads is never among them, so a pod in its own words always passes."""
    others = [m for m in maps if m.name != target.name]
    own_keys = target.selector_keys()
    keys: set[str] = set()
    pairs: set[str] = set()
    for cloud_map in others:
        for key in cloud_map.selector_keys() - own_keys:
            if not (
                _domain(key) in VENDOR_LABEL_DOMAINS or target.node_labels.owns(key) or _every_cloud_s(key)
            ):
                keys.add(key)
        for label in cloud_map.model_labels:
            if _every_cloud_s(label.label):
                pairs |= {f"{label.label}={v}" for values in label.values.values() for v in values}
    own_pairs = {
        f"{m.label}={v}" for m in target.model_labels for values in m.values.values() for v in values
    }
    return sorted(keys), sorted(pairs - own_pairs)


def _selects_foreign_nodes(target: CloudMap, maps: tuple[CloudMap, ...]) -> str:
    """CEL: the pod's node selector, or every one of its required node-affinity terms, requires a label
    only another platform's nodes carry (foreign_selectors); every value of an `In` must be one, as
    the scheduler may pick a node with any. Other operators go unread: gpuport translates only what
    `In` (and a node selector's entry) requires, and this check must never refuse what it would let
    through."""
    keys, pairs = foreign_selectors(target, maps)
    listed_keys, listed_pairs = json.dumps(keys), json.dumps(pairs)
    selector = "object.spec.nodeSelector"
    in_selector = (
        f"(has({selector}) && {selector}.exists(k, k in {listed_keys} || "
        f"(k + '=' + {selector}[k]) in {listed_pairs}))"
    )
    required = "object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    expression = (
        f"e.operator == 'In' && has(e.values) && size(e.values) > 0 && "
        f"(e.key in {listed_keys} || e.values.all(v, (e.key + '=' + v) in {listed_pairs}))"
    )
    in_terms = (
        f"(has(object.spec.affinity) && has(object.spec.affinity.nodeAffinity) && has({required}) && "
        f"size({required}.nodeSelectorTerms) > 0 && {required}.nodeSelectorTerms.all(t, "
        f"has(t.matchExpressions) && t.matchExpressions.exists(e, {expression})))"
    )
    return f"{in_selector} || {in_terms}"


def _own_labels(target: CloudMap) -> str:
    """This cluster's GPU node labels, for a refusal to name."""
    keys = sorted(target.selector_keys())
    if not keys:
        return "none: this cluster selects GPUs by resource or claim alone"
    return ", ".join(keys)


def policy_objects(
    target: CloudMap, maps: tuple[CloudMap, ...], namespace_selector: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The policy and its binding. `namespace_selector` is the one gpuport's own webhooks use, so the
    policy can never hold where the webhooks would not."""
    names = foreign_names(target, maps)
    listed = json.dumps(names)

    def clean(containers: str) -> str:
        # Read through dyn, as _asks_a_gpu says: the type checker knows no `limits` or `requests`.
        resources = "dyn(c.resources)"
        return (
            f"{containers}.all(c, !has(c.resources) || ("
            f"(!has({resources}.limits) || {resources}.limits.all(k, !(k in {listed}))) && "
            f"(!has({resources}.requests) || {resources}.requests.all(k, !(k in {listed})))))"
        )

    expression = (
        f"{clean('object.spec.containers')} && "
        f"(!has(object.spec.initContainers) || {clean('object.spec.initContainers')})"
    )
    # Only a pod asking for this cluster's GPUs by resource: gpuport translates no other (a pod asking
    # for nothing is native to it; one asking by DRA claim keeps its node selector on a DRA cluster),
    # and a foreign resource name is the first check's.
    asks = " || ".join(
        f"(has(object.spec.{kind}) && object.spec.{kind}.exists(c, {_asks_a_gpu(target, 'c', claims=False)}))"
        for kind in ("containers", "initContainers")
    )
    placed = f"!({asks}) || !({_selects_foreign_nodes(target, maps)})"
    offered = ", ".join(sorted(n for n in target.resource_names() if target.is_accelerator(n)))
    if target.dra is not None:
        offered = ", ".join(["DRA claims", *sorted(target.dra.extended_resources)])
    policy = _policy(
        POLICY_NAME,
        [_POD_CREATE],
        [
            {
                "expression": expression,
                "message": (
                    f"gpuport's safety net for this cluster ({target.name}): this pod asks for a GPU "
                    "resource written for another platform, which no node here offers (it would wait "
                    "forever). gpuport translates such pods but is not answering now: retry shortly, "
                    f"or ask for this cluster's GPUs ({offered})."
                ),
                "reason": "Invalid",
            },
            {
                "expression": placed,
                "message": (
                    f"gpuport's safety net for this cluster ({target.name}): this GPU pod's "
                    "node selector or required node affinity names another platform's GPU or "
                    "instance-type labels, which no node here carries (it would wait forever, and a "
                    "pod's node selector cannot be changed later). gpuport translates such pods but "
                    "is not answering now: retry shortly, or write the pod for this cluster's GPU labels "
                    f"({_own_labels(target)})."
                ),
                "reason": "Invalid",
            },
        ],
    )
    return [policy, _binding(POLICY_NAME, namespace_selector)]


ENV_POLICY_NAME = "gpuport-gpu-env"

# The environment variables a container runtime's GPU hook reads to give a container devices whatever
# its resources say, as each project's source and documentation had them when this was written:
# - NVIDIA Container Toolkit: NVIDIA_VISIBLE_DEVICES, GPU indices or UUIDs or `all`; `none` mounts the
#   driver's libraries but no GPU; `void`, empty or unset leave the container as plain runc would. It is
#   read for unprivileged containers unless the node's config.toml sets
#   accept-nvidia-visible-devices-envvar-when-unprivileged = false (the device plugin's default `envvar`
#   device-list strategy needs it read).
# - AMD Container Toolkit (ROCm/container-toolkit, internal/oci/oci.go and gpu-tracker): AMD_VISIBLE_DEVICES
#   and every variable named DOCKER_RESOURCE_*, read as `all` (in any of three cases) or a list of
#   indices, ranges and unique ids; a word that is none of these (`none`, `void`, empty) names no GPU.
#   There is no privilege check at all.
# - Intel Gaudi (HabanaAI/habana-container-runtime): any variable whose name merely starts with
#   HABANA_VISIBLE_DEVICES (the runtime compares prefixes), `all` or indices, and, in Habana's
#   documentation, HABANA_VISIBLE_MODULES (module ids); `none` gives nothing. Its legacy hook reads empty
#   and `void` as unset, which it takes as all devices: a node default that no pod check changes, and
#   writing them is no more than leaving the variable out.
# - Intel's GPU plugin (i915, xe) hands the device nodes over in its allocation; no runtime hook that
#   reads a variable for them was found.
GRANTING_VARIABLES = ("NVIDIA_VISIBLE_DEVICES", "AMD_VISIBLE_DEVICES", "HABANA_VISIBLE_MODULES")
GRANTING_PREFIXES = ("HABANA_VISIBLE_DEVICES", "DOCKER_RESOURCE_")
GRANTS_NOTHING = ("", "void", "none")


def _granting_entry(entry: str) -> str:
    """CEL: the env entry `entry` names a variable some GPU hook reads, with a value that may grant a
    device (a value read from elsewhere, `valueFrom`, cannot be seen here, so it counts as one)."""
    named = " || ".join(
        [
            f"{entry}.name in {json.dumps(list(GRANTING_VARIABLES))}",
            *(f"{entry}.name.startsWith({json.dumps(p)})" for p in GRANTING_PREFIXES),
        ]
    )
    return (
        f"({named}) && (has({entry}.valueFrom) || "
        f"(has({entry}.value) && !({entry}.value in {json.dumps(list(GRANTS_NOTHING))})))"
    )


def _asks_a_gpu(target: CloudMap, container: str, claims: bool = True) -> str:
    """CEL: the container asks this cluster for GPUs in the words gpuport counts in a budget: more than
    zero of a GPU resource (MIG names of the mixed form included), or, on a DRA cluster and unless
    `claims` is off, a claim."""
    names = sorted(n for n in target.resource_names() if target.is_accelerator(n))
    if target.dra is not None:
        names = sorted({*names, *target.dra.extended_resources})
    is_gpu = [f"k in {json.dumps(names)}"]
    if target.mig.form in ("mixed", "by-memory") and target.mig.resource_prefix:
        is_gpu.append(f"k.startsWith({json.dumps(target.mig.resource_prefix)})")
    named = " || ".join(is_gpu)
    # The API server's type checker has no type for a map of quantities and drops `limits` and
    # `requests` from its Container (every use of them warns, and nothing after is checked): they are
    # read through dyn. Kubernetes' quantity library: `nvidia.com/gpu: 0` asks for nothing, however
    # it is written.
    resources = f"dyn({container}.resources)"
    asked = [
        f"(has({resources}.{kind}) && {resources}.{kind}.exists(k, ({named}) && "
        f"quantity(string({resources}.{kind}[k])).isGreaterThan(quantity('0'))))"
        for kind in ("limits", "requests")
    ]
    if target.dra is not None and claims:
        asked.append(f"(has({container}.resources.claims) && size({container}.resources.claims) > 0)")
    return f"(has({container}.resources) && ({' || '.join(asked)}))"


def _kai_shared_container(maps: tuple[CloudMap, ...], container: str) -> str:
    """CEL: `container` is the one a scheduler that shares GPUs by annotation (KAI) gives the pod's share
    to, which its own webhook writes NVIDIA_VISIBLE_DEVICES into from a ConfigMap (valueFrom): the pod
    is that scheduler's and asks a share, and the container is the one a per-container key or the
    container annotation names, else the first app container (read as annotation_share.py reads it)."""
    found = []
    for cloud_map in maps:
        form = cloud_map.shared
        if not form.annotation_names() or not cloud_map.scheduler_name:
            continue
        annotations = "object.metadata.annotations"
        asked = [
            f"{json.dumps(k)} in {annotations}"
            for k in (form.fraction_annotation, form.memory_annotation)
            if k
        ]
        first = f"{container}.name == object.spec.containers[0].name"
        if form.container_annotation:
            key = json.dumps(form.container_annotation)
            first = f"({key} in {annotations} ? {annotations}[{key}] == {container}.name : {first})"
        given = [f"(({' || '.join(asked)}) && {first})"] if asked else []
        if form.container_memory_prefix:
            prefix = json.dumps(form.container_memory_prefix)
            given += [
                f"({prefix} + {container}.name + {json.dumps(suffix)}) in {annotations}"
                for suffix in (".gpu-memory.request", ".gpu-memory.limit")
            ]
        if given:
            found.append(
                f"(has(object.spec.schedulerName) && object.spec.schedulerName == "
                f"{json.dumps(cloud_map.scheduler_name)} && has({annotations}) && ({' || '.join(given)}))"
            )
    return " || ".join(dict.fromkeys(found)) or "false"


def _written_by_the_layer(maps: tuple[CloudMap, ...], entry: str, container: str) -> str:
    """CEL: the env entry is the one KAI's webhook writes on the container it gives the share to:
    NVIDIA_VISIBLE_DEVICES from its ConfigMap (pkg/binder/common/gpu_access.go, AddGPUSharingEnvVars)."""
    return (
        f"{entry}.name == 'NVIDIA_VISIBLE_DEVICES' && has({entry}.valueFrom) && "
        f"has({entry}.valueFrom.configMapKeyRef) && ({_kai_shared_container(maps, container)})"
    )


def env_policy_objects(
    target: CloudMap, maps: tuple[CloudMap, ...], namespace_selector: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The policy that refuses GPUs asked by environment variable, and its binding, which holds only in
    `namespace_selector` (the namespaces with a GPU budget, as the fail-closed webhook's).

    The webhooks are called only for pods that ask for an extended resource, a share or a claim, so a
    container that sets NVIDIA_VISIBLE_DEVICES=all and asks for nothing never reaches gpuport; on a
    node whose runtime honours the variable it gets every GPU, and no budget counts them. The API
    server checks it here instead, costing no pod a webhook call. Asking a GPU changes nothing (issue
    45): the device plugin writes the variable itself, in its allocation, and where the runtime keeps
    the pod's value after it a 1/7 slice would see every GPU of the node. So in these namespaces every
    value that may grant a device is refused in every container, whatever the pod asks, but one: the
    NVIDIA_VISIBLE_DEVICES KAI's webhook writes from its ConfigMap into the container it gives a share."""
    kept = _written_by_the_layer(maps, "e", "c")
    clean = f"!has(c.env) || c.env.all(e, !({_granting_entry('e')}) || ({kept}))"
    # Each list on its own: the type checker gives every path its own object type, and a list of
    # init containers cannot be joined to a list of containers.
    regular = (
        f"(!has(object.spec.initContainers) || object.spec.initContainers.all(c, {clean})) && "
        f"object.spec.containers.all(c, {clean})"
    )
    ephemeral = (
        "!has(object.spec.ephemeralContainers) || object.spec.ephemeralContainers.all(c, "
        f"!has(c.env) || !c.env.exists(e, {_granting_entry('e')}))"
    )
    variables = ", ".join([*GRANTING_VARIABLES, *(f"{p}*" for p in GRANTING_PREFIXES)])
    resource = f"resources.limits {target.whole_gpu}: 1"
    if target.dra is not None:
        resource = f"a ResourceClaim for a GPU, or {resource}"
    why = (
        "gpuport, for this namespace's GPU budget: a container sets an environment variable that gives it "
        f"GPUs on nodes whose container runtime reads it ({variables}), whatever its resources ask, so "
        "no GPU quota would count what it gets."
    )
    unseen = (
        " Only the device plugin (in its allocation) or KAI's webhook (from its ConfigMap, on the container "
        "given the share) may write it; a value read with valueFrom elsewhere cannot be checked and is "
        "refused too; `none`, `void` or empty give no GPU and pass."
    )
    policy = _policy(
        ENV_POLICY_NAME,
        # Ephemeral containers join a running pod through this subresource, never by create.
        [_POD_CREATE, {**_POD_CREATE, "operations": ["UPDATE"], "resources": ["pods/ephemeralcontainers"]}],
        [
            {
                "expression": regular,
                "message": (
                    f"{why} Ask for the GPUs as a resource instead (e.g. {resource}), "
                    f"and remove the variable.{unseen}"
                ),
                "reason": "Forbidden",
            },
            {
                "expression": ephemeral,
                "message": (
                    f"{why} An ephemeral container cannot ask for a GPU resource: remove the "
                    f"variable.{unseen}"
                ),
                "reason": "Forbidden",
            },
        ],
    )
    return [policy, _binding(ENV_POLICY_NAME, namespace_selector)]


def _binding(name: str, namespace_selector: Mapping[str, Any]) -> dict[str, Any]:
    """A policy's binding, denying, where `namespace_selector` holds (written out with the API server's
    defaults, as the policies are, so server-side apply finds nothing to complete)."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {
                "matchPolicy": "Equivalent",
                "namespaceSelector": dict(namespace_selector),
                "objectSelector": {},
            },
        },
    }


_POD_CREATE: dict[str, Any] = {
    "apiGroups": [""],
    "apiVersions": ["v1"],
    "operations": ["CREATE"],
    "resources": ["pods"],
    "scope": "*",
}


def _policy(name: str, rules: list[dict[str, Any]], validations: list[dict[str, Any]]) -> dict[str, Any]:
    """A failing-closed policy over `rules`. Written out with the API server's defaults: these structs
    are atomic for server-side apply, so a value the server would complete conflicts with a
    client-side apply made before it."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "matchPolicy": "Equivalent",
                "namespaceSelector": {},
                "objectSelector": {},
                "resourceRules": [dict(rule) for rule in rules],
            },
            "validations": validations,
        },
    }
