"""DRA claims read back into canonical asks: what a pod's ResourceClaimTemplates ask for, in the words
device plugins understand (k whole GPUs of these models, a MIG slice of this profile).

Only what can be read exactly is read: a request for a device class a loaded map names, an exact
count, and CEL selectors of the few shapes drivers' own samples use (equality or `in` on the product
and profile attributes, the driver's name, the device type, a lower bound on memory). Any other
expression is refused with the expression quoted: a guess would put the pod on the wrong hardware.
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from webhook.core import quantity
from webhook.core.catalogue import Catalogue, MigProfile, ProfileError
from webhook.core.platform import CloudMap, DraForm


class UnreadableClaim(Exception):
    """A claim gpuport cannot say in device-plugin words exactly; the message says what and why."""


@dataclass(frozen=True)
class ClaimedDevices:
    """What one request of a claim asks for: `count` whole GPUs or MIG slices."""

    kind: Literal["whole", "mig"]
    count: int
    vendor: str
    models: frozenset[str] | None  # acceptable models; None: any
    profile: MigProfile | None = None


_STRING = r"""(?:"([^"\\]*)"|'([^'\\]*)')"""
_DOMAIN = rf"""\[\s*{_STRING}\s*\]"""
_ATTRIBUTE = re.compile(rf"^device\.attributes{_DOMAIN}\.([A-Za-z_][A-Za-z0-9_]*)\s*(==|in)\s*(.+)$")
_DRIVER = re.compile(rf"^device\.driver\s*==\s*{_STRING}$")
_MEMORY = re.compile(
    rf"^device\.capacity{_DOMAIN}\.([A-Za-z_][A-Za-z0-9_]*)\.compareTo\(\s*quantity\(\s*{_STRING}\s*\)\s*\)"
    r"\s*(>=|>)\s*0$"
)
_LIST = re.compile(rf"^\[\s*{_STRING}(?:\s*,\s*{_STRING})*\s*\]$")
_ITEM = re.compile(_STRING)


def _text(match: tuple[str | None, ...]) -> str:
    return next(m for m in match if m is not None)


def _values(literal: str, operator: str) -> tuple[str, ...] | None:
    literal = literal.strip()
    if operator == "==":
        single = re.fullmatch(_STRING, literal)
        return (_text(single.groups()),) if single else None
    if not _LIST.fullmatch(literal):
        return None
    return tuple(_text(m.groups()) for m in _ITEM.finditer(literal))


@dataclass
class _Reading:
    form: DraForm
    cloud_map: CloudMap
    catalogue: Catalogue
    mig: bool
    models: frozenset[str] | None = None
    profile: MigProfile | None = None

    def narrow(self, models: frozenset[str]) -> None:
        self.models = models if self.models is None else self.models & models

    def selector(self, expression: str) -> None:
        """Read one CEL expression (terms joined by && each read alone), or raise UnreadableClaim."""
        for term in expression.split("&&"):
            if not self._term(term.strip()):
                raise UnreadableClaim(
                    f"cannot read the CEL selector {expression!r} exactly (gpuport reads ==/in on "
                    f"{self.form.product_attribute} and {self.form.profile_attribute}, device.driver, "
                    f"type, and a lower bound on {self.form.memory_capacity}); say it in those terms"
                )

    def _term(self, term: str) -> bool:
        while term.startswith("(") and term.endswith(")"):
            term = term[1:-1].strip()
        if driver := _DRIVER.fullmatch(term):
            return _text(driver.groups()) == self.form.driver
        if memory := _MEMORY.fullmatch(term):
            domain, name, amount = _text(memory.groups()[:2]), memory.group(3), _text(memory.groups()[3:5])
            if domain != self.form.driver or name != self.form.memory_capacity:
                return False
            return self._at_least(amount, memory.group(6) == ">")
        attribute = _ATTRIBUTE.fullmatch(term)
        if not attribute or _text(attribute.groups()[:2]) != self.form.driver:
            return False
        name, operator = attribute.group(3), attribute.group(4)
        values = _values(attribute.group(5), operator)
        if values is None:
            return False
        if name == "type":
            return set(values) == {"mig" if self.mig else (self.form.whole_type or "gpu")}
        if name == self.form.product_attribute:
            self.narrow(
                frozenset(m for m, names in self.form.product_names.items() if set(names) & set(values))
            )
            return True
        if name == self.form.profile_attribute and self.mig and len(values) == 1:
            try:
                self.profile = MigProfile.parse(values[0])
            except ProfileError:
                return False
            return True
        return False

    def _at_least(self, amount: str, strictly: bool) -> bool:
        try:
            wanted = quantity.parse(amount)
        except quantity.QuantityError:
            return False
        if self.mig:
            return False  # a slice is chosen by its profile, which says its memory; say that instead
        models = self.cloud_map.models_offered(self.catalogue)
        memory = {
            m: Decimal(self.catalogue.models[m].memory_gb) * 2**30
            for m in models
            if m in self.catalogue.models
        }
        self.narrow(frozenset(m for m, b in memory.items() if (b > wanted if strictly else b >= wanted)))
        return True


def dra_map_for(device_class: str, maps: tuple[CloudMap, ...]) -> tuple[CloudMap, bool] | None:
    """The loaded map whose DRA form names this device class, and whether it is its MIG class."""
    for cloud_map in maps:
        form = cloud_map.dra
        if form is not None and device_class in (form.whole_class, form.mig_class):
            return cloud_map, device_class == form.mig_class
    return None


def read_claim(
    claim_spec: Mapping[str, Any], maps: tuple[CloudMap, ...], catalogue: Catalogue
) -> list[ClaimedDevices]:
    """The devices a claim's spec (a ResourceClaimTemplate's spec.spec) asks for, request by request."""
    found_devices = claim_spec.get("devices")
    devices: Mapping[str, Any] = found_devices if isinstance(found_devices, Mapping) else {}
    for refused in ("constraints", "config"):
        if devices.get(refused):
            raise UnreadableClaim(
                f"its devices.{refused} has no device-plugin equivalent (it would be dropped silently)"
            )
    requests = devices.get("requests")
    if not isinstance(requests, list):
        raise UnreadableClaim("its devices.requests is not a list")
    found = []
    for request in requests:
        if not isinstance(request, Mapping):
            raise UnreadableClaim("a request is not a mapping")
        exact = request.get("exactly", request)
        if not isinstance(exact, Mapping):
            raise UnreadableClaim(f"request {request.get('name')!r}: exactly is not a mapping")
        if "firstAvailable" in request:
            raise UnreadableClaim(f"request {request.get('name')!r} lists alternatives (firstAvailable)")
        found.append(_read_request(request.get("name"), exact, maps, catalogue))
    if not found:
        raise UnreadableClaim("it asks for no device")
    return found


def _read_request(
    name: Any, exact: Mapping[str, Any], maps: tuple[CloudMap, ...], catalogue: Catalogue
) -> ClaimedDevices:
    device_class = exact.get("deviceClassName")
    known = dra_map_for(str(device_class), maps)
    if known is None:
        raise UnreadableClaim(
            f"request {name!r} asks for device class {device_class!r}, which no loaded map names"
        )
    cloud_map, mig = known
    if exact.get("allocationMode", "ExactCount") != "ExactCount" or exact.get("adminAccess"):
        raise UnreadableClaim(f"request {name!r} asks for every device of a node or for admin access")
    count = exact.get("count", 1)
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise UnreadableClaim(f"request {name!r} has count {count!r}")
    assert cloud_map.dra is not None
    reading = _Reading(cloud_map.dra, cloud_map, catalogue, mig)
    selectors = exact.get("selectors") or []
    if not isinstance(selectors, list):
        raise UnreadableClaim(f"request {name!r}: selectors is not a list")
    for selector in selectors:
        cel = selector.get("cel") if isinstance(selector, Mapping) else None
        expression = cel.get("expression") if isinstance(cel, Mapping) else None
        if not isinstance(expression, str):
            raise UnreadableClaim(f"request {name!r} has a selector that is not CEL")
        reading.selector(expression)
    if reading.models is not None and not reading.models:
        raise UnreadableClaim(f"request {name!r} matches no GPU model gpuport knows")
    if mig and reading.profile is None:
        raise UnreadableClaim(f"request {name!r} asks for a MIG device without saying which profile")
    return ClaimedDevices("mig" if mig else "whole", count, cloud_map.vendor, reading.models, reading.profile)
