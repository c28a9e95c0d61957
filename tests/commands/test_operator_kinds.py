"""`gpuport translate` on the kinds operators make pods from, to every shipped map they concern: each
fragment rewritten as the webhook rewrites the pods made from it, or the document refused when the target
cannot serve it (manifests in tests/manifests/operators/, written in the shapes the operators publish)."""

from pathlib import Path

import pytest

from tests.commands.translating import translate
from webhook.config.cloudmap import default_directory, load_directory

OPERATORS = Path(__file__).parents[1] / "manifests" / "operators"
LOADED = load_directory(default_directory())
SHIPPED = sorted(LOADED.maps)
VENDOR = {name: m.vendor for name, m in LOADED.maps.items()}


def manifest(name):
    return (OPERATORS / name).read_text()


def denials(err):
    return [line.partition(": denied: ")[2] for line in err.splitlines() if ": denied: " in line]


# Spark: the operator's gpu field is its own; what gpuport can say offline is whether the target has the
# NVIDIA GPUs RAPIDS runs on.


@pytest.mark.parametrize("target", SHIPPED)
def test_a_rapids_spark_application_is_refused_where_there_are_no_nvidia_gpus(capsys, tmp_path, target):
    text = manifest("spark-rapids-eks.yaml")
    code, out, err = translate(capsys, tmp_path, text, target)
    assert out == text  # never rewritten: the operator's gpu field is left to the webhook
    if VENDOR[target] == "nvidia":
        assert code == 0 and not denials(err)
    else:
        assert code == 1
        assert denials(err) == [
            "the RAPIDS Accelerator (sparkConf spark.plugins, sparkConf spark.rapids.sql.concurrentGpuTasks) "
            f"runs on NVIDIA GPUs only (CUDA); {target} has AMD GPUs"
        ]


def test_a_spark_application_asking_nvidia_gpus_without_rapids_is_refused_on_amd_by_its_gpu_field(
    capsys, tmp_path
):
    text = manifest("spark-rapids-eks.yaml")
    plain = "\n".join(
        line for line in text.splitlines() if "spark.plugins" not in line and "rapids.sql" not in line
    )
    code, _, err = translate(capsys, tmp_path, plain + "\n", "amd")
    assert code == 1
    assert denials(err) == ["it asks for NVIDIA GPUs (spec.executor.gpu nvidia.com/gpu); amd has AMD GPUs"]


def test_a_scheduled_spark_application_is_judged_by_its_template(capsys, tmp_path):
    app = manifest("spark-rapids-eks.yaml").split("spec:\n", 1)[1]
    scheduled = (
        "apiVersion: sparkoperator.k8s.io/v1beta2\nkind: ScheduledSparkApplication\n"
        'metadata:\n  name: nightly\nspec:\n  schedule: "@daily"\n  template:\n'
        + "".join(f"  {line}\n" for line in app.splitlines())
    )
    code, _, err = translate(capsys, tmp_path, scheduled, "amd")
    assert code == 1 and "the RAPIDS Accelerator" in denials(err)[0]
