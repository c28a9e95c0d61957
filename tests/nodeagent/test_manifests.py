"""The node agent's DaemonSet and its optional ServiceMonitor agree with what the agent reads and serves."""

import yaml

from tests.helpers import REPO
from webhook.nodeagent.metrics import DEFAULT_METRICS_PORT
from webhook.nodeagent.util_eff import DEFAULT_MEMORY_FILL, parse_memory_fill


def documents(path):
    return [d for d in yaml.safe_load_all((REPO / path).read_text()) if d]


def daemonset():
    (found,) = [d for d in documents("manifests/node-agent.yaml") if d["kind"] == "DaemonSet"]
    return found


def test_the_daemonset_does_not_see_host_pids_unless_opted_in_and_serves_metrics_on_its_port():
    template = daemonset()["spec"]["template"]
    pod = template["spec"]
    assert pod["hostPID"] is False
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["GPUPORT_HOST_PID"] == "false"
    # κ is set, valid, and the same default the cloud maps' policy.sharing.memory_fill has.
    assert parse_memory_fill(env["GPUPORT_SHARED_MEMORY_FILL"]) == DEFAULT_MEMORY_FILL
    port = int(env["GPUPORT_METRICS_PORT"])
    assert port == DEFAULT_METRICS_PORT
    assert {"name": "metrics", "containerPort": port, "protocol": "TCP"} in container["ports"]
    annotations = template["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true" and annotations["prometheus.io/port"] == str(port)


def test_the_optional_service_monitor_scrapes_the_agent_pods_metrics_port():
    service, monitor = documents("manifests/optional/node-agent-servicemonitor.yaml")
    template = daemonset()["spec"]["template"]
    assert service["kind"] == "Service" and service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"].items() <= template["metadata"]["labels"].items()
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] == "metrics" and port["port"] == DEFAULT_METRICS_PORT
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1" and monitor["kind"] == "ServiceMonitor"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == [port["name"]]
    namespace = yaml.safe_load((REPO / "manifests" / "kustomization.yaml").read_text())["namespace"]
    assert service["metadata"]["namespace"] == monitor["metadata"]["namespace"] == namespace
