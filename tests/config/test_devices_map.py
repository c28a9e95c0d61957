"""A map's devices beside the GPUs and its capacity labels, read from YAML (webhook/config/cloudmap.py)."""

import pytest

from webhook.config.cloudmap import CloudMapError, default_directory, load_directory, parse_cloud_map
from webhook.core.vocabulary.platform import CloudDevice

LAB = """name: lab
resources: {whole: nvidia.com/gpu}
node_labels:
  spot: [{key: lab.example/capacity, value: spot}]
  reserved: [{key: lab.example/capacity, value: reserved}]
devices:
  - resource: lab.example/nic
    kind: rdma-network
    what: the lab's RDMA NIC
    same_as: [lab.example/old-nic]
  - resource: lab.example.networks/
    kind: gpudirect-network
    what: a lab network
"""


@pytest.fixture(scope="module")
def catalogue():
    return load_directory(default_directory()).catalogue


def test_devices_and_capacity_labels_become_values(catalogue):
    lab = parse_cloud_map(LAB, "cloudmaps/lab.yaml", catalogue)
    assert lab.devices == (
        CloudDevice("lab.example/nic", "rdma-network", "the lab's RDMA NIC", ("lab.example/old-nic",)),
        CloudDevice("lab.example.networks/", "gpudirect-network", "a lab network"),
    )
    assert lab.device_for("lab.example.networks/fast-0") == lab.devices[1]
    assert lab.device_for("lab.example.networks/") is None  # a prefix names nothing by itself
    assert lab.device_same_as("lab.example/old-nic") == lab.devices[0]
    assert lab.node_labels.capacity_labels() == (
        ("spot", "lab.example/capacity", "spot"),
        ("reserved", "lab.example/capacity", "reserved"),
    )


def test_a_map_without_a_devices_section_does_not_say_and_an_empty_one_says_none(catalogue):
    assert parse_cloud_map(LAB.split("devices:")[0], "cloudmaps/lab.yaml", catalogue).devices is None
    assert parse_cloud_map(LAB.split("devices:")[0] + "devices: []\n", "x.yaml", catalogue).devices == ()


def test_a_device_of_an_unknown_kind_is_reported_at_its_line(catalogue):
    with pytest.raises(CloudMapError) as info:
        parse_cloud_map(LAB.replace("kind: rdma-network", "kind: nic"), "cloudmaps/lab.yaml", catalogue)
    assert str(info.value).startswith("cloudmaps/lab.yaml:8: devices.0.kind: 'nic' is not one of")
