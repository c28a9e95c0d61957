"""What gpuport registers once it is ready, and the registrar that keeps it so: the quota webhook fails
closed only where there is a GPU budget, the CA bundle only grows by the CA being served and loses only
expired CAs, the policy follows the cloud map in force, and everything is owned by gpuport's namespace."""

import base64
import datetime as dt
import json

import pytest

from certs.issue import issue_bundle, registered_ca_bundle
from tests.helpers import context
from webhook.adapters.kube.registrar import Registrar
from webhook.config.registration import (
    FAIL_CLOSED,
    FAIL_OPEN,
    Endpoint,
    registered_objects,
    webhook_configurations,
)


def hooks(configs):
    return {hook["name"]: hook for config in configs for hook in config["webhooks"]}


def test_the_quota_webhook_fails_closed_only_in_namespaces_with_a_gpu_budget():
    found = hooks(webhook_configurations(Endpoint(), b"", ["ml", "team-a"]))
    closed, opened = found[FAIL_CLOSED], found[FAIL_OPEN]
    assert (closed["failurePolicy"], opened["failurePolicy"]) == ("Fail", "Ignore")
    assert {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["ml", "team-a"]} in closed[
        "namespaceSelector"
    ]["matchExpressions"]
    assert {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["ml", "team-a"]} in opened[
        "namespaceSelector"
    ]["matchExpressions"]
    # No budget anywhere: nothing fails closed (In needs a value), the checks still run, failing open.
    none = hooks(webhook_configurations(Endpoint(), b"", []))
    assert FAIL_CLOSED not in none and none[FAIL_OPEN]["failurePolicy"] == "Ignore"


def test_the_webhooks_call_the_service_or_an_address_with_the_ca_bundle():
    by_service = hooks(webhook_configurations(Endpoint("gpuport", "gpuport-system"), b"CA", []))
    assert by_service["pods.mutate.gpuport.io"]["clientConfig"] == {
        "service": {"name": "gpuport", "namespace": "gpuport-system", "path": "/mutate", "port": 443},
        "caBundle": base64.b64encode(b"CA").decode(),
    }
    by_url = hooks(webhook_configurations(Endpoint(url="https://10.0.0.5:8443/"), b"", []))
    assert by_url[FAIL_OPEN]["clientConfig"] == {"url": "https://10.0.0.5:8443/validate"}


def test_the_policy_is_rendered_for_the_map_in_force():
    amd = context("amd")
    policy, binding, *_ = registered_objects(amd.target, amd.dialects.maps, Endpoint(), b"")
    expression = policy["spec"]["validations"][0]["expression"]
    assert '"amd.com/gpu"' not in expression and '"nvidia.com/gpu"' in expression
    assert "this cluster (amd)" in policy["spec"]["validations"][0]["message"]
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]


def ca(days_ago=0, days=365):
    now = dt.datetime.now(dt.UTC) - dt.timedelta(days=days_ago)
    return issue_bundle(["gpuport"], [], days=days, now=now).ca_crt


def test_the_ca_bundle_is_the_secret_s_cas_and_any_newer_one_never_an_expired_or_replaced_one():
    old, new, expired = ca(days_ago=300), ca(), ca(days_ago=400)
    # A renewal: the Secret holds the new CA and the one before it.
    assert registered_ca_bundle(new + old, old + expired) == new + old
    # A writer that has not seen the new Secret yet keeps the new CA in.
    assert registered_ca_bundle(old, new + old) == new + old
    # A replacement (the Secret holds only the new CA): the old one goes once the writer has it...
    assert registered_ca_bundle(new, new + old) == new
    # ...and a stale writer puts back only its own CA, which the next up-to-date writer takes out.
    assert registered_ca_bundle(old, new) == new + old
    assert registered_ca_bundle(new, new + old) == new


class FakeAdmission:
    """The AdmissionregistrationV1Api calls the registrar makes, on objects held in memory."""

    def __init__(self):
        self.objects, self.writes, self.version = {}, [], 0

    def __getattr__(self, name):
        verb, _, kind = name.partition("_")
        if verb not in ("read", "create", "replace"):
            raise AttributeError(name)

        def call(*args, **kwargs):
            from kubernetes.client.exceptions import ApiException

            if verb == "read":
                key = (kind, args[0])
                if key not in self.objects:
                    raise ApiException(status=404, reason="Not Found")

                class Response:
                    data = json.dumps(self.objects[key])

                return Response()
            body = args[-1]
            self.version += 1
            stored = json.loads(json.dumps(body))
            stored["metadata"]["resourceVersion"] = str(self.version)
            for hook in stored.get("webhooks", []):
                hook.setdefault("timeoutSeconds", 10)  # the API server fills in defaults
            self.objects[(kind, body["metadata"]["name"])] = stored
            self.writes.append((verb, kind, body["metadata"]["name"]))

        return call


class FakeCore:
    def read_namespace(self, name, _request_timeout):
        class Namespace:
            class metadata:
                uid = "ns-uid-1"

        return Namespace()


def registrar(desired):
    found = Registrar(None, desired, lambda: True, "gpuport-system")
    found.admission, found.core = FakeAdmission(), FakeCore()
    return found


def test_the_registrar_creates_once_then_writes_only_what_changed():
    generic, amd = context("generic"), context("amd")
    serving = [ca(days_ago=300)]
    maps = [generic]

    def desired():
        return registered_objects(maps[0].target, maps[0].dialects.maps, Endpoint(), serving[0], ["ml"])

    registering = registrar(desired)
    assert len(registering.ensure()) == 6
    owner = registering.admission.objects[("mutating_webhook_configuration", "gpuport")]["metadata"]
    assert owner["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Namespace", "name": "gpuport-system", "uid": "ns-uid-1"}
    ]
    assert registering.ensure() == []  # nothing changed: nothing written
    # A renewal: the new CA joins the bundle (the Secret holds both), the old one stays until it expires.
    old = serving[0]
    serving[0] = ca() + old
    assert registering.ensure() == [
        "MutatingWebhookConfiguration/gpuport",
        "ValidatingWebhookConfiguration/gpuport",
    ]
    bundle = base64.b64decode(
        registering.admission.objects[("validating_webhook_configuration", "gpuport")]["webhooks"][0][
            "clientConfig"
        ]["caBundle"]
    )
    assert bundle == serving[0]
    # A replica that has not seen the renewal yet takes nothing out.
    serving[0] = old
    assert registering.ensure() == []
    # The map changes: the policies follow.
    maps[0] = amd
    assert registering.ensure() == [
        "ValidatingAdmissionPolicy/gpuport-gpu-names",
        "ValidatingAdmissionPolicy/gpuport-gpu-env",
    ]


def test_the_env_policy_binds_where_the_quota_webhook_fails_closed_and_follows_the_budget_list():
    generic = context("generic")
    budget, serving = [["ml"]], ca()

    def desired():
        return registered_objects(generic.target, generic.dialects.maps, Endpoint(), serving, budget[0])

    def binding_selector(objects):
        return next(
            o["spec"]["matchResources"]["namespaceSelector"]
            for o in objects
            if o["kind"] == "ValidatingAdmissionPolicyBinding" and o["metadata"]["name"] == "gpuport-gpu-env"
        )

    closed = hooks(o for o in desired() if "webhooks" in o)[FAIL_CLOSED]
    assert binding_selector(desired()) == closed["namespaceSelector"]

    registering = registrar(desired)
    registering.ensure()
    stored = registering.admission.objects
    budget[0] = ["ml", "team-b"]
    assert registering.ensure() == [
        "ValidatingWebhookConfiguration/gpuport",
        "ValidatingAdmissionPolicyBinding/gpuport-gpu-env",
    ]
    selector = binding_selector([stored[("validating_admission_policy_binding", "gpuport-gpu-env")]])
    assert {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["ml", "team-b"]} in selector[
        "matchExpressions"
    ]
    # The last budget gone: the binding is kept (the registrar deletes nothing) but selects no namespace.
    budget[0] = []
    assert "ValidatingAdmissionPolicyBinding/gpuport-gpu-env" in registering.ensure()
    selector = binding_selector([stored[("validating_admission_policy_binding", "gpuport-gpu-env")]])
    expressions = selector["matchExpressions"]
    assert {"key": "kubernetes.io/metadata.name", "operator": "DoesNotExist"} in expressions
    assert not any(e["operator"] == "In" for e in expressions)


def test_an_rbac_without_the_env_policy_still_lets_the_webhooks_register():
    from kubernetes.client.exceptions import ApiException

    generic = context("generic")
    serving = ca()
    registering = registrar(
        lambda: registered_objects(generic.target, generic.dialects.maps, Endpoint(), serving, ["ml"])
    )
    admission = registering.admission
    reads = admission.read_validating_admission_policy

    def forbidden_for_the_env_policy(name, **kwargs):
        if name == "gpuport-gpu-env":  # the RBAC of an install not yet re-applied
            raise ApiException(status=403, reason="Forbidden")
        return reads(name, **kwargs)

    admission.read_validating_admission_policy = forbidden_for_the_env_policy
    with pytest.raises(ApiException):  # said in the log; the next round tries again
        registering.ensure()
    assert ("validating_webhook_configuration", "gpuport") in admission.objects
    assert ("mutating_webhook_configuration", "gpuport") in admission.objects


def test_an_earlier_install_s_objects_of_the_same_names_are_taken_over_not_left_failing_closed():
    generic = context("generic")

    def desired():
        return registered_objects(generic.target, generic.dialects.maps, Endpoint(), ca(), [])

    registering = registrar(desired)
    # What `kubectl apply` of 0.1.0's manifests left: the quota webhook failing closed everywhere.
    earlier = next(o for o in desired() if o["kind"] == "ValidatingWebhookConfiguration")
    earlier = json.loads(json.dumps(earlier))
    for hook in earlier["webhooks"]:
        hook["failurePolicy"] = "Fail"
        hook.pop("namespaceSelector", None)
    earlier["metadata"] = {"name": "gpuport", "resourceVersion": "7"}
    registering.admission.objects[("validating_webhook_configuration", "gpuport")] = earlier

    assert "ValidatingWebhookConfiguration/gpuport" in registering.ensure()
    taken = registering.admission.objects[("validating_webhook_configuration", "gpuport")]
    assert ("replace", "validating_webhook_configuration", "gpuport") in registering.admission.writes
    assert {hook["failurePolicy"] for hook in taken["webhooks"]} == {"Ignore"}
    assert taken["metadata"]["ownerReferences"][0]["name"] == "gpuport-system"


def test_a_replica_that_loses_the_race_to_create_goes_on_to_the_next_object():
    from kubernetes.client.exceptions import ApiException

    generic = context("generic")

    def desired():
        return registered_objects(generic.target, generic.dialects.maps, Endpoint(), ca(), [])

    registering = registrar(desired)
    admission = registering.admission

    def made_by_another_replica(body, _request_timeout):
        raise ApiException(status=409, reason="AlreadyExists")

    admission.create_mutating_webhook_configuration = made_by_another_replica
    changed = registering.ensure()
    assert "MutatingWebhookConfiguration/gpuport" not in changed
    assert "ValidatingWebhookConfiguration/gpuport" in changed  # the rest of the round still ran


def test_printing_the_registration_without_budget_namespaces_says_what_that_gives_up(capsys):
    from webhook.commands.cli import main

    assert main(["registration", "--cloud", "eks", "--no-ca-bundle"]) == 0
    printed = capsys.readouterr()
    assert "kind: ValidatingAdmissionPolicy" in printed.out
    assert "no namespace's GPU quota or GPU limits are enforced" in printed.err
    assert main(["registration", "--cloud", "eks", "--no-ca-bundle", "--budget-namespace", "ml"]) == 0
    printed = capsys.readouterr()
    assert printed.err == "" and "failurePolicy: Fail" in printed.out


def test_printing_the_registration_without_a_ca_bundle_is_refused_unless_asked_for(tmp_path, capsys):
    # Configurations without the CA the serving certificate is signed by are ones the API server cannot
    # use: printing them is refused, and the refusal says both ways out.
    from webhook.commands.cli import main

    assert main(["registration", "--cloud", "eks", "--budget-namespace", "ml"]) == 2
    printed = capsys.readouterr()
    assert printed.out == ""
    assert "--ca-file" in printed.err and "--no-ca-bundle" in printed.err
    (tmp_path / "ca.crt").write_bytes(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    assert (
        main(
            [
                "registration",
                "--cloud",
                "eks",
                "--budget-namespace",
                "ml",
                "--ca-file",
                str(tmp_path / "ca.crt"),
            ]
        )
        == 0
    )
    assert "caBundle:" in capsys.readouterr().out
    assert main(["registration", "--cloud", "eks", "--budget-namespace", "ml", "--no-ca-bundle"]) == 0
    assert "caBundle:" not in capsys.readouterr().out


def test_an_object_says_all_gpuport_wrote_with_the_server_s_defaults_beside_it_and_no_more_items():
    from webhook.adapters.kube.objects import says_all_written

    written = {"webhooks": [{"name": "a", "rules": [{"operations": ["CREATE"]}]}]}
    defaulted = {"webhooks": [{"name": "a", "rules": [{"operations": ["CREATE"], "scope": "*"}], "x": 1}]}
    assert says_all_written(defaulted, written)
    assert not says_all_written({"webhooks": [*defaulted["webhooks"], {"name": "old"}]}, written)
    assert not says_all_written({"webhooks": [{"name": "b", "rules": []}]}, written)
    assert not says_all_written(None, written)


def test_a_registration_the_rbac_refuses_is_said_once_and_shown(caplog):
    import threading
    import time

    from kubernetes.client.exceptions import ApiException

    rounds = []

    def desired():
        rounds.append(1)
        raise ApiException(status=403, reason="Forbidden")

    registering = Registrar(None, desired, lambda: True, "gpuport-system", interval=0.01)
    registering.admission, registering.core = FakeAdmission(), FakeCore()
    with caplog.at_level("INFO", logger="gpuport"):
        runner = threading.Thread(target=registering._run, daemon=True)
        runner.start()
        deadline = time.monotonic() + 5
        while len(rounds) < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        registering.stop()
        runner.join(5)
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(rounds) >= 5 and len(said) == 1 and "403 Forbidden" in said[0], said
    assert "register webhook configurations and policy unavailable: 403 Forbidden" in (
        registering.capabilities.summary()
    )
