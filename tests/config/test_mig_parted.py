"""mig-parted configurations listed in an inventory (the ConfigMap the GPU Operator reads): what a
node's nvidia.com/mig.config means when the name alone does not say it."""

import textwrap

import pytest

from webhook.config.loading import StartupError, load_inventory

NODE = """
apiVersion: v1
kind: List
items:
- kind: Node
  metadata:
    name: p5-a
    labels:
      node.kubernetes.io/instance-type: p5.48xlarge
      nvidia.com/mig.config: gpuport-h100-80gb-0123abcd
  status:
    allocatable: {nvidia.com/gpu: '8'}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: custom-mig-config, namespace: gpu-operator}
  data:
    config.yaml: |
      %s
"""
CONFIG = """version: v1
      mig-configs:
        gpuport-h100-80gb-0123abcd:
          - device-filter: ["0x233010DE"]
            devices: [0, 1]
            mig-enabled: true
            mig-devices: {"3g.40gb": 2}
          - devices: all
            mig-enabled: false"""


def test_the_configurations_in_a_listed_configmap_are_read(tmp_path):
    path = tmp_path / "inventory.yaml"
    path.write_text(textwrap.dedent(NODE % CONFIG), encoding="utf-8")
    inventory = load_inventory(path)
    entries = inventory.mig_configs["gpuport-h100-80gb-0123abcd"]
    assert [e["devices"] for e in entries] == [[0, 1], "all"]


def test_a_configmap_whose_mig_parted_file_is_not_one_is_refused_by_name(tmp_path):
    path = tmp_path / "inventory.yaml"
    path.write_text(textwrap.dedent(NODE % "mig-configs: [not, a, mapping]"), encoding="utf-8")
    with pytest.raises(StartupError, match=r"ConfigMap custom-mig-config, config\.yaml: mig-configs must be"):
        load_inventory(path)
