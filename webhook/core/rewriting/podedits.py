"""Edits on a Pod-shaped view: the few spec fields translation changes (a DRA claim's entries
included; dra.py says what the claim asks for), changed in place and only as far as asked. Each
edit keeps what the author wrote around it (other selector keys, other affinity terms, the value of
an amount that already means the same) and reports whether it changed anything, so a pod already in
the target's words comes out byte for byte.

The rewriting steps decide without touching the pod: they plan a list of `PodEdit`s, each with the
words that say it, and `apply_edits` makes them, in order, in one place. An edit that finds the pod
already saying what it would write changes nothing and says nothing.

Why one module of ~430 lines: each kind of `PodEdit` is made by the edit function beside it, and
apply_edits makes them all; apart, every edit would be planned from one module and made in another.
"""

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import orjson

from webhook.core.asks.demand import ContainerAsk
from webhook.core.rewriting.topology_terms import rewrite_topology
from webhook.core.vocabulary.errors import BadInput
from webhook.core.vocabulary.quantity import parse
from webhook.core.vocabulary.workloads import REQUIRED_NODE_AFFINITY, mapping_at


class MalformedField(BadInput):
    """A field gpuport must edit holds the wrong kind of value (a map where Kubernetes reads a list):
    the API server would refuse the pod too, and no edit can be made into it."""


def editable(parent: dict[str, Any], key: str, kind: type[dict[str, Any]] | type[list[Any]]) -> Any:
    """parent[key], to edit in place: made an empty `kind` when absent or null. YAML's `annotations:`
    with nothing under it is null, which the API server reads as absent; setdefault would hand back
    the None. Any other value of the wrong kind is a MalformedField."""
    value = parent.get(key)
    if value is None:
        value = parent[key] = kind()
    elif not isinstance(value, kind):
        raise MalformedField(f"{key} is {_kind_of(value)}; Kubernetes reads {_kind_of(kind())} there")
    return value


def terms_to_edit(pod_spec: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The required node-affinity terms, to edit in place (the list in the spec); None when there are
    none. Readers skip a term or expression they cannot read; an edit cannot, so each term and each of
    its matchExpressions must be a map, else MalformedField."""
    required = mapping_at(pod_spec, REQUIRED_NODE_AFFINITY)
    terms = required.get("nodeSelectorTerms") if required is not None else None
    if terms is None:
        return None
    _maps(terms, "nodeSelectorTerms")
    for term in terms:
        expressions = term.get("matchExpressions")
        if expressions is not None:
            _maps(expressions, "matchExpressions")
    return terms  # type: ignore[no-any-return]  # each a dict: checked just above


def _maps(values: Any, key: str) -> None:
    if not isinstance(values, list):
        raise MalformedField(f"{key} is {_kind_of(values)}; Kubernetes reads a list there")
    for value in values:
        if not isinstance(value, dict):
            raise MalformedField(f"{key} holds {_kind_of(value)}; Kubernetes reads maps there")


def _kind_of(value: object) -> str:
    if isinstance(value, Mapping):
        return "a map"
    if isinstance(value, list):
        return "a list"
    return f"the {type(value).__name__} {value!r}"


def add_tolerations(spec: dict[str, Any], tolerations: Sequence[Mapping[str, Any]]) -> list[str]:
    """The map's tolerations for its GPU nodes' taints, each added once; one warning per addition."""
    warnings = []
    for toleration in tolerations:
        present = editable(spec, "tolerations", list)
        if dict(toleration) not in present:
            present.append(dict(toleration))
            warnings.append(f"gpuport: toleration {toleration.get('key')} added")
    return warnings


def missing_tolerations(spec: Mapping[str, Any], tolerations: Sequence[Mapping[str, Any]]) -> bool:
    written = spec.get("tolerations")
    present = written if isinstance(written, list) else []
    return any(dict(t) not in present for t in tolerations)


def rewrite_resources(spec: dict[str, Any], ask: ContainerAsk, new: dict[str, str]) -> None:
    container = spec[ask.list_name][ask.index]
    resources = editable(container, "resources", dict)
    # The sections that carry the ask as written (a set test in C, not a generator per name).
    carrying = [
        s
        for s in ("limits", "requests")
        if isinstance(resources.get(s), dict) and not resources[s].keys().isdisjoint(ask.written)
    ]
    if new and not carrying:
        # Asked by annotation (KAI): the resources are new, and limits alone ask for them.
        editable(resources, "limits", dict).update(new)
        _agree(resources, new)
        return
    for section in carrying:
        values = resources[section]
        for name in ask.written:
            if name not in new:
                values.pop(name, None)
        if not values and not new:
            del resources[section]  # the ask moved to annotations (KAI): no empty section left
        for name, amount in new.items():
            # Keep the value as written when it means the same (a YAML 1 stays 1, not "1").
            if str(values.get(name)) != amount:
                values[name] = amount
    if not new and not resources:
        del container["resources"]
    else:
        _agree(resources, new)


def _agree(resources: dict[str, Any], new: dict[str, str]) -> None:
    """A section that did not carry the ask may still name a resource the ask now uses (asked as
    "0" beside it): it must say the new amount too, or the API server refuses the pod for an
    extended resource whose request differs from its limit."""
    for section in ("limits", "requests"):
        values = resources.get(section)
        if isinstance(values, dict):
            for name, amount in new.items():
                if name in values and str(values[name]) != amount:
                    values[name] = amount


def remove_selectors(spec: dict[str, Any], keys: frozenset[str]) -> dict[str, Any]:
    removed: dict[str, Any] = {}
    selector = spec.get("nodeSelector")
    if isinstance(selector, dict):
        dropped = {k: selector.pop(k) for k in sorted(keys) if k in selector}
        if dropped:
            removed["nodeSelector"] = dropped
        if not selector:
            del spec["nodeSelector"]
    terms = terms_to_edit(spec)
    if terms is not None:
        dropped_expressions = []
        kept_terms = []
        for term in terms:
            expressions = term.get("matchExpressions") or []
            keep = [e for e in expressions if e.get("key") not in keys]
            dropped_expressions += [e for e in expressions if e.get("key") in keys]
            if keep or term.get("matchFields"):
                if keep:
                    term["matchExpressions"] = keep
                else:
                    term.pop("matchExpressions", None)
                kept_terms.append(term)
            elif not expressions:
                kept_terms.append(term)
        if dropped_expressions:
            removed["nodeAffinity"] = dropped_expressions
            affinity = spec["affinity"]  # the terms were found under it
            node_affinity = affinity["nodeAffinity"]
            if kept_terms:
                node_affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] = (
                    kept_terms
                )
            else:
                # An empty term matches no node: drop the requirement rather than keep an empty one.
                del node_affinity["requiredDuringSchedulingIgnoredDuringExecution"]
                if not node_affinity:
                    del affinity["nodeAffinity"]
                if not affinity:
                    del spec["affinity"]
    return removed


def require_label(spec: dict[str, Any], key: str, values: tuple[str, ...]) -> bool:
    """Require a node label value: nodeSelector for one value, required node affinity for several.
    Returns False when the pod already says exactly that."""
    if len(values) == 1:
        selector = editable(spec, "nodeSelector", dict)
        if selector.get(key) == values[0]:
            return False
        selector[key] = values[0]
        return True
    return require_expression(spec, {"key": key, "operator": "In", "values": list(values)})


def require_expression(spec: dict[str, Any], expression: dict[str, Any]) -> bool:
    """Add a required node-affinity expression to every term (terms are ORed: it must hold in each).
    Returns False when every term already has it."""
    terms = terms_to_edit(spec)
    if terms:
        if all(expression in (term.get("matchExpressions") or []) for term in terms):
            return False
        for term in terms:
            editable(term, "matchExpressions", list).append(copy.deepcopy(expression))
        return True
    node_affinity = editable(editable(spec, "affinity", dict), "nodeAffinity", dict)
    required = editable(node_affinity, "requiredDuringSchedulingIgnoredDuringExecution", dict)
    required["nodeSelectorTerms"] = [{"matchExpressions": [expression]}]
    return True


def add_claim(
    spec: dict[str, Any], list_name: str, index: int, name: str, template: str, request: str = ""
) -> None:
    """Give the pod a claim made from `template` and the container a reference to it (to one of its
    requests, when `request` names one)."""
    claims = editable(spec, "resourceClaims", list)
    claims[:] = [c for c in claims if not (isinstance(c, Mapping) and c.get("name") == name)]
    claims.append({"name": name, "resourceClaimTemplateName": template})
    used = editable(editable(spec[list_name][index], "resources", dict), "claims", list)
    if not any(isinstance(c, Mapping) and c.get("name") == name for c in used):
        used.append({"name": name, "request": request} if request else {"name": name})


def remove_claim(spec: dict[str, Any], list_name: str, index: int, name: str) -> None:
    """Take the claim from the container, and from the pod once no container refers to it."""
    resources = spec[list_name][index].get("resources")
    used = resources.get("claims") if isinstance(resources, dict) else None
    if isinstance(used, list):
        resources["claims"] = [c for c in used if not (isinstance(c, Mapping) and c.get("name") == name)]
        if not resources["claims"]:
            del resources["claims"]
    still_used = any(
        name in _claims_used(c) for key in ("initContainers", "containers") for c in _list(spec, key)
    )
    if not still_used and isinstance(spec.get("resourceClaims"), list):
        kept = [c for c in spec["resourceClaims"] if not (isinstance(c, Mapping) and c.get("name") == name)]
        if kept:
            spec["resourceClaims"] = kept
        else:
            del spec["resourceClaims"]


def _list(mapping: Mapping[str, Any], key: str) -> list[Any]:
    found = mapping.get(key)
    return found if isinstance(found, list) else []


def _claims_used(container: Any) -> set[str]:
    resources = container.get("resources") if isinstance(container, Mapping) else None
    used = _list(resources, "claims") if isinstance(resources, Mapping) else []
    return {c["name"] for c in used if isinstance(c, Mapping) and isinstance(c.get("name"), str)}


# Each kind of PodEdit makes itself (`make`): on the view (metadata + the editable spec fields),
# adding its words to `said` when it changed something, and what it took away to `taken`, which
# RecordOriginal writes down. A method per kind, not one dispatch on the kind: matching twelve
# class patterns cost a translated pod 3 µs. Slotted dataclasses, not NamedTuples: a plan is made
# and used within one call, and a NamedTuple with defaults cost 0.7 µs to make, against 0.4.
Said = list[str]
Taken = dict[str, Any]


@dataclass(slots=True)
class Say:
    """Words with no edit: a choice made while planning (the firstAvailable alternative taken...)."""

    text: str

    def make(self, view: dict[str, Any], said: Said, taken: Taken) -> None:
        said.append(self.text)


@dataclass(slots=True)
class SetResources:
    """The container's GPU resources as the target names them (none: the ask moved elsewhere)."""

    ask: ContainerAsk
    resources: dict[str, str]

    def make(self, view: dict[str, Any], said: Said, taken: Taken) -> None:
        rewrite_resources(view["spec"], self.ask, self.resources)


@dataclass(slots=True)
class RenameResources:
    """Every container's resources under another name, the amount kept (a device the target asks
    for by another name: devices.py)."""

    renames: Mapping[str, str]  # name as written → the target's name
    text: str

    def make(self, view: dict[str, Any], said: Said, taken: Taken) -> None:
        renamed = False
        for list_name in ("initContainers", "containers"):
            for container in view["spec"].get(list_name) or ():
                resources = container.get("resources") if isinstance(container, dict) else None
                for section in ("limits", "requests"):
                    values = resources.get(section) if isinstance(resources, dict) else None
                    if not isinstance(values, dict):
                        continue
                    for old, new in self.renames.items():
                        if old in values:
                            amount = values.pop(old)
                            # Both names beside each other ask for the same device twice: one ask of
                            # both counts, never one count lost.
                            values[new] = (
                                amount if new not in values else _whole(parse(values[new]) + parse(amount))
                            )
                            renamed = True
        if renamed:
            said.append(self.text)


@dataclass(slots=True)
class DropClaim:
    container: tuple[str, int]  # (list name, index)
    name: str

    def make(self, view: dict[str, Any], said: Said, taken: Taken) -> None:
        remove_claim(view["spec"], *self.container, self.name)


@dataclass(slots=True)
class AddClaim:
    """A claim made from `template` for the container (for one `request` of it, when named)."""

    container: tuple[str, int]  # (list name, index)
    name: str
    template: str
    request: str = ""

    def make(self, view: dict[str, Any], said: Said, taken: Taken) -> None:
        add_claim(view["spec"], *self.container, self.name, self.template, self.request)


@dataclass(slots=True)
class DropSelectors:
    """Node-selector keys and required affinity expressions on these keys go; what they said goes
    into the pod's record of what it asked for before (RecordOriginal)."""

    keys: frozenset[str]

    def make(self, view: dict[str, Any], said: Said, taken: Taken) -> None:
        taken.update(remove_selectors(view["spec"], self.keys))


@dataclass(slots=True)
class RequireLabel:
    key: str
    values: tuple[str, ...]
    said: str = ""  # said only when the pod did not already require exactly that

    def make(self, view: dict[str, Any], said: Said, taken: Taken) -> None:
        if require_label(view["spec"], self.key, self.values) and self.said:
            said.append(self.said)


@dataclass(slots=True)
class RequireExpression:
    expression: Mapping[str, Any]
    said: str = ""  # said only when some term lacked it

    def make(self, view: dict[str, Any], said: Said, taken: Taken) -> None:
        if require_expression(view["spec"], dict(self.expression)) and self.said:
            said.append(self.said)


@dataclass(slots=True)
class AddTolerations:
    tolerations: Sequence[Mapping[str, Any]]  # each added once, and each addition said

    def make(self, view: dict[str, Any], said: Said, taken: Taken) -> None:
        said.extend(add_tolerations(view["spec"], self.tolerations))


@dataclass(slots=True)
class SetScheduler:
    name: str  # "" removes the pod's schedulerName
    said: str

    def make(self, view: dict[str, Any], said: Said, taken: Taken) -> None:
        if self.name:
            view["spec"]["schedulerName"] = self.name
        else:
            del view["spec"]["schedulerName"]
        said.append(self.said)


@dataclass(slots=True)
class DropAnnotation:
    key: str
    said: str

    def make(self, view: dict[str, Any], said: Said, taken: Taken) -> None:
        annotations = editable(view["metadata"], "annotations", dict)
        taken.setdefault("annotations", {})[self.key] = annotations.pop(self.key, None)
        said.append(self.said)


@dataclass(slots=True)
class SetAnnotation:
    key: str
    value: str
    said: str  # said only when the pod's value differs

    def make(self, view: dict[str, Any], said: Said, taken: Taken) -> None:
        annotations = editable(view["metadata"], "annotations", dict)
        if annotations.get(self.key) != self.value:
            annotations[self.key] = self.value
            said.append(self.said)


@dataclass(slots=True)
class RewriteTopology:
    """Topology keys only another platform's nodes carry: renamed to the target's (`renames`), or the
    terms, constraints and annotations naming them removed (`drops`); topology_keys.py decides."""

    renames: Mapping[str, str]
    drops: frozenset[str]
    said: tuple[str, ...]

    def make(self, view: dict[str, Any], said: Said, taken: Taken) -> None:
        if rewrite_topology(view, self.renames, self.drops):
            taken["topologyKeys"] = {**dict(self.renames), **dict.fromkeys(sorted(self.drops))}
            said.extend(self.said)


@dataclass(slots=True)
class RecordOriginal:
    """The annotation `key` records what the pod asked for before: `written`, and whatever the
    edits before this one took away."""

    key: str
    written: Mapping[str, Any]

    def make(self, view: dict[str, Any], said: Said, taken: Taken) -> None:
        record = compact_json({**self.written, **taken})
        editable(view["metadata"], "annotations", dict)[self.key] = record


PodEdit = (
    Say
    | SetResources
    | RenameResources
    | DropClaim
    | AddClaim
    | DropSelectors
    | RequireLabel
    | RequireExpression
    | AddTolerations
    | SetScheduler
    | DropAnnotation
    | SetAnnotation
    | RewriteTopology
    | RecordOriginal
)


def apply_edits(view: dict[str, Any], edits: Sequence[PodEdit]) -> list[str]:
    """Make `edits` on `view` (metadata + the editable spec fields) in order; the words of each edit
    that changed something, in the same order."""
    said: Said = []
    taken: Taken = {}
    for edit in edits:
        edit.make(view, said, taken)
    return said


def compact_json(value: Any) -> str:
    """`json.dumps(value, sort_keys=True, separators=(",", ":"))`, the same text, in C when it can be:
    the standard encoder cost a translated pod more than any other step of its rewrite. orjson writes
    the same text for strings, integers, booleans and null under string keys when all of it is
    printable ASCII (json.dumps escapes the rest, DEL included); floats (1e+16 against 1e16, NaN) and
    anything else go to the standard library."""
    if _plain(value):
        try:
            text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
        except orjson.JSONEncodeError:  # an integer past 64 bits
            text = ""
        if text and text.isascii() and "\x7f" not in text:  # json.dumps escapes DEL too
            return text
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _plain(value: Any) -> bool:
    kind = type(value)
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or (type(item) not in _PLAIN_LEAVES and not _plain(item)):
                return False
        return True
    if kind is list:
        return all(type(item) in _PLAIN_LEAVES or _plain(item) for item in value)
    return kind in _PLAIN_LEAVES


_PLAIN_LEAVES = frozenset({str, int, bool, type(None)})


def _whole(amount: Decimal) -> str:
    """A device count as a quantity string: "3", or the decimal as it is when not whole."""
    return str(int(amount)) if amount == amount.to_integral_value() else str(amount)
