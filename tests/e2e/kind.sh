#!/usr/bin/env bash
# End-to-end on a kind cluster, for people with Docker, kind and kubectl: build the image, install with
# `kubectl apply -k manifests/` (certificates by the gpuport-certs Job: Secret + caBundle), then run the
# integration suite's quota and LimitRange scenarios against the real install.
# The build machines have no Docker engine, so this script is kept correct by reading; the same
# scenarios run there against kube-apiserver + etcd (tests/integration, KUBEBUILDER_ASSETS).
set -euo pipefail
cd "$(dirname "$0")/../.."

CLUSTER=${CLUSTER:-gpuport-e2e}
IMAGE=gpuport:0.1.0
KUBECONFIG_FILE=$(mktemp)

for tool in docker kind kubectl; do
  command -v "$tool" >/dev/null || { echo "e2e-kind: $tool is required" >&2; exit 2; }
done

kind create cluster --name "$CLUSTER" --kubeconfig "$KUBECONFIG_FILE" --wait 180s
if [ -z "${KEEP_CLUSTER:-}" ]; then
  trap 'kind delete cluster --name "$CLUSTER"; rm -f "$KUBECONFIG_FILE"' EXIT
fi
export KUBECONFIG=$KUBECONFIG_FILE

docker build -t "$IMAGE" .
kind load docker-image "$IMAGE" --name "$CLUSTER"

kubectl apply -k manifests/
kubectl -n gpuport-system wait --for=condition=complete job/gpuport-certs --timeout=180s
kubectl -n gpuport-system rollout status deployment/gpuport --timeout=180s

make .venv/bin/.installed >/dev/null
GPUPORT_E2E_KUBECONFIG=$KUBECONFIG_FILE .venv/bin/python -m pytest -v tests/integration/test_quota.py
