"""Where pod templates live in the manifests `gpuport translate` accepts (offline, not admission)."""

from collections.abc import Iterator, Mapping
from typing import Any

from webhook.workloads import POD_SPEC_PATHS

# Kinds whose pod templates sit under a map of replica types or a list of jobs.
PYTORCHJOB = ("kubeflow.org", "PyTorchJob")
JOBSET = ("jobset.x-k8s.io", "JobSet")


def group_of(api_version: str) -> str:
    return api_version.rpartition("/")[0] if "/" in api_version else ""


def pod_templates(doc: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """(JSON Pointer of the template, the template: an object with metadata and spec) for each pod
    template in the document; for a Pod, the Pod itself at ""."""
    key = (group_of(str(doc.get("apiVersion", ""))), doc.get("kind"))
    spec = doc.get("spec")
    if not isinstance(spec, Mapping):
        return
    if key == ("", "Pod"):
        yield "", doc
    elif key in POD_SPEC_PATHS:
        path = POD_SPEC_PATHS[key][:-1]  # the template holds the spec
        node: Any = doc
        for part in path:
            node = node.get(part) if isinstance(node, Mapping) else None
        if isinstance(node, Mapping):
            yield "/" + "/".join(path), node
    elif key == PYTORCHJOB:
        for role, replica in (spec.get("pytorchReplicaSpecs") or {}).items():
            if isinstance(replica, Mapping) and isinstance(replica.get("template"), Mapping):
                yield f"/spec/pytorchReplicaSpecs/{role}/template", replica["template"]
    elif key == JOBSET:
        for index, job in enumerate(spec.get("replicatedJobs") or []):
            template = (((job or {}).get("template") or {}).get("spec") or {}).get("template")
            if isinstance(template, Mapping):
                yield f"/spec/replicatedJobs/{index}/template/spec/template", template
