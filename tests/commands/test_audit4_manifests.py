"""The fourth audit's manifests (tests/manifests/audit4/README.md names each published shape) moved to
every shipped map, each output read for what the workload meant: does it schedule there on the
hardware meant, and is anything lost without a word? Swept with the earlier audits' in
test_audit_manifests.py."""

from pathlib import Path

import pytest

from tests.commands.test_audit_manifests import _doc
from tests.commands.translating import translate, warnings

AUDIT = Path(__file__).parents[1] / "manifests" / "audit4"


@pytest.mark.parametrize("target", ["gke", "eks", "aks"])
def test_a_pod_already_in_the_target_s_words_is_told_its_runtime_class_is_not_made_there(
    capsys, tmp_path, target
):
    # k3s's GPU sample asks a plain nvidia.com/gpu (nothing to translate anywhere) through the `nvidia`
    # RuntimeClass k3s makes. On GKE, EKS and AKS no such class exists and the API server refuses the
    # pod; the warning was given only to pods gpuport translated, so this one moved in silence.
    text = (AUDIT / "k3s-nvidia-runtime-class.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, target)
    assert code == 0, err
    assert _doc(out)["spec"]["runtimeClassName"] == "nvidia"  # kept: an admin may have made the class
    assert (
        f"runtimeClassName nvidia kept: {target} does not make it; the API server refuses the pod unless "
        "an admin made a RuntimeClass nvidia"
    ) in warnings(err)


@pytest.mark.parametrize("target", ["generic", "oke"])
def test_a_runtime_class_is_not_said_where_the_platform_makes_it_or_the_map_does_not_say(
    capsys, tmp_path, target
):
    # Neither map lists the RuntimeClasses its platform makes (a cluster with the GPU Operator has
    # `nvidia`): nothing is known to say.
    text = (AUDIT / "k3s-nvidia-runtime-class.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, target)
    assert code == 0 and "runtimeClassName" not in err
    assert out == text  # already in generic's words: unchanged
