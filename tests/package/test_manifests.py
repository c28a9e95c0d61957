"""The kustomize base, read the way the API server and kubectl would read it."""

import json

import celpy
import pytest
import yaml

from tests.helpers import REPO, all_fixtures, fixture
from webhook.config.cloudmap import default_directory
from webhook.config.cloudmap_configmap import render

MANIFESTS = REPO / "manifests"
EXCLUDED_NAMESPACES = {"kube-system", "kube-node-lease", "gpuport-system"}
ADMITTED_RESOURCES = {"pods", "deployments", "statefulsets", "daemonsets", "replicasets", "jobs", "cronjobs"}
# Validated only: a claim made under a name pods already hold (issue 45).
VALIDATED_ONLY = {"resourceclaims"}


def documents():
    docs = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        docs.extend((path.name, d) for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


def one(kind, name=None):
    found = [
        d for _, d in documents() if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def webhooks(budget=("team-a",)):
    """gpuport's webhooks as it registers them (webhook/config/registration.py), with a GPU budget in
    the namespaces named."""
    from webhook.config.registration import Endpoint, webhook_configurations

    return [
        (config["kind"], hook)
        for config in webhook_configurations(Endpoint(), b"", budget)
        for hook in config["webhooks"]
    ]


def test_the_base_holds_no_webhook_and_no_policy_so_installing_refuses_no_pod():
    kinds = {d["kind"] for _, d in documents()}
    assert not kinds & {
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
    env = {
        e["name"]: e.get("value")
        for e in one("Deployment", "gpuport")["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["GPUPORT_REGISTER"] == "true"  # gpuport registers them itself, once ready


def test_kustomization_lists_every_manifest_file():
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    files = {p.name for p in MANIFESTS.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == files
    assert kustomization["namespace"] == "gpuport-system"


def test_every_document_has_kind_apiversion_and_name():
    for filename, doc in documents():
        if filename == "kustomization.yaml":
            continue
        assert doc.get("apiVersion") and doc.get("kind") and doc["metadata"].get("name"), filename


def test_deployment_is_highly_available_and_locked_down():
    deployment = one("Deployment", "gpuport")
    spec = deployment["spec"]
    assert spec["replicas"] >= 2
    pod = spec["template"]["spec"]
    anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["topologyKey"] == "kubernetes.io/hostname"
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "https", "scheme": "HTTPS"}
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["GPUPORT_CLUSTER"] == "in-cluster"
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts[env["GPUPORT_CERT_DIR"]] == "tls"
    assert mounts[env["GPUPORT_CLOUDMAP_DIR"]] == "cloudmaps"
    assert env["PROMETHEUS_MULTIPROC_DIR"].startswith("/tmp/") and mounts["/tmp"] == "tmp"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == "gpuport-tls"
    assert volumes["cloudmaps"]["configMap"]["name"] == "gpuport-cloudmaps"
    pdb = one("PodDisruptionBudget")
    assert pdb["spec"]["selector"] == spec["selector"]
    assert pdb["spec"]["minAvailable"] == 1


def test_service_routes_443_to_the_servers_port():
    service = one("Service", "gpuport")
    assert service["spec"]["ports"] == [{"name": "https", "port": 443, "targetPort": "https"}]
    assert service["spec"]["selector"] == one("Deployment")["spec"]["selector"]["matchLabels"]


@pytest.mark.parametrize("index", range(9))
def test_webhooks_follow_the_good_practices(index):
    kind, hook = webhooks()[index]
    assert hook["admissionReviewVersions"] == ["v1"]
    # The quota webhooks write a reservation on real creates only.
    pods_validate = ("pods.validate.gpuport.io", "pods.check.gpuport.io")
    assert hook["sideEffects"] == ("NoneOnDryRun" if hook["name"] in pods_validate else "None")
    assert hook["timeoutSeconds"] <= 5
    client = hook["clientConfig"]["service"]
    assert (client["name"], client["namespace"], client["port"]) == ("gpuport", "gpuport-system", 443)
    assert client["path"] == ("/mutate" if kind == "MutatingWebhookConfiguration" else "/validate")
    if kind == "MutatingWebhookConfiguration":
        assert hook["reinvocationPolicy"] == "IfNeeded"
    expressions = hook["namespaceSelector"]["matchExpressions"]
    assert {
        "key": "kubernetes.io/metadata.name",
        "operator": "NotIn",
        "values": sorted(EXCLUDED_NAMESPACES),
    } in [{**e, "values": sorted(e["values"])} for e in expressions]
    assert {"key": "gpuport.io/admission", "operator": "NotIn", "values": ["disabled"]} in expressions
    assert "objectSelector" not in hook  # a pod's own labels must not opt it out
    resources = {r for rule in hook["rules"] for r in rule["resources"]}
    if resources <= VALIDATED_ONLY:  # every claim create in a budget namespace is read, and the updates
        # that mark a claim as a pod's (only those: its condition)
        assert kind == "ValidatingWebhookConfiguration"
        assert hook["rules"][0]["operations"] == ["CREATE", "UPDATE"]
        assert [c["name"] for c in hook["matchConditions"]] == [
            "a-create-or-an-update-that-marks-it-as-a-pods"
        ]
        return
    assert resources <= ADMITTED_RESOURCES
    assert hook["matchConditions"]


def test_the_webhooks_cover_pods_and_every_workload_kind_on_both_paths():
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        covered = {
            r for k, hook in webhooks() if k == kind for rule in hook["rules"] for r in rule["resources"]
        }
        validated_only = VALIDATED_ONLY if kind == "ValidatingWebhookConfiguration" else set()
        assert covered == ADMITTED_RESOURCES | validated_only
    pod_rules = [(k, r) for k, h in webhooks() for r in h["rules"] if "pods" in r["resources"]]
    # Pods are rewritten and limited at create; their updates are reviewed for quota only.
    assert all(
        r["operations"] == (["CREATE"] if k == "MutatingWebhookConfiguration" else ["CREATE", "UPDATE"])
        for k, r in pod_rules
    )


def _asks_condition(hook):
    """The condition on what the object asks for (a pod update's own condition is tested apart)."""
    (condition,) = [c for c in hook["matchConditions"] if c["name"] == "asks-for-an-extended-resource"]
    return condition


def _condition(resource):
    for _, hook in webhooks():
        if any(resource in rule["resources"] for rule in hook["rules"]):
            condition = _asks_condition(hook)
            environment = celpy.Environment()
            return environment.program(environment.compile(condition["expression"]))
    raise AssertionError(resource)


def _matches(program, obj):
    return bool(program.evaluate({"object": celpy.json_to_cel(obj)}))


@pytest.mark.parametrize("name", all_fixtures())
def test_match_condition_calls_the_webhook_for_every_captured_gpu_pod(name):
    assert _matches(_condition("pods"), fixture(name)["request"]["object"])


def test_match_condition_skips_pods_without_extended_resources():
    pod = fixture("pod-create-gpu-limit-1.json")["request"]["object"]
    pod["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1", "memory": "1Gi"}}
    assert not _matches(_condition("pods"), pod)
    pod["spec"]["containers"][0]["resources"] = {}
    assert not _matches(_condition("pods"), pod)
    del pod["spec"]["containers"][0]["resources"]
    assert not _matches(_condition("pods"), pod)
    pod["spec"]["initContainers"] = [{"name": "i", "resources": {"requests": {"amd.com/gpu": "1"}}}]
    assert _matches(_condition("pods"), pod)


def test_match_condition_calls_the_webhook_for_a_resource_a_device_class_stands_for():
    # KEP-5004: deviceclass.resource.kubernetes.io/<class> is an extended resource under kubernetes.io,
    # which no other such name gpuport reads is; the scheduler gives it a claim of that class.
    pod = fixture("pod-create-gpu-limit-1.json")["request"]["object"]
    pod["spec"]["containers"][0]["resources"] = {
        "limits": {"deviceclass.resource.kubernetes.io/gpu.nvidia.com": "8"}
    }
    assert _matches(_condition("pods"), pod)
    pod["spec"]["containers"][0]["resources"] = {
        "limits": {"hugepages-2Mi": "1Gi", "example.kubernetes.io/x": "1"}
    }
    assert not _matches(_condition("pods"), pod)


def test_every_pod_webhook_is_called_for_a_gpu_share_asked_by_annotation():
    pod = fixture("pod-create-gpu-limit-1.json")["request"]["object"]
    pod["spec"]["containers"][0]["resources"] = {}
    pod_hooks = [h for _, h in webhooks() if any("pods" in r["resources"] for r in h["rules"])]
    assert len(pod_hooks) == 3  # mutate; validate where a GPU budget is, check elsewhere
    for hook in pod_hooks:
        condition = _asks_condition(hook)
        environment = celpy.Environment()
        program = environment.program(environment.compile(condition["expression"]))
        assert not _matches(program, pod)
        pod["metadata"]["annotations"] = {"gpu-fraction": "0.5"}
        assert _matches(program, pod)
        # KAI's per-container form (issue 45: such pods never reached gpuport, 8 × 80Gi uncharged).
        for suffix in ("request", "limit"):
            pod["metadata"]["annotations"] = {f"nvidia.com/container.main.gpu-memory.{suffix}": "80Gi"}
            assert _matches(program, pod)
        pod["metadata"]["annotations"] = {"nvidia.com/container.main.gpus.devices": "0"}  # KAI's binder's
        assert not _matches(program, pod)
        del pod["metadata"]["annotations"]


def test_match_conditions_find_gpus_in_workload_templates():
    spec = {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "0.5"}}}]}
    cpu_only = {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1"}}}]}
    for template, expected in ((spec, True), (cpu_only, False)):
        deployment = {"spec": {"template": {"spec": template}}}
        cronjob = {"spec": {"jobTemplate": {"spec": {"template": {"spec": template}}}}}
        assert _matches(_condition("deployments"), deployment) is expected
        assert _matches(_condition("cronjobs"), cronjob) is expected


def test_rbac_is_least_privilege():
    for _, doc in documents():
        if doc["kind"] not in ("Role", "ClusterRole"):
            continue
        for rule in doc["rules"]:
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[field], f"{doc['metadata']['name']} uses a wildcard"
            if doc["kind"] == "ClusterRole" and doc["metadata"]["name"] == "gpuport-view":
                # Read-only watches of what quota needs, and a pod read by name (the owner of a claim
                # marked as a pod's, where the watch has not brought it yet); no secrets, no writes.
                assert (rule["apiGroups"], set(rule["resources"]), rule["verbs"]) in (
                    (
                        [""],
                        {"pods", "resourcequotas", "limitranges", "namespaces", "nodes"},
                        ["list", "watch"],
                    ),
                    (["resource.k8s.io"], {"deviceclasses", "resourceslices"}, ["list", "watch"]),
                    ([""], {"pods"}, ["get"]),
                )
            elif doc["kind"] == "Role" and doc["metadata"]["name"] == "gpuport-reservations":
                assert rule == {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "verbs": ["get", "create", "update"],
                }
            elif doc["kind"] == "ClusterRole" and doc["metadata"]["name"] == "gpuport-node-agent":
                # RBAC cannot name "its own node": get and patch on nodes, and nothing more.
                assert rule == {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}
            elif doc["kind"] == "ClusterRole" and doc["metadata"]["name"] == "gpuport-registration":
                # Its own objects by name; create cannot be limited by name, so it is alone in a rule.
                if rule["verbs"] == ["create"]:
                    assert "resourceNames" not in rule and rule["apiGroups"] == [
                        "admissionregistration.k8s.io"
                    ]
                else:
                    assert rule["verbs"] == ["get", "update"] or rule == {
                        "apiGroups": [""],
                        "resources": ["namespaces"],
                        "resourceNames": ["gpuport-system"],
                        "verbs": ["get"],
                    }
                    assert rule["resourceNames"] in (
                        ["gpuport"],
                        ["gpuport-gpu-names", "gpuport-gpu-env"],
                        ["gpuport-system"],
                    )
            elif doc["kind"] == "ClusterRole" and doc["metadata"]["name"] == "gpuport-events":
                assert rule == {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]}
            elif doc["kind"] == "ClusterRole":
                assert "secrets" not in rule["resources"]
                assert rule.get("resourceNames") == ["gpuport"]
            if "secrets" in rule["resources"] and rule["verbs"] != ["create"]:
                assert rule["resourceNames"] == ["gpuport-tls"]
    bound = {
        (b["roleRef"]["name"], s["name"])
        for _, b in documents()
        if b["kind"] in ("RoleBinding", "ClusterRoleBinding")
        for s in b["subjects"]
    }
    assert bound == {
        ("gpuport-certs", "gpuport-certs"),
        ("gpuport-node-agent", "gpuport-node-agent"),
        ("gpuport-view", "gpuport"),
        ("gpuport-reservations", "gpuport"),
        ("gpuport-registration", "gpuport"),
        ("gpuport-events", "gpuport"),
    }


def test_certificate_jobs_write_the_secret_the_deployment_mounts():
    job = one("Job", "gpuport-certs")
    cron = one("CronJob", "gpuport-certs-renew")
    assert cron["spec"]["jobTemplate"]["spec"]["template"]["spec"] == job["spec"]["template"]["spec"]
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[0] == "certs"
    assert "--secret=gpuport-tls" in args and "--renew-before" in args and "--webhook-config=gpuport" in args
    assert job["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True


def test_webhooks_own_namespace_opts_out():
    namespace = one("Namespace", "gpuport-system")
    assert namespace["metadata"]["labels"]["gpuport.io/admission"] == "disabled"


def test_cloudmaps_configmap_matches_cloudmaps_folder():
    rendered = render(default_directory())
    assert (MANIFESTS / "cloudmaps-configmap.yaml").read_text() == rendered, "run `make manifests`"
    data = yaml.safe_load(rendered)["data"]
    assert data["generic.yaml"] == (default_directory() / "generic.yaml").read_text()


def test_dockerfile_runs_as_non_root_without_build_tools():
    text = (REPO / "Dockerfile").read_text()
    final_stage = text.rsplit("FROM ", 1)[1]
    assert "USER 65532:65532" in final_stage
    assert "gcc" not in final_stage and "build-essential" not in final_stage
    # The maps travel inside the wheel: the build stage has cloudmaps/ for webhook/shipped_cloudmaps.
    assert "COPY cloudmaps ./cloudmaps" in text.rsplit("FROM ", 1)[0]
    assert json.loads(final_stage.split("ENTRYPOINT ", 1)[1].splitlines()[0]) == ["gpuport"]


def test_node_agent_daemonset_runs_unprivileged_with_its_node_name():
    daemonset = one("DaemonSet", "gpuport-node-agent")
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "gpuport-node-agent"
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    assert container["args"][0] == "node-agent"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert "resources" in container and "nvidia.com/gpu" not in container["resources"].get("limits", {})


def test_admission_policy_matches_the_cloud_maps_and_refuses_foreign_gpu_names():
    from tests.helpers import context
    from webhook.config.policy import policy_objects
    from webhook.config.registration import excluded_namespaces

    generic = context("generic")
    policy, binding = policy_objects(generic.target, generic.dialects.maps, excluded_namespaces())
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert binding["spec"]["validationActions"] == ["Deny"]
    # The policy skips the namespaces every webhook skips (the pods webhooks also split by GPU budget).
    for _, hook in webhooks(budget=()):
        assert binding["spec"]["matchResources"]["namespaceSelector"] == hook["namespaceSelector"]
    environment = celpy.Environment()
    program = environment.program(environment.compile(policy["spec"]["validations"][0]["expression"]))

    def passes(resources, init=False):
        pod = {
            "spec": {"containers": [{"name": "c", "resources": {"limits": resources, "requests": resources}}]}
        }
        if init:
            pod["spec"]["initContainers"] = pod["spec"].pop("containers")
            pod["spec"]["containers"] = [{"name": "app"}]
        return bool(program.evaluate({"object": celpy.json_to_cel(pod)}))

    assert (
        passes({"nvidia.com/gpu": "1"}) and passes({"nvidia.com/mig-1g.10gb": "1"}) and passes({"cpu": "1"})
    )
    assert not passes({"aliyun.com/gpu-mem": "8"})
    assert not passes({"nvidia.com/gpumem": "8192"}, init=True)
    assert passes({})


def test_gpuport_may_read_and_update_every_object_it_registers_by_name():
    from tests.helpers import context
    from webhook.config.registration import Endpoint, registered_objects

    generic = context("generic")
    rules = one("ClusterRole", "gpuport-registration")["rules"]
    for obj in registered_objects(generic.target, generic.dialects.maps, Endpoint(), b"", ["ml"]):
        kind = obj["kind"].lower()
        resource = f"{kind[:-1]}ies" if kind.endswith("y") else f"{kind}s"
        allowed = [
            r
            for r in rules
            if resource in r["resources"] and {"get", "update"} <= set(r["verbs"]) and "resourceNames" in r
        ]
        assert any(obj["metadata"]["name"] in r["resourceNames"] for r in allowed), obj["metadata"]["name"]


def test_the_optional_network_policy_admits_the_webhook_port_of_the_deployment_s_pods():
    policy = yaml.safe_load((MANIFESTS / "optional" / "networkpolicy.yaml").read_text())
    deployment = yaml.safe_load((MANIFESTS / "deployment.yaml").read_text())
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    ports = {p["containerPort"] for p in container["ports"]}
    assert all(port["port"] in ports for rule in policy["spec"]["ingress"] for port in rule["ports"])
    namespace = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())["namespace"]
    assert policy["metadata"]["namespace"] == namespace


def test_every_pod_webhook_is_called_for_a_pod_with_dra_claims_and_only_then():
    pod = fixture("pod-create-gpu-limit-1.json")["request"]["object"]
    pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    pod_hooks = [h for _, h in webhooks() if any("pods" in r["resources"] for r in h["rules"])]
    for hook in pod_hooks:
        condition = _asks_condition(hook)
        environment = celpy.Environment()
        program = environment.program(environment.compile(condition["expression"]))
        pod["spec"]["resourceClaims"] = []
        assert not _matches(program, pod)
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "two-gpus"}]
        assert _matches(program, pod)


def _pod_update_conditions():
    """The validating pods hooks' conditions, compiled: each must hold for a call to be made."""
    programs = []
    for kind, hook in webhooks():
        if kind == "ValidatingWebhookConfiguration" and any("pods" in r["resources"] for r in hook["rules"]):
            environment = celpy.Environment()
            programs.append(
                [environment.program(environment.compile(c["expression"])) for c in hook["matchConditions"]]
            )
    assert len(programs) == 2  # the fail-closed hook and the fail-open one
    return programs


def _called(operation, old, new):
    activation = {
        "request": celpy.json_to_cel({"operation": operation}),
        "object": celpy.json_to_cel(new),
        "oldObject": celpy.json_to_cel(old),
    }
    answers = {all(bool(p.evaluate(activation)) for p in programs) for programs in _pod_update_conditions()}
    (answer,) = answers  # both hooks decide alike
    return answer


def _edited(pod, **changes):
    import copy

    edited = copy.deepcopy(pod)
    for path, value in changes.items():
        *parents, leaf = path.split("__")
        holder = edited
        for name in parents:
            holder = holder.setdefault(name, {})
        if value is None:
            holder.pop(leaf, None)
        else:
            holder[leaf] = value
    return edited


def test_only_pod_updates_that_move_gpus_between_quotas_cost_a_call():
    """Setting activeDeadlineSeconds moves a pod into Terminating scopes (isTerminating, pods.go);
    Kubernetes lets it be set once and then only lowered. A GPU-share annotation added, changed or
    removed changes the pod's charge. Any other update of a GPU pod costs no call."""
    pod = fixture("pod-create-gpu-limit-1.json")["request"]["object"]
    assert _called("CREATE", None, pod)
    assert not _called("UPDATE", pod, _edited(pod, metadata__labels={"a": "b"}))
    assert not _called("UPDATE", pod, _edited(pod, metadata__annotations={"note": "x"}))
    timed = _edited(pod, spec__activeDeadlineSeconds=600)
    assert _called("UPDATE", pod, timed)
    assert not _called("UPDATE", timed, _edited(timed, spec__activeDeadlineSeconds=60))
    assert not _called("UPDATE", timed, _edited(timed, metadata__labels={"a": "b"}))
    for name in ("gpu-fraction", "gpu-memory", "gpu-fraction-num-devices"):
        shared = _edited(pod, metadata__annotations={name: "1"})
        assert _called("UPDATE", pod, shared), name  # added
        assert _called("UPDATE", shared, _edited(shared, metadata__annotations={name: "2"})), name
        assert _called("UPDATE", shared, _edited(shared, metadata__annotations={})), name  # removed
        assert _called("UPDATE", shared, _edited(shared, metadata__annotations={name: ""})), name
        assert not _called("UPDATE", shared, _edited(shared, metadata__labels={"a": "b"})), name


def test_the_update_condition_names_every_share_annotation_the_maps_read():
    from tests.helpers import context

    expression = next(
        c["expression"]
        for kind, hook in webhooks()
        if kind == "ValidatingWebhookConfiguration"
        for c in hook["matchConditions"]
        if "oldObject" in c["expression"]
    )
    for cloud_map in context("kai").dialects.annotation_shares:
        for name in cloud_map.shared.annotation_names():
            assert f"'{name}'" in expression, (cloud_map.name, name)


def test_every_install_may_read_what_the_dra_budget_counts():
    """Where resource.k8s.io is served, the budget refuses names it cannot count when the DeviceClasses
    cannot be listed: the base install, not only the optional DRA RBAC, must let it list and watch them.
    (The v1.32 test API server serves no resource.k8s.io, so `kubectl auth can-i` cannot resolve them.)"""
    view = next(
        d for _, d in documents() if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "gpuport-view"
    )
    assert {
        "apiGroups": ["resource.k8s.io"],
        "resources": ["deviceclasses", "resourceslices"],
        "verbs": ["list", "watch"],
    } in view["rules"]


def test_an_update_that_adds_or_removes_any_charge_annotation_costs_a_call():
    """Issue 45: a share removed from a pod that asks nothing else (KAI's, by annotation only) was never
    sent, since the pod after the update asks for nothing; nor was HAMi's `nvidia.com/use-gputype`
    added to a whole-GPU pod. Both reach gpuport now, which keeps them where there is a GPU budget."""
    from tests.translation_cases import kai_pod

    share = kai_pod({"gpu-fraction": "0.9"})
    assert _called("UPDATE", share, _edited(share, metadata__annotations={}))
    assert not _called("UPDATE", kai_pod({}), _edited(kai_pod({}), metadata__labels={"a": "b"}))
    pod = fixture("pod-create-gpu-limit-1.json")["request"]["object"]
    assert _called("UPDATE", pod, _edited(pod, metadata__annotations={"nvidia.com/use-gputype": "Tesla-T4"}))


def test_the_packaged_charge_keys_are_every_shipped_maps_and_a_registration_adds_its_maps():
    from tests.helpers import context
    from webhook.config.registration import PACKAGED_CHARGE_KEYS, Endpoint, registered_objects
    from webhook.core.budget.frozen import charge_annotations

    loaded = context("generic")
    assert charge_annotations(loaded.dialects.maps) <= set(PACKAGED_CHARGE_KEYS)
    from dataclasses import replace

    from webhook.core.vocabulary.platform import ModelAnnotations

    other = replace(loaded.dialects.maps[0], model_annotations=ModelAnnotations(use="example.com/gpu-model"))
    objects = registered_objects(loaded.target, (other,), Endpoint(), b"", ["ml"])
    conditions = [
        c["expression"]
        for obj in objects
        if obj["kind"] == "ValidatingWebhookConfiguration"
        for hook in obj["webhooks"]
        if hook["name"].startswith("pods.")
        for c in hook["matchConditions"]
    ]
    assert len(conditions) == 4 and all("'example.com/gpu-model'" in c for c in conditions)


def test_claim_creates_and_only_the_claim_updates_that_change_its_marks_as_a_pods_cost_a_call():
    """Issue 45: the resourceclaim controller takes a claim controlled by a pod and annotated with the
    pod's entry as that pod's; an update may add those marks to a claim made ahead, so such updates are
    sent (webhook/core/budget/adopted_claims.py). Other updates (the scheduler's finalizer) are not."""
    hooks = [h for _, h in webhooks() if any("resourceclaims" in r["resources"] for r in h["rules"])]
    assert len(hooks) == 2 and all(h["rules"][0]["operations"] == ["CREATE", "UPDATE"] for h in hooks)
    environment = celpy.Environment()
    programs = [
        environment.program(environment.compile(c["expression"])) for h in hooks for c in h["matchConditions"]
    ]
    owner = {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u", "controller": True}
    plain = {"metadata": {"name": "c", "labels": {"a": "b"}}, "spec": {}}

    def called(operation, old, new):
        activation = {
            "request": celpy.json_to_cel({"operation": operation}),
            "object": celpy.json_to_cel(new),
            "oldObject": celpy.json_to_cel(old),
        }
        (answer,) = {bool(p.evaluate(activation)) for p in programs}
        return answer

    annotated = _edited(plain, metadata__annotations={"resource.kubernetes.io/pod-claim-name": "gpus"})
    owned = _edited(plain, metadata__ownerReferences=[owner])
    assert called("CREATE", None, plain)
    assert called("UPDATE", plain, annotated) and called("UPDATE", annotated, plain)
    assert called("UPDATE", plain, owned) and called(
        "UPDATE", owned, _edited(owned, metadata__ownerReferences=[])
    )
    renamed = _edited(annotated, metadata__annotations={"resource.kubernetes.io/pod-claim-name": "other"})
    assert called("UPDATE", annotated, renamed)
    empty = _edited(plain, metadata__annotations={"resource.kubernetes.io/pod-claim-name": ""})
    assert called("UPDATE", plain, empty)  # present and empty is not absent
    finalized = _edited(owned, metadata__finalizers=["resource.kubernetes.io/delete-protection"])
    assert not called("UPDATE", owned, finalized)
    assert not called("UPDATE", plain, _edited(plain, metadata__labels={"a": "c"}))
    not_controller = _edited(plain, metadata__ownerReferences=[{**owner, "controller": False}])
    assert not called("UPDATE", plain, not_controller)


def test_an_update_that_touches_the_recorded_claim_template_uids_costs_a_call():
    """Issue 45: the uids of the claim templates a pod was charged (gpuport.io/claim-templates) are
    frozen like the charge annotations: every update adding, changing or removing them reaches gpuport."""
    key = "gpuport.io/claim-templates"
    pod = fixture("pod-create-gpu-limit-1.json")["request"]["object"]
    recorded = _edited(pod, metadata__annotations={key: '{"one": "uid-1"}'})
    assert _called("UPDATE", pod, recorded)
    assert _called("UPDATE", recorded, _edited(recorded, metadata__annotations={key: '{"one": "uid-2"}'}))
    assert _called("UPDATE", recorded, _edited(recorded, metadata__annotations={}))
