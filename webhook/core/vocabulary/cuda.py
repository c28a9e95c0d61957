"""Which CUDA a container needs and whether a node's driver runs it.

Minimum Linux x86_64 driver per CUDA toolkit release (GA), from NVIDIA's CUDA Toolkit release notes,
"CUDA Toolkit and Corresponding Driver Versions". A driver at or above a row runs that CUDA fully; a
driver of the same major family but below the row runs it only through minor-version compatibility
(no PTX JIT of newer code, some APIs missing), which preflight scores as partial.
"""

import re
from collections.abc import Mapping
from typing import Any

MIN_DRIVER: dict[tuple[int, int], tuple[int, ...]] = {
    (11, 0): (450, 36, 6),
    (11, 1): (455, 23),
    (11, 2): (460, 27, 3),
    (11, 3): (465, 19, 1),
    (11, 4): (470, 42, 1),
    (11, 5): (495, 29, 5),
    (11, 6): (510, 39, 1),
    (11, 7): (515, 43, 4),
    (11, 8): (520, 61, 5),
    (12, 0): (525, 60, 13),
    (12, 1): (530, 30, 2),
    (12, 2): (535, 54, 3),
    (12, 3): (545, 23, 6),
    (12, 4): (550, 54, 14),
    (12, 5): (555, 42, 2),
    (12, 6): (560, 28, 3),
    (12, 8): (570, 26),
    (12, 9): (575, 51, 3),
    (13, 0): (580, 65, 6),
}
# Minor-version compatibility: the oldest driver of each major family.
MIN_FAMILY_DRIVER = {11: (450, 80, 2), 12: (525, 60, 13), 13: (580, 65, 6)}

_IMAGE_CUDA = re.compile(r"cuda[:\-_]?v?(\d+)\.(\d+)", re.IGNORECASE)


def parse_version(text: str) -> tuple[int, ...] | None:
    parts = re.findall(r"\d+", text or "")
    return tuple(int(p) for p in parts) if parts else None


def container_cuda(template: Mapping[str, Any]) -> tuple[tuple[int, int] | None, str]:
    """The CUDA major.minor a pod template needs, and where that came from."""
    annotation = ((template.get("metadata") or {}).get("annotations") or {}).get("gpuport.io/cuda")
    if annotation and (version := parse_version(str(annotation))) and len(version) >= 2:
        return (version[0], version[1]), "annotation gpuport.io/cuda"
    for container in (template.get("spec") or {}).get("containers") or []:
        for env in container.get("env") or []:
            version = parse_version(str(env.get("value"))) if env.get("name") == "CUDA_VERSION" else None
            if version and len(version) >= 2:
                return (version[0], version[1]), f"env CUDA_VERSION of {container.get('name')}"
        match = _IMAGE_CUDA.search(str(container.get("image", "")))
        if match:
            return (int(match[1]), int(match[2])), f"image {container.get('image')}"
    return None, "no CUDA version found (image tag, CUDA_VERSION, gpuport.io/cuda)"


def driver_runs(driver: tuple[int, ...], cuda: tuple[int, int]) -> float:
    """1.0 when the driver supports this CUDA, 0.5 through minor-version compatibility, else 0."""
    needed = MIN_DRIVER.get(cuda)
    if needed is None:
        # A release missing from the table: the next known release of the same major bounds it.
        later = sorted(v for k, v in MIN_DRIVER.items() if k[0] == cuda[0] and k >= cuda)
        needed = later[0] if later else None
    if needed is not None and driver >= needed:
        return 1.0
    family = MIN_FAMILY_DRIVER.get(cuda[0])
    if family is not None and driver >= family and (needed is None or driver < needed):
        return 0.5
    return 0.0


def max_cuda_for(driver: tuple[int, ...]) -> tuple[int, int] | None:
    supported = [cuda for cuda, needed in MIN_DRIVER.items() if driver >= needed]
    return max(supported) if supported else None
