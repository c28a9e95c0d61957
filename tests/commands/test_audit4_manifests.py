"""The fourth audit's manifests (tests/manifests/audit4/README.md names each published shape) moved to
every shipped map, each output read for what the workload meant: does it schedule there on the
hardware meant, and is anything lost without a word? Swept with the earlier audits' in
test_audit_manifests.py."""

from pathlib import Path

import pytest

from tests.commands.translating import translate

AUDIT = Path(__file__).parents[1] / "manifests" / "audit4"


@pytest.mark.parametrize("target", ["generic", "oke"])
# Said on GKE, EKS and AKS: test_audit_manifests.py, with the GPU Operator's class.
def test_a_runtime_class_is_not_said_where_the_platform_makes_it_or_the_map_does_not_say(
    capsys, tmp_path, target
):
    # Neither map lists the RuntimeClasses its platform makes (a cluster with the GPU Operator has
    # `nvidia`): nothing is known to say.
    text = (AUDIT / "k3s-nvidia-runtime-class.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, target)
    assert code == 0 and "runtimeClassName" not in err
    assert out == text  # already in generic's words: unchanged
