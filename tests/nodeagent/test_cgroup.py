"""A host process's pod, read from its /proc/<pid>/cgroup text, for both kubelet cgroup drivers."""

import pytest

from webhook.nodeagent.cgroup import pod_uid_from_cgroup, pod_uid_reader

UID = "0c3b2e8a-1d4f-4b6a-9e7c-2f1a3b4c5d6e"
SYSTEMD_UID = UID.replace("-", "_")
CID = "4f1c2d3e5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d"


@pytest.mark.parametrize(
    "text",
    [
        # cgroupfs driver, cgroup v1: one line per hierarchy
        f"12:memory:/kubepods/burstable/pod{UID}/{CID}\n11:devices:/kubepods/burstable/pod{UID}/{CID}\n",
        # cgroupfs driver, a Guaranteed pod (no QoS level in the path), cgroup v2
        f"0::/kubepods/pod{UID}/{CID}\n",
        # systemd driver, cgroup v2: the UID's dashes are underscores
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{SYSTEMD_UID}.slice/"
        f"cri-containerd-{CID}.scope\n",
        # cgroupfs driver, read from inside the agent's own cgroup namespace (relative to its cgroup)
        f"0::/../../burstable/pod{UID}/{CID}\n",
        # systemd driver, a Guaranteed pod, CRI-O
        f"0::/kubepods.slice/kubepods-pod{SYSTEMD_UID}.slice/crio-{CID}.scope\n",
        # systemd driver, cgroup v1, the pod's path on the name=systemd line only
        f"5:cpuset:/\n1:name=systemd:/kubepods.slice/kubepods-besteffort.slice/"
        f"kubepods-besteffort-pod{SYSTEMD_UID}.slice/docker-{CID}.scope\n",
    ],
)
def test_the_pod_uid_is_read_from_both_cgroup_drivers_paths(text):
    assert pod_uid_from_cgroup(text) == UID


def test_a_static_pod_s_config_hash_uid_is_read_too():
    static = "6f8e0d1c2b3a49586776a5b4c3d2e1f0"
    assert pod_uid_from_cgroup(f"0::/kubepods/besteffort/pod{static}/{CID}\n") == static


@pytest.mark.parametrize(
    "text",
    [
        "0::/system.slice/containerd.service\n",  # a host daemon
        "0::/\n",
        "12:memory:/user.slice/user-1000.slice/session-3.scope\n",
        "0::/kubepods.slice/kubepods-burstable.slice\n",  # the QoS level itself, no pod
        "0::/kubepods/burstable/podnot-a-uid/abc\n",
    ],
)
def test_a_process_outside_any_pod_has_no_pod_uid(text):
    assert pod_uid_from_cgroup(text) is None


def test_the_reader_is_a_parameter_and_a_vanished_process_has_no_pod():
    texts = {42: f"0::/kubepods/pod{UID}/{CID}\n"}
    pod_of = pod_uid_reader(texts.get)
    assert pod_of(42) == UID
    assert pod_of(43) is None  # no /proc/43: the process ended, or the agent does not see host PIDs


def test_the_real_proc_is_read_and_a_process_that_is_gone_has_no_cgroup():
    import os

    from webhook.nodeagent.cgroup import read_proc_cgroup

    own = read_proc_cgroup(os.getpid())
    assert own is not None and ":" in own.splitlines()[0]  # hierarchy-id:controllers:path
    assert read_proc_cgroup(2**22 + 1) is None  # above the kernel's pid_max: no such process
