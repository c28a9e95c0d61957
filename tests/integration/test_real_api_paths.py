"""Paths only a real API server walks: a cluster view's watch whose version has been compacted away
(410 Gone: the view lists again and misses nothing), and `gpuport preflight --kubeconfig` reading a
real cluster's nodes and quotas. This module runs its own API server, with no watch cache and etcd
compacted every second, so an old resourceVersion is really gone."""

import threading
import time

import pytest
import yaml
from kubernetes import client

from tests.integration.conftest import ApiServer, kubeconfig
from webhook.adapters.kube import clusterview


@pytest.fixture(scope="module")
def compacting(tmp_path_factory):
    server = ApiServer(
        tmp_path_factory.mktemp("compacting-apiserver"),
        extra_args=("--watch-cache=false", "--etcd-compaction-interval=1s"),
    )
    yield server
    server.stop()


def gpu_pod(name):
    return {
        "metadata": {"name": name},
        "spec": {
            "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
        },
    }


def test_a_watch_whose_version_was_compacted_lists_again_and_misses_nothing(compacting, monkeypatch):
    core = client.CoreV1Api(compacting.client())
    core.create_namespace({"metadata": {"name": "relist"}})
    core.create_namespaced_service_account("relist", {"metadata": {"name": "default"}})
    core.create_namespaced_pod("relist", gpu_pod("before"))
    # The view's first list is answered, then pods change and etcd compacts past that list's version
    # before the watch starts from it: the watch gets 410 Gone, as after a long disconnection.
    lists = []
    real_listing = clusterview._Listing

    class SlowFirstListing(real_listing):
        def items(self):
            yield from super().items()
            if self.list_fn.__name__ == "list_pod_for_all_namespaces" and not lists:
                lists.append(self.version)
                core.create_namespaced_pod("relist", gpu_pod("during"))
                time.sleep(3)  # two compactions: the listed version is gone

    monkeypatch.setattr(clusterview, "_Listing", SlowFirstListing)
    view = clusterview.ClusterView(core, backoff_max=1.0)
    relisted = threading.Event()
    apply = view.apply

    def noting(name, kind, obj=None, items=()):
        if name == "pods" and kind == "RELIST" and lists:
            relisted.set()
        return apply(name, kind, obj, items)

    view.apply = noting
    view.start()
    try:
        assert view.wait_synced(30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(view.pods_in("relist")) < 2:
            time.sleep(0.2)
        assert sorted(p["metadata"]["name"] for p in view.pods_in("relist")) == ["before", "during"]
        assert relisted.wait(1), "the view never listed again after 410 Gone"
        core.create_namespaced_pod("relist", gpu_pod("after"))  # and it watches on from there
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(view.pods_in("relist")) < 3:
            time.sleep(0.2)
        assert len(view.pods_in("relist")) == 3
    finally:
        view.stop()


def test_preflight_reads_a_real_cluster_s_nodes_and_quotas(compacting, tmp_path, capsys):
    from webhook.commands.cli import main

    core = client.CoreV1Api(compacting.client())
    for name in ("p5-a", "p5-b"):
        core.create_node(
            {
                "metadata": {
                    "name": name,
                    "labels": {
                        "node.kubernetes.io/instance-type": "p5.48xlarge",
                        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                    },
                }
            }
        )
        core.patch_node_status(name, {"status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "192"}}})
        core.patch_node(name, {"spec": {"taints": None}})  # no node lifecycle controller removes not-ready
    core.create_namespace({"metadata": {"name": "ml"}})
    core.create_namespaced_service_account("ml", {"metadata": {"name": "default"}})
    # A pod already running on p5-a holds one of its 8 GPUs: no 8-GPU replica fits there any more.
    held = gpu_pod("running")
    held["spec"]["nodeName"] = "p5-a"
    core.create_namespaced_pod("ml", held)
    core.create_namespaced_resource_quota(
        "ml", {"metadata": {"name": "gpus"}, "spec": {"hard": {"requests.nvidia.com/gpu": "8"}}}
    )
    manifest = tmp_path / "train.yaml"
    manifest.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "train", "namespace": "ml"},
                "spec": {
                    "replicas": 3,
                    "template": {
                        "spec": {
                            "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"},
                            "containers": [
                                {"name": "t", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "8"}}}
                            ],
                        }
                    },
                },
            }
        )
    )
    config = kubeconfig(compacting, tmp_path / "kubeconfig")
    capsys.readouterr()
    code = main(
        [
            "preflight",
            "--from",
            "gke",
            "--to",
            "eks",
            "--kubeconfig",
            str(config),
            "-o",
            "json",
            str(manifest),
        ]
    )
    report = yaml.safe_load(capsys.readouterr().out)
    (workload,) = report["workloads"]
    checks = {c["check"]: c for c in workload["checks"]}
    # Two nodes of 8 H100s, one GPU of p5-a held by the running pod, hold one of the three replicas;
    # the namespace's quota of 8, one of it charged to the running pod, holds none.
    assert workload["placement"] == {"p5-b": 1} and workload["pending"] == 2
    assert checks["capacity"]["compat"] == pytest.approx(1 / 3, abs=0.01)
    assert checks["capacity"]["why"].endswith("the most free on a node it fits is 7")
    assert report["held_by_running_pods"] == {"p5-a": 1.0}
    assert (
        checks["quota"]["why"] == "ml would need 25 GPU-equivalents (1 held by running pods); quota allows 8"
    )
    assert code == 1
