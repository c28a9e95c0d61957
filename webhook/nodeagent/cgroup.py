"""Which pod a host process belongs to, from its /proc/<pid>/cgroup (the kubelet's cgroup path names the
pod UID). NVML reports host PIDs whatever PID namespace asks, so this is only meaningful where the agent
sees the host's PIDs (hostPID: true): in its own namespace a host PID may name another process, or none.

Both cgroup drivers the kubelet knows:
- cgroupfs: ``/kubepods/burstable/pod0c3b2e8a-...-9f1d/<container>``
  (Guaranteed pods: ``/kubepods/pod<uid>``);
- systemd: ``/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0c3b2e8a_..._9f1d.slice/...``
  (the UID's dashes are underscores there; Guaranteed pods: ``kubepods-pod<uid>.slice``).
"""

import re
from collections.abc import Callable
from pathlib import Path

# A pod UID: a UUID, or the 32 hex digits of a static pod's config hash.
_UID = (
    r"[0-9a-fA-F]{8}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{12}|[0-9a-fA-F]{32}"
)
_SYSTEMD = re.compile(rf"kubepods(?:-[a-z]+)?-pod({_UID})\.slice")
# Not anchored at /kubepods: in a private cgroup namespace (the default for containers on cgroup v2)
# a host process's path is relative to the agent's own cgroup, e.g. 0::/../../burstable/pod<uid>/...
_CGROUPFS = re.compile(rf"/pod({_UID})(?:/|$)")


def pod_uid_from_cgroup(text: str) -> str | None:
    """The pod UID in a /proc/<pid>/cgroup text (v1 or v2), or None for a process outside any pod."""
    for line in text.splitlines():
        path = line.split(":", 2)[-1]
        found = _SYSTEMD.search(path) or _CGROUPFS.search(path)
        if found:
            return found.group(1).replace("_", "-").lower()
    return None


def read_proc_cgroup(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:  # the process ended, or /proc is not the host's
        return None


def pod_uid_reader(
    read_cgroup: Callable[[int], str | None] = read_proc_cgroup,
) -> Callable[[int], str | None]:
    """pid → pod UID, reading cgroup text through `read_cgroup` (a parameter, so tests feed the text)."""

    def pod_of(pid: int) -> str | None:
        text = read_cgroup(pid)
        return pod_uid_from_cgroup(text) if text else None

    return pod_of
