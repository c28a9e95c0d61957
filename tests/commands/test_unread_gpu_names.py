"""GPU names no map reads (Intel's gpu.intel.com/i915, TKEStack's tencent.com/vcuda-*), sent anywhere,
TKE included (its map is qGPU's, tke.cloud.tencent.com/qgpu-*): left as written, since no map can say
them in the target's words, and never in silence: the warning names them and what the target asks
instead. (In a namespace with a GPU budget such a pod is refused: tests/adapters/test_quota_gate.py.)"""

from pathlib import Path

import pytest

from tests.commands.translating import warnings
from webhook.commands.cli import main

UNREAD = Path(__file__).parents[1] / "manifests" / "unread"


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("intel-i915-pod.yaml", "gpu.intel.com/i915: a GPU name no cloud map reads"),
        (
            "tkestack-vcuda-pod.yaml",
            "tencent.com/vcuda-core, tencent.com/vcuda-memory: GPU names no cloud map reads",
        ),
    ],
)
@pytest.mark.parametrize("target", ["tke", "gke", "generic", "hami"])
def test_a_gpu_name_no_map_reads_is_kept_and_said_with_the_target_s_own_words(capsys, name, said, target):
    code = main(["translate", "--to", target, str(UNREAD / name)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out == (UNREAD / name).read_text()  # nothing gpuport could say for it is guessed
    [warning] = [w for w in warnings(err) if said in w]
    assert f"elsewhere the pod stays Pending ({target} asks nvidia.com/gpu for whole GPUs" in warning


def test_on_tke_the_warning_names_its_qgpu_resources(capsys):
    main(["translate", "--to", "tke", str(UNREAD / "tkestack-vcuda-pod.yaml")])
    _, err = capsys.readouterr()
    assert "tke.cloud.tencent.com/qgpu-memory and tke.cloud.tencent.com/qgpu-core for a share" in err
