"""A pod's `runtimeClassName` moved to a platform that makes no RuntimeClass of that name: said.

On a cluster with the NVIDIA GPU Operator, GPU pods often name its RuntimeClass `nvidia` (vLLM's
production-stack chart writes `runtimeClassName: nvidia`). GKE, EKS and AKS give GPU nodes a default
runtime that already runs GPU containers and make no such RuntimeClass; there the API server's
RuntimeClass admission plugin refuses a pod naming one that does not exist ("pod rejected:
RuntimeClass ... not found"). gpuport does not edit the field (an admin may have made the class), and
says so where the target's map lists the RuntimeClasses its platform makes (`runtime_classes`). A map
that lists none says nothing about them: there a class only another platform makes (GKE Sandbox's
`gvisor`, which GKE makes when Sandbox is on) is said as that platform's, since nothing says the target
has it; any other class is not said.
"""

from collections.abc import Mapping
from typing import Any

from webhook.core.vocabulary.dialects import Dialects
from webhook.core.vocabulary.platform import CloudMap

__all__ = ["runtime_class_warning"]


def runtime_class_warning(spec: Mapping[str, Any], target: CloudMap, dialects: Dialects) -> list[str]:
    name = spec.get("runtimeClassName")
    if not isinstance(name, str) or not name:
        return []
    if target.runtime_classes is None:
        makers = [m.name for m in dialects.maps if m.runtime_classes and name in m.runtime_classes]
        if not makers or target.name in makers:
            return []
        return [
            f"gpuport: runtimeClassName {name} kept: the API server refuses the pod unless an admin made it "
            f"({' and '.join(makers)} makes it; the {target.name} map does not say {target.name} does)"
        ]
    if name in target.runtime_classes:
        return []
    # True whether or not an admin made the class: the platform does not, and the API server refuses
    # the pod only where nobody did.
    return [
        f"gpuport: runtimeClassName {name} kept: {target.name} does not make it; the API server refuses "
        f"the pod unless an admin made a RuntimeClass {name}"
    ]
