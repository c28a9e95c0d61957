"""The Kubernetes API: one client factory, the watched cluster view, the quota and limit gates and the
Lease-backed reservation ledger they decide with."""
