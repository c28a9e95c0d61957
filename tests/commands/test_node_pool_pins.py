"""A workload pinned to a node pool by a label only its platform's nodes carry (ACK, CCE, TKE), moved to
every other shipped map: kept, the pin matched no node there and the pods stayed Pending without a word
(tests/manifests/nodepools/README.md names each shape)."""

from pathlib import Path

import pytest
import yaml

from tests.commands.translating import translate, warnings
from webhook.config.cloudmap import default_directory

POOLS = Path(__file__).parents[1] / "manifests" / "nodepools"
MAPS = sorted(p.stem for p in default_directory().glob("*.yaml") if p.stem != "gpus")
# (manifest, the map it was written for, its node-pool label)
PINNED = [
    ("ack-a10-nodepool.yaml", "ack", "alibabacloud.com/nodepool-id"),
    ("cce-t4-nodepool.yaml", "cce", "cce.cloud.com/cce-nodepool"),
    ("tke-nodepool.yaml", "tke", "tke.cloud.tencent.com/nodepool-id"),
]


def _pod_spec(out):
    doc = next(d for d in yaml.safe_load_all(out) if d)
    return doc["spec"] if doc["kind"] == "Pod" else doc["spec"]["template"]["spec"]


# Maps selling no GPU that holds the pod's ask (AMD only; CCE has no 24 GB inference GPU for an A10).
REFUSED = {
    *((name, amd) for name, _, _ in PINNED for amd in ("amd", "dra-amd")),
    ("ack-a10-nodepool.yaml", "cce"),
}
MOVED = [(name, label, target) for name, home, label in PINNED for target in MAPS if target != home]


@pytest.mark.parametrize(("name", "label", "target"), MOVED)
def test_a_node_pool_pin_moved_elsewhere_is_removed_and_said(capsys, tmp_path, name, label, target):
    code, out, err = translate(capsys, tmp_path, (POOLS / name).read_text(), target)
    if (name, target) in REFUSED:  # refused for its GPUs, in words: the pin is never reached
        assert code == 1 and "denied" in err
        return
    assert code == 0, err
    assert label not in _pod_spec(out).get("nodeSelector", {})
    assert f"node selector {label} removed: a label no {target} node carries" in warnings(err)


@pytest.mark.parametrize(("name", "home", "label"), PINNED)
def test_a_node_pool_pin_stays_on_its_own_map(capsys, tmp_path, name, home, label):
    text = (POOLS / name).read_text()
    code, out, err = translate(capsys, tmp_path, text, home)
    assert code == 0, err
    assert _pod_spec(out)["nodeSelector"][label] == _pod_spec(text)["nodeSelector"][label]
