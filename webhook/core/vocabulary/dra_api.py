"""The resource.k8s.io API (Dynamic Resource Allocation) as gpuport writes and reads it.

The one place that knows how its versions differ: v1beta1 (Kubernetes 1.32) puts a request's device
class, count and selectors on the request and a device's attributes under `basic`; v1beta2 (1.33) and
v1 (1.34, where v1beta1 is off by default) nest the request's under `exactly` and keep attributes on the
device. Readers take every version; writers are told which one the cluster serves.
"""

from collections.abc import Mapping
from typing import Any, Literal, get_args

GROUP = "resource.k8s.io"
Version = Literal["resource.k8s.io/v1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1beta1"]
VERSIONS: tuple[Version, ...] = get_args(Version)  # newest first
NEWEST: Version = VERSIONS[0]
AUTO = "auto"  # what a map writes for "the newest version the API server serves"
MapVersion = Literal["auto"] | Version


def is_dra_api(api_version: str) -> bool:
    return api_version.startswith(GROUP + "/")


def group_and_version(api_version: str) -> tuple[str, str]:
    """("resource.k8s.io", "v1") of "resource.k8s.io/v1": how the Kubernetes client names a path."""
    group, _, version = api_version.partition("/")
    return group, version


def newest_of(served: set[str]) -> Version | None:
    """The newest version gpuport writes among those an API server serves; None if it serves none."""
    return next((v for v in VERSIONS if v in served), None)


def nests_requests(api_version: str) -> bool:
    return api_version != "resource.k8s.io/v1beta1"


def request_entry(api_version: str, name: str, devices: Mapping[str, Any]) -> dict[str, Any]:
    """A claim's request, written as `api_version` reads it."""
    if nests_requests(api_version):
        return {"name": name, "exactly": dict(devices)}
    return {"name": name, **devices}


def requested_devices(request: Mapping[str, Any]) -> Any:
    """What an exact request asks for, whichever version wrote it (a v1beta1 request has no `exactly`)."""
    return request.get("exactly", request)


def device_attributes(device: Mapping[str, Any]) -> Mapping[str, Any]:
    """A published device's attributes, whichever version its ResourceSlice was read in."""
    basic = device.get("basic")
    holder = basic if isinstance(basic, Mapping) else device
    found = holder.get("attributes")
    return found if isinstance(found, Mapping) else {}
