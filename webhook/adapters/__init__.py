"""The edges: HTTP in (http/), the Kubernetes API (kube/), users' manifest files (files/). Each adapter
turns the outside world into core values and back; none imports another."""
