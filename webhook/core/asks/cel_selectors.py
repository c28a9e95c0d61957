"""The CEL of DRA selectors, read term by term (pure): the strict grammar of the shapes drivers publish
and their samples use, and what each term narrows a request to (models, refused models, device type,
MIG profile), or why it has no device-plugin equivalent.

Only these shapes are read: `device.driver` equality; ==, != and `in` (and their negation) on the
driver's product attributes, type, MIG profile and `architecture`; version comparisons of
`cudaComputeCapability` (`isGreaterThan(semver(…))`, `compareTo(…) >= 0`, ==), checked against the
catalogue; bounds on the memory capacity, compared with NVML's figures, whether written in CEL or as a
request's `capacity.requests` (KEP-5075), which the API defines as that same bound. Terms are joined by
&& at the top; anything else is outside the grammar, and then nothing the expression says is trusted.

Why one module of ~350 lines: the grammar and the meaning of each term are one table, read by one
state (what the terms so far narrowed); split, a new term would be added in two places.
"""

import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from webhook.core.vocabulary import quantity
from webhook.core.vocabulary.catalogue import Catalogue, GpuModel, MigProfile, ProfileError
from webhook.core.vocabulary.platform import DraForm

_STRING = r"""(?:"([^"\\]*)"|'([^'\\]*)')"""
_DOMAIN = rf"""\[\s*{_STRING}\s*\]"""
_NAME = r"([A-Za-z_][A-Za-z0-9_]*)"
_ATTRIBUTE = re.compile(rf"^device\.attributes{_DOMAIN}\.{_NAME}\s*(==|!=|in)\s*(.+)$")
DRIVER = re.compile(rf"^device\.driver\s*(==|!=)\s*{_STRING}$")
_NEGATION = re.compile(r"^!\s*\((.+)\)$")
_VERSION_CALL = re.compile(
    rf"^device\.attributes{_DOMAIN}\.{_NAME}\.(isGreaterThan|isLessThan)\(\s*(?:semver|version)\(\s*{_STRING}\s*\)\s*\)$"
)
_VERSION_COMPARE = re.compile(
    rf"^device\.attributes{_DOMAIN}\.{_NAME}\.compareTo\(\s*(?:semver|version)\(\s*{_STRING}\s*\)\s*\)"
    r"\s*(>=|>|<=|<|==)\s*0$"
)
_VERSION_EQUAL = re.compile(
    rf"^device\.attributes{_DOMAIN}\.{_NAME}\s*==\s*(?:semver|version)\(\s*{_STRING}\s*\)$"
)
_CAPACITY_CALL = re.compile(
    rf"^device\.capacity{_DOMAIN}\.{_NAME}\.(isGreaterThan|isLessThan)\(\s*quantity\(\s*{_STRING}\s*\)\s*\)$"
)
_CAPACITY_COMPARE = re.compile(
    rf"^device\.capacity{_DOMAIN}\.{_NAME}\.compareTo\(\s*quantity\(\s*{_STRING}\s*\)\s*\)\s*(>=|>|<=|<)\s*0$"
)
_LIST = re.compile(rf"^\[\s*{_STRING}(?:\s*,\s*{_STRING})*\s*\]$")
_ITEM = re.compile(_STRING)
_LONG_PROFILE = re.compile(r"^([1-9][0-9]*)c\.(([1-9][0-9]*)g\.[1-9][0-9]*gb.*)$")
_DRIVER_ATTRIBUTES = ("driverVersion", "cudaDriverVersion")  # a node's, not a model's


def literal_text(match: tuple[str | None, ...]) -> str:
    return next(m for m in match if m is not None)


def _values(literal: str, op: str) -> tuple[str, ...] | None:
    literal = literal.strip()
    if op in ("==", "!="):
        single = re.fullmatch(_STRING, literal)
        return (literal_text(single.groups()),) if single else None
    if not _LIST.fullmatch(literal):
        return None
    return tuple(literal_text(m.groups()) for m in _ITEM.finditer(literal))


def _version(text: str) -> tuple[int, ...] | None:
    parts = text.split("-")[0].split(".")
    # ASCII digits only: str.isdigit() also accepts "²", which int() refuses.
    return tuple(int(p) for p in parts) if all(re.fullmatch(r"[0-9]+", p) for p in parts) else None


_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
    "==": operator.eq,
}


def _compare(left: Any, op: str, right: Any) -> bool:
    return bool(_OPERATORS[op](left, right))


@dataclass
class SelectorReading:
    """What the selectors of a class and a request say, term by term. `parsed` stays True while every
    term matched the strict grammar (so the budget may trust what narrowed); `inexact` collects why a
    term cannot be said in device-plugin words."""

    form: DraForm
    catalogue: Catalogue
    offered: tuple[str, ...]
    kind: str | None  # whole | mig | partition, "" for a type the map does not know; None: not said
    models: frozenset[str] | None = None
    avoid: frozenset[str] = frozenset()
    profile: MigProfile | None = None
    parsed: bool = True
    inexact: list[str] = field(default_factory=list)
    # (operator, amount, the request field it was written in: "" for CEL)
    memory_bounds: list[tuple[str, Decimal, str]] = field(default_factory=list)

    def narrow(self, models: frozenset[str]) -> None:
        self.models = models if self.models is None else self.models & models

    def selectors(self, found: Any, where: str) -> None:
        if not found:
            return
        if not isinstance(found, list):
            self._refuse(f"{where}: selectors is not a list")
            return
        for selector in found:
            cel = selector.get("cel") if isinstance(selector, Mapping) else None
            expression = cel.get("expression") if isinstance(cel, Mapping) else None
            if not isinstance(expression, str):
                self._refuse(f"{where} has a selector that is not CEL")
                continue
            self.expression(expression)

    def capacity(self, found: Any, where: str) -> None:
        """A request's `capacity` (KEP-5075). The API defines each `requests` entry as the filter
        `device.capacity[<domain>].<name>.compareTo(quantity(<amount>)) >= 0`, a name without a domain
        being the driver's: read as that bound, so `memory: 90Gi` narrows the models as the CEL would
        rather than being dropped (any GPU). Where a device allows several allocations the amount is
        also consumed, which only narrows further: the bound still holds."""
        if found is None:
            return
        requests = found.get("requests") if isinstance(found, Mapping) else None
        if not isinstance(found, Mapping) or set(found) != {"requests"} or not isinstance(requests, Mapping):
            self._refuse(f"{where}: its capacity is not a map of capacity.requests")
            return
        for key, amount in requests.items():
            said = f"{where} asks for capacity.requests {key}: {amount}"
            domain, _, name = str(key).rpartition("/")
            problem = (
                self._capacity_bound(domain or self.form.driver, name, ">=", amount, said)
                if re.fullmatch(_NAME, name)
                else None
            )
            if problem is None:
                self._refuse(f"{said}, which gpuport cannot read as a quantity of a capacity")
            elif problem:
                self.inexact.append(f"{said}: {problem}")

    def expression(self, expression: str) -> None:
        """One CEL expression: terms joined by && at the top, each read alone. The split is naive on
        purpose: a term holding `||`, parentheses around several terms or `&&` in a string does not
        match the grammar, so the expression is refused (and the budget trusts none of it)."""
        for term in expression.split("&&"):
            problem = self._term(term.strip())
            if problem is None:
                self.parsed = False
                self.inexact.append(
                    f"cannot read the CEL selector {expression!r} exactly (gpuport reads ==, != and in on "
                    f"{self.form.product_attribute}, {self.form.profile_attribute}, type and architecture, "
                    f"version comparisons of cudaComputeCapability, device.driver, and bounds on "
                    f"{self.form.memory_capacity}); say it in those terms"
                )
                return
            if problem:
                self.inexact.append(f"{problem} ({expression!r})")

    def _refuse(self, why: str) -> None:
        self.parsed = False
        self.inexact.append(why)

    def _term(self, term: str) -> str | None:
        """None: outside the grammar; "": read; else why this term has no device-plugin equivalent."""
        while term.startswith("(") and term.endswith(")") and term.count("(") == term.count(")"):
            term = term[1:-1].strip()
        if negated := _NEGATION.fullmatch(term):
            return self._negation(negated.group(1).strip())
        if driver := DRIVER.fullmatch(term):
            same = literal_text(driver.groups()[1:]) == self.form.driver
            return "" if same == (driver.group(1) == "==") else f"it selects no device of {self.form.driver}"
        for pattern, reader in (
            (_VERSION_CALL, self._version_call),
            (_VERSION_COMPARE, self._version_compare),
            (_VERSION_EQUAL, self._version_equal),
            (_CAPACITY_CALL, self._capacity_call),
            (_CAPACITY_COMPARE, self._capacity_compare),
        ):
            if found := pattern.fullmatch(term):
                return reader(found)
        attribute = _ATTRIBUTE.fullmatch(term)
        if not attribute:
            return None
        domain, name, op = literal_text(attribute.groups()[:2]), attribute.group(3), attribute.group(4)
        values = _values(attribute.group(5), op)
        if values is None:
            return None
        if domain != self.form.driver:
            return f"it selects on {domain}'s {name}, which device plugins cannot"
        return self._attribute(name, values, negated=op == "!=")

    def _negation(self, inner: str) -> str | None:
        attribute = _ATTRIBUTE.fullmatch(inner)
        if not attribute or attribute.group(4) == "!=":
            return None
        values = _values(attribute.group(5), attribute.group(4))
        if values is None:
            return None
        if literal_text(attribute.groups()[:2]) != self.form.driver:
            return f"it selects on {literal_text(attribute.groups()[:2])}, which device plugins cannot"
        return self._attribute(attribute.group(3), values, negated=True)

    def _attribute(self, name: str, values: tuple[str, ...], negated: bool) -> str:
        models = self._models_named(name, values)
        if models is not None:
            if negated:
                self.avoid |= models
            else:
                self.narrow(models)
            return ""
        if negated:
            return f"it excludes {name} values, which device plugins cannot"
        if name == "type":
            kinds = {self.form.kind_of_type(v) for v in values}
            if len(kinds) != 1:
                return f"it accepts several device types ({', '.join(values)})"
            (kind,) = kinds
            if self.kind not in (None, kind):
                return f"it asks for type {values[0]} of a class that gives other devices"
            self.kind = kind
            return "" if kind else f"type {values[0]} has no device-plugin equivalent here"
        if name == self.form.profile_attribute and len(values) == 1:
            return self._profile(values[0])
        return f"it selects on {name}, which device plugins cannot"

    def _models_named(self, name: str, values: tuple[str, ...]) -> frozenset[str] | None:
        """The catalogue models an attribute's values name, or None for an attribute that names none."""
        wanted = set(values)
        if name == self.form.product_attribute:
            return frozenset(m for m, names in self.form.product_names.items() if set(names) & wanted)
        if self.form.pci_attribute and name == self.form.pci_attribute:
            ids = {v.upper().replace("0X", "0x") for v in wanted}
            return frozenset(m.id for m in self._vendor_models() if set(m.pci_ids) & ids)
        if name == "architecture":
            return frozenset(m.id for m in self._vendor_models() if m.architecture in wanted)
        return None

    def _vendor_models(self) -> list[GpuModel]:
        vendor = next(
            (self.catalogue.models[m].vendor for m in self.form.product_names if m in self.catalogue.models),
            "",
        )
        return [m for m in self.catalogue.models.values() if m.vendor == vendor]

    def _profile(self, value: str) -> str:
        # The driver publishes go-nvlib's MigProfile.String() (see cloudmaps/dra-nvidia.yaml): the
        # short form whenever compute and GPU-instance slices are equal, so the long form of such a
        # profile is a value no device carries, not another spelling of it.
        long_form = _LONG_PROFILE.fullmatch(value)
        if long_form:
            if long_form.group(1) != long_form.group(3):
                return f"profile {value} is a compute instance inside a MIG device, not a whole one"
            return (
                f"profile {value!r} matches no device: the driver publishes it as {long_form.group(2)} "
                "(the short form, whenever compute and GPU-instance slices are equal); select that"
            )
        try:
            self.profile = MigProfile.parse(value)
        except ProfileError:
            return f"profile {value!r} is not a MIG profile"
        return ""

    def _version_call(self, found: re.Match[str]) -> str | None:
        op = ">" if found.group(4) == "isGreaterThan" else "<"
        return self._version_bound(
            literal_text(found.groups()[:2]), found.group(3), op, literal_text(found.groups()[4:])
        )

    def _version_compare(self, found: re.Match[str]) -> str | None:
        domain, name = literal_text(found.groups()[:2]), found.group(3)
        return self._version_bound(domain, name, found.group(6), literal_text(found.groups()[3:5]))

    def _version_equal(self, found: re.Match[str]) -> str | None:
        return self._version_bound(
            literal_text(found.groups()[:2]), found.group(3), "==", literal_text(found.groups()[3:])
        )

    def _version_bound(self, domain: str, name: str, op: str, text: str) -> str | None:
        version = _version(text)
        if version is None:
            return None
        if domain != self.form.driver:
            return f"it compares {domain}'s {name}, which device plugins cannot"
        if name in _DRIVER_ATTRIBUTES:
            return f"it requires a {name} of the node's driver, which a device-plugin pod cannot select"
        if name != "cudaComputeCapability":
            return f"it compares {name}, which device plugins cannot"
        wanted = (*version, 0, 0, 0)[:3]
        self.narrow(
            frozenset(
                m.id
                for m in self._vendor_models()
                if m.compute_capability is not None and _compare((*m.compute_capability, 0), op, wanted)
            )
        )
        return ""

    def _capacity_call(self, found: re.Match[str]) -> str | None:
        op = ">" if found.group(4) == "isGreaterThan" else "<"
        return self._capacity_bound(
            literal_text(found.groups()[:2]), found.group(3), op, literal_text(found.groups()[4:])
        )

    def _capacity_compare(self, found: re.Match[str]) -> str | None:
        domain, name = literal_text(found.groups()[:2]), found.group(3)
        return self._capacity_bound(domain, name, found.group(6), literal_text(found.groups()[3:5]))

    def _capacity_bound(self, domain: str, name: str, op: str, amount: object, said: str = "") -> str | None:
        try:
            wanted = quantity.parse(amount)
        except quantity.QuantityError:
            return None
        if not wanted.is_finite():
            return None
        if domain != self.form.driver or name != self.form.memory_capacity:
            return f"it bounds the capacity {name}, which device plugins cannot"
        # Applied once every term is read (finish): a MIG device's memory is its slice's, and whether
        # this is one may be said by a later term.
        self.memory_bounds.append((op, wanted, said))
        return ""

    def finish(self) -> None:
        """Apply what depends on every term: memory bounds narrow whole GPUs' models by NVML's figure
        (an H100 80GB has 81,559 MiB, not 80 GiB); on a MIG device they cannot be said."""
        if not self.memory_bounds:
            return
        if self.kind != "whole" and self.kind is not None:
            fields = "; ".join(said for _, _, said in self.memory_bounds if said)
            self.inexact.append(
                "a MIG slice is chosen by its profile, which says its memory: name the profile"
                + (f" ({fields})" if fields else "")
            )
            return
        for op, wanted, _ in self.memory_bounds:
            self.narrow(
                frozenset(
                    m
                    for m in self.offered
                    if m in self.catalogue.models
                    and _compare(Decimal(self.catalogue.models[m].memory_bytes), op, wanted)
                )
            )
        self.memory_bounds = []
