"""`gpuport translate` on a GB200 job written beside its ComputeDomain (tests/manifests/claims/, sources
in its README): the driver makes the IMEX channel's template only once the ComputeDomain exists, so the
file names a template it does not hold; gpuport reads it as the driver will make it (no GPU), translates
the GPU asks only and keeps the channel claim as written, saying so."""

from pathlib import Path

import pytest
import yaml

from webhook.commands.cli import main

JOB = Path(__file__).parents[1] / "manifests" / "claims" / "gb200-imex-compute-domain.yaml"
CHANNEL = {"name": "imex-channel-0", "resourceClaimTemplateName": "imex-channel-0"}


def translate(capsys, target):
    code = main(["translate", "--to", target, str(JOB)])
    out, err = capsys.readouterr()
    return code, [d for d in yaml.safe_load_all(out) if d], err


@pytest.mark.parametrize("target", ["gke", "oke", "eks", "aks", "dra-nvidia"])
def test_the_gpu_ask_is_translated_and_the_imex_channel_claim_kept(capsys, target):
    code, docs, err = translate(capsys, target)
    assert code == 0, err
    compute_domain, job = docs[:2]
    assert compute_domain["kind"] == "ComputeDomain"  # another kind, printed as written
    spec = job["spec"]["template"]["spec"]
    assert CHANNEL in spec["resourceClaims"]
    assert {"name": "imex-channel-0"} in spec["containers"][0]["resources"]["claims"]
    assert "nvidia.com/gpu.product" not in spec.get("nodeSelector", {})  # the GPU ask was translated
    assert "claim imex-channel-0 (ResourceClaimTemplate imex-channel-0) kept as written" in err


@pytest.mark.parametrize("target", ["ack", "cce"])
def test_where_no_gb200_is_sold_the_refusal_is_about_the_gpus_not_the_channel(capsys, target):
    code, _, err = translate(capsys, target)
    assert code == 1
    assert "asks for GB200" in err
    assert "could not be read" not in err and "imex-channel-0" not in err.split("denied")[1]


@pytest.mark.parametrize("target", ["eks", "generic"])
def test_a_job_given_without_its_compute_domain_is_refused_saying_which_file_to_pass(
    capsys, tmp_path, target
):
    # The same job in a file of its own: gpuport cannot tell what the channel's template asks for. The
    # webhook's words ("create it before the pod, or retry") told someone translating files nothing.
    alone = tmp_path / "job.yaml"
    alone.write_text(
        yaml.safe_dump(next(d for d in yaml.safe_load_all(JOB.read_text()) if d["kind"] != "ComputeDomain"))
    )
    code = main(["translate", "--to", target, str(alone)])
    _, err = capsys.readouterr()
    assert code == 1
    assert (
        "claim imex-channel-0 (ResourceClaimTemplate imex-channel-0): it is not in the files given: pass the "
        "file that defines it (or the ComputeDomain whose channel makes it)"
    ) in err
    assert "create it before the pod" not in err
