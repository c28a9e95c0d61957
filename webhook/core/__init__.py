"""The decision core: pure functions from an AdmissionReview, the cloud maps and the node inventory to a
decision and its JSON Patch. No I/O and no framework: stdlib, jsonpatch and kubernetes.utils only
(`make lint` enforces it with import-linter), so every rule is testable without a server or a cluster."""
