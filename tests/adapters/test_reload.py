"""Cloud maps reload on change; a broken edit leaves the last good maps serving and says where it broke."""

import json
import shutil
import time
from pathlib import Path

import pytest

from tests.helpers import VerifyingHTTPSConnection, context, fixture, post
from tests.server_process import SERVICE_NAME, RunningServer, make_certs
from webhook.adapters.http import metrics
from webhook.adapters.http.reload import CloudMapReloader
from webhook.adapters.http.server import ServerState
from webhook.config.cloudmap import default_directory, directory_signature

POLICY = "\npolicy:\n  fractional: shared\n"


def copy_maps(tmp_path: Path) -> Path:
    maps = tmp_path / "maps"
    shutil.copytree(default_directory(), maps)
    return maps


def reload_count(result):
    return metrics.CLOUDMAP_RELOADS.labels(result)._value.get()


def test_a_good_edit_is_swapped_in(tmp_path):
    maps = copy_maps(tmp_path)
    state = ServerState(context=context(), maps_signature=(directory_signature(maps), 0))
    reloader = CloudMapReloader(state, maps, "generic")
    assert reloader.check_once() is False  # nothing changed yet
    before = reload_count("ok")
    (maps / "generic.yaml").write_text((maps / "generic.yaml").read_text() + POLICY)
    assert reloader.check_once() is True
    assert state.context.target.fractional_policy == "shared"
    assert reload_count("ok") == before + 1


def test_a_context_that_cannot_be_built_keeps_the_last_good_one_and_says_why(tmp_path, monkeypatch):
    # Whatever breaks the rebuild (a defect, not an edit), the webhook keeps deciding with what it had.
    from webhook.adapters.http import reload

    maps = copy_maps(tmp_path)
    state = ServerState(context=context(), maps_signature=(directory_signature(maps), 0))
    good = state.context

    def broken(*args, **kwargs):
        raise TypeError("'<' not supported between instances of 'str' and 'int'")

    monkeypatch.setattr(reload, "build_context", broken)
    (maps / "generic.yaml").write_text((maps / "generic.yaml").read_text() + "\n")
    assert CloudMapReloader(state, maps, "generic").check_once() is False
    assert state.context is good
    assert (
        state.reload_error
        == "context not rebuilt: TypeError: '<' not supported between instances of 'str' and 'int'"
    )


def test_a_broken_edit_keeps_the_last_good_maps_and_names_file_and_line(tmp_path, caplog):
    maps = copy_maps(tmp_path)
    state = ServerState(context=context(), maps_signature=(directory_signature(maps), 0))
    good = state.context
    reloader = CloudMapReloader(state, maps, "generic")
    before = reload_count("error")
    path = maps / "generic.yaml"
    lines = path.read_text().splitlines(keepends=True)
    line = next(n for n, text in enumerate(lines, 1) if text.strip() == "whole: nvidia.com/gpu")
    path.write_text(path.read_text().replace("whole: nvidia.com/gpu", "whole: nvidia gpu"))
    assert reloader.check_once() is False
    assert state.context is good
    assert reload_count("error") == before + 1
    assert f"{path}:{line}: resources.whole" in state.reload_error
    assert f"{path}:{line}: resources.whole" in caplog.text
    assert state.readiness() == (True, f"ok; cloud maps not reloaded: {state.reload_error}")
    # Fixing the file brings it back.
    path.write_text((default_directory() / "generic.yaml").read_text() + POLICY)
    assert reloader.check_once() is True
    assert state.reload_error == ""
    assert state.readiness() == (True, "ok")


def test_removing_the_active_map_is_refused(tmp_path):
    maps = copy_maps(tmp_path)
    state = ServerState(context=context(), maps_signature=(directory_signature(maps), 0))
    reloader = CloudMapReloader(state, maps, "generic")
    (maps / "generic.yaml").unlink()
    assert reloader.check_once() is False
    assert "no cloud map named 'generic'" in state.reload_error
    assert state.context.target.name == "generic"


@pytest.mark.parametrize("workers", [2])
def test_the_running_server_reloads_and_survives_a_broken_edit(tmp_path, workers):
    maps = copy_maps(tmp_path)
    make_certs(tmp_path / "tls")
    server = RunningServer(
        tmp_path / "tls",
        workers=workers,
        threads=2,
        cloudmap_dir=maps,
        extra_env={"GPUPORT_RELOAD_INTERVAL": "0.2"},
    )
    half = json.dumps(fixture("pod-create-fractional-gpu-500m-before-validation.json")).encode()

    def allowed():
        conn = VerifyingHTTPSConnection(
            "127.0.0.1", server.port, server_name=SERVICE_NAME, cafile=tmp_path / "tls" / "ca.crt"
        )
        status, body, _ = post(conn, "/mutate", half)
        assert status == 200
        return json.loads(body)["response"]["allowed"]

    def eventually(expected, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            # Several calls, so every worker has answered with its own copy of the maps.
            if all(allowed() == expected for _ in range(6)):
                return True
            time.sleep(0.2)
        return False

    try:
        assert allowed() is False
        path = maps / "generic.yaml"
        path.write_text(path.read_text() + POLICY)
        assert eventually(True)
        time.sleep(1)  # every worker has polled the good version (interval 0.2 s)
        path.write_text("name: generic\nresources: [\n")
        time.sleep(1)
        assert eventually(True)  # still the last good maps
    finally:
        server.stop()
    log = server.log()
    assert f"{path}:3: not valid YAML" in log
    assert "cloud maps reloaded" in log


def test_a_device_class_that_comes_to_stand_for_an_extended_resource_is_followed(tmp_path):
    from webhook.config.loading import ClusterDra

    classes: list = []
    state = ServerState(context=context("dra-nvidia"), maps_signature=())
    state.cluster_dra = lambda: ClusterDra("resource.k8s.io/v1beta1", tuple(classes))
    reloader = CloudMapReloader(state, default_directory(), "dra-nvidia")
    assert reloader.check_once() is True  # first look at the cluster
    assert state.context.target.dra.api_version == "resource.k8s.io/v1beta1"
    assert state.context.target.dra.extended_resources == {}
    assert reloader.check_once() is False
    expression = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
    classes.append(
        {
            "metadata": {"name": "gpu.nvidia.com"},
            "spec": {
                "selectors": [{"cel": {"expression": expression}}],
                "extendedResourceName": "nvidia.com/gpu",
            },
        }
    )
    assert reloader.check_once() is True
    assert state.context.target.dra.extended_resources == {"nvidia.com/gpu": ("whole", "")}
