"""The watch cache's bookkeeping, driven with the events a watch would deliver (no API server)."""

import json
from types import SimpleNamespace

import pytest

from tests.fakenvml import FakeNVML
from tests.helpers import context
from tests.translation_cases import pod
from webhook.adapters.kube.clusterview import ClusterView, compact_pod, keep_node
from webhook.nodeagent.gather import gather


def view():
    core = SimpleNamespace(api_client=SimpleNamespace(sanitize_for_serialization=lambda o: o))
    return ClusterView(core)


def gpu_pod(name, uid, phase="Pending", gpus="1"):
    obj = pod({"nvidia.com/gpu": gpus}, name=name)
    obj["metadata"]["uid"] = uid
    obj["status"] = {"phase": phase}
    return obj


def test_only_gpu_pods_are_kept_and_only_what_quota_needs():
    assert compact_pod(pod({"cpu": "1"})) is None
    kept = compact_pod(
        dict(gpu_pod("a", "u1"), spec={**gpu_pod("a", "u1")["spec"], "volumes": [{"name": "v"}]})
    )
    assert "volumes" not in kept["spec"]
    assert kept["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}


def test_pods_relist_add_modify_delete_and_terminal_ones_do_not_count():
    cache = view()
    cpu_pod = pod({"cpu": "1"}) | {"metadata": {"name": "cpu", "namespace": "team-a", "uid": "u0"}}
    cache.apply("pods", "RELIST", items=[gpu_pod("a", "u1"), cpu_pod])
    assert [p["metadata"]["uid"] for p in cache.pods_in("team-a")] == ["u1"]
    cache.apply("pods", "ADDED", gpu_pod("b", "u2"))
    cache.apply("pods", "MODIFIED", gpu_pod("a", "u1", phase="Succeeded"))
    assert [p["metadata"]["uid"] for p in cache.pods_in("team-a")] == ["u2"]
    cache.apply("pods", "DELETED", gpu_pod("b", "u2"))
    assert cache.pods_in("team-a") == []


def test_quotas_limitranges_and_namespaces():
    cache = view()
    quota = {
        "metadata": {"name": "gpus", "namespace": "team-a"},
        "spec": {"hard": {"requests.nvidia.com/gpu": "8"}, "scopes": ["NotTerminating"]},
    }
    cache.apply("resourcequotas", "RELIST", items=[quota])
    (found,) = cache.quotas_in("team-a")
    assert (found.name, int(found.hard["requests.nvidia.com/gpu"]), found.scopes) == (
        "gpus",
        8,
        ("NotTerminating",),
    )
    cache.apply("resourcequotas", "DELETED", quota)
    assert cache.quotas_in("team-a") == []
    cache.apply(
        "namespaces",
        "ADDED",
        {
            "metadata": {
                "name": "team-a",
                "labels": {"a": "b"},
                "annotations": {"gpuport.io/gpu-limits": "[]"},
            }
        },
    )
    assert cache.namespace("team-a") == {"labels": {"a": "b"}, "annotations": {"gpuport.io/gpu-limits": "[]"}}
    cache.apply(
        "limitranges",
        "ADDED",
        {"metadata": {"name": "lr", "namespace": "team-a"}, "spec": {"limits": []}},
    )
    assert [lr["metadata"]["name"] for lr in cache.limitranges_in("team-a")] == ["lr"]


def test_nodes_become_an_inventory_and_heartbeats_do_not_bump_the_version():
    cache = view()
    record = gather(FakeNVML.load("h100-sxm-8-nvswitch"), context().dialects.catalogue)
    node = {
        "metadata": {
            "name": "n1",
            "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            "annotations": {"gpuport.io/capability": json.dumps(record), "other": "x"},
        },
        "status": {"allocatable": {"nvidia.com/gpu": "8"}, "conditions": [{"type": "Ready"}]},
    }
    cache.apply("nodes", "RELIST", items=[node])
    assert cache.nodes_version == 1
    heartbeat = json.loads(json.dumps(node))
    heartbeat["status"]["conditions"] = [{"type": "Ready", "lastHeartbeatTime": "now"}]
    cache.apply("nodes", "MODIFIED", heartbeat)
    assert cache.nodes_version == 1
    inventory = cache.inventory()
    assert inventory.nodes[0].capability["nvlink_domain_size"] == 8
    assert "other" not in json.dumps(keep_node(node))  # only what decisions read is kept


def test_a_node_whose_agent_record_is_broken_costs_only_that_node_its_record(caplog):
    # Anyone who may patch a Node may write the annotation: one bad record must not blind the
    # webhook to every other node (no placement hints, no present models, no overcommit guard).
    cache = view()
    record = gather(FakeNVML.load("h100-sxm-8-nvswitch"), context().dialects.catalogue)

    def node(name, capability):
        return {
            "metadata": {"name": name, "annotations": {"gpuport.io/capability": capability}},
            "status": {"allocatable": {"nvidia.com/gpu": "8"}},
        }

    broken = {
        "not-json": "{",
        "a-list": "[1, 2]",
        "bad-gpus": json.dumps({"gpus": ["H100"]}),
        # JSON objects whose fields placement reads hold the wrong types (they raised in the rebuild).
        "wrong-count": json.dumps({"gpus": [{"model": "H100-80GB"}], "healthy_gpu_count": "2"}),
        "wrong-model": json.dumps({"gpus": [{"model": ["H100-80GB"]}]}),
        "wrong-topology": json.dumps({"gpus": [], "topology": [[1, 2]]}),
    }
    cache.apply(
        "nodes",
        "RELIST",
        items=[node("good", json.dumps(record)), *(node(n, text) for n, text in broken.items())],
    )
    inventory = cache.inventory()
    by_name = {n.name: n for n in inventory.nodes}
    assert set(by_name) == {"good", *broken}
    assert by_name["good"].capability["nvlink_domain_size"] == 8
    assert all(by_name[n].capability == {} for n in broken)
    assert [p.split(":")[0] for p in inventory.problems] == [f"node {n}" for n in broken]
    assert (
        "node a-list: gpuport.io/capability is not a JSON object: that node is read without its record"
        in caplog.text
    )


def test_new_usage_figures_do_not_rebuild_the_view_but_the_full_label_does():
    # Every node reports its figures every few minutes; no decision reads them (the guard reads the
    # label), so only a label or a fact changes what the view holds.
    cache = view()
    record = gather(FakeNVML.load("h100-sxm-8-nvswitch"), context().dialects.catalogue)

    def node(used, full):
        usage = {"devices": [{"index": 0, "memory_used_mib": used}], "shared_memory_full": full}
        return {
            "metadata": {
                "name": "n1",
                "labels": {"gpuport.io/shared-memory-full": str(full).lower()},
                "annotations": {"gpuport.io/capability": json.dumps({**record, "usage": usage})},
            },
            "status": {"allocatable": {"nvidia.com/gpu": "8"}},
        }

    cache.apply("nodes", "RELIST", items=[node(1000, False)])
    version = cache.nodes_version
    cache.apply("nodes", "MODIFIED", node(2000, False))
    assert cache.nodes_version == version
    assert "usage" not in cache.inventory().nodes[0].capability
    cache.apply("nodes", "MODIFIED", node(80000, True))
    assert cache.nodes_version == version + 1


def test_the_reloader_rebuilds_the_context_when_nodes_change(tmp_path):
    import shutil

    from webhook.adapters.http.reload import CloudMapReloader
    from webhook.adapters.http.server import ServerState
    from webhook.config.cloudmap import default_directory, directory_signature

    maps = tmp_path / "maps"
    shutil.copytree(default_directory(), maps)
    cache = view()
    state = ServerState(
        context=context(),
        maps_signature=(directory_signature(maps), 0),
        view=cache,
    )
    reloader = CloudMapReloader(state, maps, "generic")
    assert reloader.check_once() is False
    record = gather(FakeNVML.load("h100-sxm-8-nvswitch"), context().dialects.catalogue)
    cache.apply(
        "nodes",
        "ADDED",
        {
            "metadata": {"name": "n1", "annotations": {"gpuport.io/capability": json.dumps(record)}},
            "status": {"allocatable": {"nvidia.com/gpu": "8"}},
        },
    )
    assert reloader.check_once() is True
    assert state.context.target.offered_models == ("H100-80GB",)
    assert state.context.mutations  # placement hints from the live nodes


class PagedPods:
    """A list_pod_for_all_namespaces that serves pages and then one watch that breaks, like a real API
    server whose connection drops: what the view asks for is recorded."""

    def __init__(self, pods, page_size):
        self.pods, self.page_size = pods, page_size
        self.calls = []

    def __call__(self, **kwargs):
        self.calls.append(kwargs)
        if kwargs.get("watch"):
            raise ConnectionResetError("the stream broke")
        start = int(kwargs.get("_continue") or 0)
        end = start + kwargs["limit"]
        metadata = {"resourceVersion": "42"}
        if end < len(self.pods):
            metadata["continue"] = str(end)
        page = {"items": self.pods[start:end], "metadata": metadata}
        return SimpleNamespace(data=json.dumps(page).encode())


def test_pods_are_listed_in_pages_and_a_broken_watch_resumes_instead_of_listing_again(monkeypatch):
    import threading
    import time

    from webhook.adapters.kube import clusterview

    monkeypatch.setattr(clusterview, "PAGE_SIZE", 2)
    pods = [gpu_pod(f"p{n}", f"u{n}") for n in range(5)]
    list_fn = PagedPods(pods, 2)
    cache = view()
    cache.backoff_max = 0.01
    runner = threading.Thread(target=cache._run, args=("pods", list_fn), daemon=True)
    runner.start()
    deadline = time.monotonic() + 5
    while sum(1 for c in list_fn.calls if c.get("watch")) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    cache.stop()
    runner.join(5)
    lists = [c for c in list_fn.calls if not c.get("watch")]
    watches = [c for c in list_fn.calls if c.get("watch")]
    assert [(c["limit"], c["_continue"]) for c in lists] == [(2, None), (2, "2"), (2, "4")]
    assert len(watches) >= 3 and all(w["resource_version"] == "42" for w in watches)
    assert sorted(p["metadata"]["uid"] for p in cache.pods_in("team-a")) == [f"u{n}" for n in range(5)]
    assert cache.has_synced("pods") and not cache.has_synced("nodes")


def test_a_namespace_s_pod_version_changes_only_with_its_gpu_pods():
    cache = view()
    cache.apply("pods", "RELIST", items=[gpu_pod("a", "u1")])
    before = cache.pods_version("team-a")
    cache.apply("pods", "MODIFIED", gpu_pod("a", "u1"))  # a status heartbeat: nothing kept changed
    other = gpu_pod("b", "u2")
    other["metadata"]["namespace"] = "team-b"
    cache.apply("pods", "ADDED", other)
    assert cache.pods_version("team-a") == before
    cache.apply("pods", "ADDED", gpu_pod("c", "u3"))
    assert cache.pods_version("team-a") != before


def test_a_pod_keeps_the_version_it_was_first_seen_at_through_heartbeats_and_relists():
    cache = view()
    first = gpu_pod("a", "u1")
    first["metadata"]["resourceVersion"] = "100"
    cache.apply("pods", "ADDED", first)
    later = gpu_pod("a", "u1", phase="Running")
    later["metadata"]["resourceVersion"] = "140"
    cache.apply("pods", "MODIFIED", later)  # its phase changed: the record changes, not its first sight
    relisted = gpu_pod("a", "u1", phase="Running")
    relisted["metadata"]["resourceVersion"] = "180"
    version = cache.pods_version("team-a")
    cache.apply("pods", "RELIST", items=[relisted])
    assert cache.pod_first_seen("team-a", "u1") == 100
    assert cache.pods_version("team-a") == version  # nothing it means changed
    cache._note_read_through("pods", "180")
    cache._note_read_through("pods", "150")  # never backwards
    assert cache.pods_read_through() == 180


def test_a_pod_asking_by_dra_claim_is_kept_with_its_claims():
    claimed = pod({"cpu": "1"})
    claimed["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "two-gpus"}]
    claimed["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    kept = compact_pod(claimed)
    assert kept["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "two-gpus"}]
    assert kept["spec"]["containers"][0]["resources"]["claims"] == [{"name": "gpu"}]


def test_a_pod_asking_for_a_resource_a_device_class_stands_for_is_kept_for_quota():
    from webhook.adapters.kube.clusterview import compact_pod

    pod = {
        "metadata": {"name": "p", "namespace": "n", "uid": "u"},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "resources": {"limits": {"deviceclass.resource.kubernetes.io/gpu.nvidia.com": "8"}},
                }
            ]
        },
        "status": {
            "phase": "Pending",
            "resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": "p-gpus-1"}],
        },
    }
    kept = compact_pod(pod)
    assert kept["spec"]["containers"][0]["resources"]["limits"] == {
        "deviceclass.resource.kubernetes.io/gpu.nvidia.com": "8"
    }
    assert kept["status"]["resourceClaimStatuses"] == [{"name": "gpus", "resourceClaimName": "p-gpus-1"}]


def test_a_pod_asking_a_share_by_annotation_alone_is_kept_with_what_its_charge_reads():
    from tests.translation_cases import kai_pod

    obj = kai_pod({"gpu-fraction": "0.5", "kubectl.kubernetes.io/last-applied-configuration": "{...}"})
    obj["metadata"]["uid"] = "u1"
    kept = compact_pod(obj)
    assert kept is not None
    assert kept["metadata"]["annotations"] == {"gpu-fraction": "0.5"}
    assert kept["spec"]["schedulerName"] == "kai-scheduler"


def test_the_views_share_annotations_are_those_the_webhooks_are_called_for():
    from webhook.adapters.kube.clusterview import SHARE_ANNOTATIONS
    from webhook.config.cloudmap import default_directory
    from webhook.config.loading import build_context
    from webhook.config.registration import packaged

    maps = build_context(default_directory(), "generic").dialects.maps
    asked = {a for m in maps for a in (m.shared.fraction_annotation, m.shared.memory_annotation) if a}
    assert asked <= SHARE_ANNOTATIONS
    for name in ("mutating", "validating"):
        for hook in (h for h in packaged(name)["webhooks"] if h["name"].startswith("pods.")):
            condition = " ".join(c["expression"] for c in hook.get("matchConditions") or ())
            assert all(f"'{a}' in object.metadata.annotations" in condition for a in SHARE_ANNOTATIONS)


def _scoped_pods():
    """GPU pods that differ only in what the quota scopes read (pods.go podMatchesScopeFunc)."""
    base = gpu_pod("p", "u", phase="Running")
    variants = {
        "pod-level resources, class unwritten": {"spec": {"resources": {"requests": {"cpu": "1"}}}},
        "class written": {"status": {"phase": "Running", "qosClass": "Burstable"}},
        "deadline": {"spec": {"activeDeadlineSeconds": 60}},
        "priority": {"spec": {"priorityClassName": "high"}},
        "cross-namespace affinity": {
            "spec": {
                "affinity": {
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {"topologyKey": "kubernetes.io/hostname", "namespaceSelector": {}}
                        ]
                    }
                }
            }
        },
    }
    for name, change in variants.items():
        variant = json.loads(json.dumps(base))
        variant["spec"].update(change.get("spec", {}))
        variant["status"].update(change.get("status", {}))
        yield name, variant


@pytest.mark.parametrize(("name", "whole"), list(_scoped_pods()))
def test_the_view_keeps_whatever_the_quota_scopes_read(name, whole):
    """A running pod is matched to scoped quotas from the view's copy: it must read as the pod does."""
    from webhook.core.budget.quota import pod_facts

    assert pod_facts(compact_pod(whole)) == pod_facts(whole)


class RefusedClasses:
    """The custom-objects API of a cluster serving resource.k8s.io whose RBAC gives gpuport no DRA rule."""

    def __init__(self):
        self.asked = 0

    def list_cluster_custom_object(self, *args, **kwargs):
        from kubernetes.client.exceptions import ApiException

        self.asked += 1
        raise ApiException(status=403, reason="Forbidden")


def test_a_refused_dra_watch_is_logged_once_not_on_every_retry_and_reported(caplog):
    import threading
    import time

    custom = RefusedClasses()
    core = SimpleNamespace(api_client=SimpleNamespace(sanitize_for_serialization=lambda o: o))
    cache = ClusterView(core, backoff_max=0.01, dra=(custom, "resource.k8s.io/v1"))
    runner = threading.Thread(
        target=cache._run, args=("deviceclasses", cache._dra_lists["deviceclasses"]), daemon=True
    )
    with caplog.at_level("INFO", logger="gpuport"):
        runner.start()
        deadline = time.monotonic() + 5
        while custom.asked < 6 and time.monotonic() < deadline:
            time.sleep(0.01)
        cache.stop()
        runner.join(5)
    assert custom.asked >= 6  # still looked at again
    said = [r.getMessage() for r in caplog.records if "deviceclasses" in r.getMessage()]
    assert len(said) == 1 and "403 Forbidden" in said[0], said
    assert cache.capabilities.summary() == "list and watch deviceclasses unavailable: 403 Forbidden"
