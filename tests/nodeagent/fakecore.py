"""The two Node calls the node agent makes (read, merge-patch), on one Node held in memory: a patch
lands as the API server merges it (a label set to null is removed)."""

from types import SimpleNamespace


class FakeCore:
    def __init__(self, labels=None, annotations=None):
        self.metadata = SimpleNamespace(labels=dict(labels or {}), annotations=dict(annotations or {}))
        self.patches = []

    def read_node(self, name):
        return SimpleNamespace(metadata=self.metadata)

    def patch_node(self, name, body):
        self.patches.append(body)
        for key, value in body["metadata"].get("labels", {}).items():
            if value is None:
                self.metadata.labels.pop(key, None)
            else:
                self.metadata.labels[key] = value
        self.metadata.annotations.update(body["metadata"].get("annotations", {}))
