"""A platform's GPU vocabulary as plain values: what the decision core reads, with no I/O."""

from dataclasses import dataclass


@dataclass(frozen=True)
class CloudMap:
    name: str
    description: str
    whole_gpu: str
    mig_form: str
    mig_resource_prefix: str
    mig_example_profiles: tuple[str, ...]
    shared_resource: str | None
    source: str

    def accelerator_names(self) -> frozenset[str]:
        names = {self.whole_gpu}
        if self.shared_resource:
            names.add(self.shared_resource)
        return frozenset(names)

    def is_accelerator(self, resource: str) -> bool:
        if resource in self.accelerator_names():
            return True
        return (
            self.mig_form != "none"
            and bool(self.mig_resource_prefix)
            and resource.startswith(self.mig_resource_prefix)
        )

    def partial_gpu_options(self) -> list[str]:
        """What a user who wants part of a GPU can ask for on this platform, in its own words."""
        options = []
        if self.mig_form == "mixed" and self.mig_resource_prefix:
            examples = ", ".join(f"{self.mig_resource_prefix}{p}" for p in self.mig_example_profiles[:2])
            hint = f" such as {examples}" if examples else ""
            options.append(f"a MIG slice ({self.mig_resource_prefix}<profile>{hint})")
        if self.shared_resource:
            options.append(f"a shared GPU ({self.shared_resource}: 1)")
        return options


@dataclass(frozen=True)
class AcceleratorNames:
    """Accelerator resource names of every loaded dialect, not only the active platform's."""

    maps: tuple[CloudMap, ...]

    def __contains__(self, resource: str) -> bool:
        return any(m.is_accelerator(resource) for m in self.maps)
