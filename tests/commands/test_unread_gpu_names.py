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


@pytest.mark.parametrize("target", ["aks", "generic"])
def test_a_name_no_map_reads_beside_a_translated_gpu_ask_is_said_once(capsys, tmp_path, target):
    # Beside a GKE GPU ask being moved, the device step said it again ("is in no cloud map, kept as
    # written"): two warnings for one name, within kubectl's few lines.
    pod = tmp_path / "pod.yaml"
    pod.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  nodeSelector:\n"
        "    cloud.google.com/gke-accelerator: nvidia-l4\n  containers:\n  - name: c\n    image: x\n"
        "    resources:\n      limits:\n        nvidia.com/gpu: 1\n        gpu.intel.com/i915: 1\n"
    )
    code = main(["translate", "--to", target, str(pod)])
    _, err = capsys.readouterr()
    assert code == 0, err
    said = [w for w in warnings(err) if "gpu.intel.com/i915" in w]
    assert len(said) == 1 and "a GPU name no cloud map reads" in said[0], said
