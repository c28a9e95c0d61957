"""Comparing what gpuport wrote with what the API server holds."""

from collections.abc import Mapping
from typing import Any


def says_all_written(found: Any, written: Any) -> bool:
    """Whether `found` says everything `written` says: the API server fills in defaults, so extra
    fields are fine. Lists compare item by item and must be as long (an entry gpuport no longer
    writes is not kept)."""
    if isinstance(written, Mapping):
        return isinstance(found, Mapping) and all(
            k in found and says_all_written(found[k], v) for k, v in written.items()
        )
    if isinstance(written, list):
        return (
            isinstance(found, list)
            and len(found) == len(written)
            and all(says_all_written(f, w) for f, w in zip(found, written, strict=True))
        )
    return bool(found == written)
