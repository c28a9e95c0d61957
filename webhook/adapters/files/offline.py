"""`gpuport translate`: the admission core, run offline over multi-document YAML manifests.

Each pod template is checked and translated exactly as the webhook would translate a Pod made from it;
the resulting JSON Patch is applied to the round-trip YAML so comments and key order survive.

Why one module: what one file's documents say to each other (claims beside the workloads that use
them, templates and classes left out with them, Kueue objects beside the workloads they admit) is
decided over the whole file at once; the text of each document is `yamledit`'s.
"""

import copy
import difflib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

import jsonpatch
import yaml
from ruamel.yaml.error import YAMLError

from webhook.adapters.files.amounts import quoting, write_counts
from webhook.adapters.files.yamledit import (
    BOM,
    edit_document,
    newline_of,
    round_trip,
    set_units,
    split_documents,
)
from webhook.adapters.files.yamlstyle import MARKER
from webhook.adapters.files.yamlstyle import plain as as_plain
from webhook.core.asks.claims import DEVICE_CLASS
from webhook.core.asks.compute_domains import channel_templates
from webhook.core.asks.pod_claims import ClaimsBeside, claim_object_key, namespace_of
from webhook.core.asks.unread import gives_gpus
from webhook.core.deciding.admission import decide_template
from webhook.core.deciding.context import Context
from webhook.core.migration.kueue import flavor_gaps, is_kueue, queue_gaps
from webhook.core.rewriting.compute_class import class_gpus, is_compute_class
from webhook.core.rewriting.foreign import gpu_labels_elsewhere
from webhook.core.rewriting.node_kind_fields import node_kind_warning
from webhook.core.rewriting.podedits import apply_edits
from webhook.core.rewriting.spark_gpus import spark_refusals
from webhook.core.rewriting.topology_keys import plan_topology
from webhook.core.rewriting.topology_terms import KAI_ANNOTATIONS, KAI_TOPOLOGY, WORKLOAD_ANNOTATIONS
from webhook.core.rewriting.translate import TRANSLATED_FROM
from webhook.core.vocabulary.templates import Fitted, carried_ops, fit_to_kind, pod_templates, unread_reason
from webhook.core.vocabulary.workloads import container_specs, read_pod, resource_section


class ManifestError(ValueError):
    pass


@dataclass
class TemplateResult:
    document: int
    kind: str
    name: str
    path: str
    allowed: bool
    messages: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    patch: list[dict[str, Any]] = field(default_factory=list)
    claim_templates: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Document:
    """One YAML document: its text as written, a parse kept untouched for positions, and a parse the
    translation edits."""

    text: str
    original: Any
    edited: Any
    changed: list[str] = field(default_factory=list)  # JSON Pointers of the templates translated
    left_out: bool = False  # a ResourceClaimTemplate no translated workload refers to any more


@dataclass
class Manifest:
    documents: list[Document]
    bom: str = ""
    # ResourceClaimTemplates the translated workloads refer to (DRA targets), by (namespace, name):
    # printed after the documents, so one `kubectl apply` creates what the pods need.
    claim_templates: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    # The node-label keys a translation says again in other words (GPU models, partitions, sharing,
    # capacity: every loaded map's); None: any. A removed node-selector entry of another key (an old
    # node pool's name) is not what an added one says: its line and comment go.
    said_again: dict[str, str] | None = None


def load_documents(text: str, source: str) -> Manifest:
    bom = BOM if text.startswith(BOM) else ""
    documents, line = [], 1
    for chunk in split_documents(text.removeprefix(BOM)):
        try:
            original, edited = round_trip().load(chunk), round_trip().load(chunk)
        except YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" line {line + mark.line}" if mark else ""
            raise ManifestError(f"{source}:{where}: not valid YAML: {exc}") from None
        documents.append(Document(chunk, original, edited))
        line += chunk.count("\n")
    return Manifest(documents, bom)


def dump_documents(manifest: Manifest) -> str:
    """Every document as written, but for the entries translation changed; then the claim
    templates the translated pods refer to."""
    kept = [d for d in manifest.documents if not d.left_out]
    # The file's head comment sits above its first document; when that one is left out (a claim
    # template the workloads no longer need), the comment still speaks of the file: it stays on top.
    head = (
        "".join(_leading_comments(d.text) for d in manifest.documents[: manifest.documents.index(kept[0])])
        if kept
        else ""
    )
    text = head + "".join(
        edit_document(d.text, d.original, d.edited, d.changed, manifest.said_again) if d.changed else d.text
        for d in kept
    )
    if manifest.claim_templates:
        newline = newline_of(text)
        if text and not text.endswith(("\n", "\r")):
            text += newline
        for template in manifest.claim_templates.values():
            dumped = yaml.safe_dump(
                template, sort_keys=False, default_flow_style=False, width=1000, allow_unicode=True
            )
            text += "---" + newline + dumped.replace("\n", newline)
    return manifest.bom + text


def _leading_comments(text: str) -> str:
    """The full-line comments a document's text opens with (after its `---`), as written."""
    lines = text.splitlines(keepends=True)
    if lines and MARKER.match(lines[0]):
        lines = lines[1:]
    comments = []
    for line in lines:
        if line.strip() and not line.lstrip().startswith("#"):
            break
        comments.append(line)
    return "".join(comments) if any(line.strip() for line in comments) else ""


def translate_documents(manifest: Manifest, context: Context) -> list[TemplateResult]:
    """Translate every pod template in place; return what was decided for each."""
    manifest.said_again = _said_again(context)
    results = []
    claim_docs = [
        d.edited
        for d in manifest.documents
        if claim_object_key(d.edited) is not None or any(channel_templates(d.edited))
    ]
    beside = ClaimsBeside([as_plain(d) for d in claim_docs])
    referred = _referred_templates(manifest)
    for number, document in enumerate(manifest.documents):
        doc = document.edited
        if not hasattr(doc, "get"):
            continue
        kind, name = str(doc.get("kind", "?")), str((doc.get("metadata") or {}).get("name", ""))
        if refused := spark_refusals(doc, context.target, context.dialects):  # no rewrite mends it
            results.append(TemplateResult(number, kind, name, "/", allowed=False, messages=refused))
            continue
        reason = unread_reason(doc, gives_gpus(context.dialects))
        reason = reason or node_kind_warning(doc, context.target, context.dialects)
        if reason:
            results.append(TemplateResult(number, kind, name, "/", allowed=True, warnings=[reason]))
        recorded: dict[int, Any] = {}  # one metadata: several templates' records of the ask
        for path, template in list(pod_templates(doc)):
            plain = as_plain(template)
            result = TemplateResult(number, kind, name, path or "/", allowed=True)
            decided = decide_template(plain, context, hints=False, templates=beside.lookup(namespace_of(doc)))
            # What the kind's controller passes on to its pods, or needs, which the webhook never sees.
            fitted = fit_to_kind(
                doc, plain.get("spec") or {}, decided.rewrite.patch if decided.rewrite else []
            )
            if fitted.refusals and decided.rewrite is not None:
                lookup = beside.lookup(namespace_of(doc))
                fitted = _left_to_the_webhook(doc, plain, decided.rewrite.patch, context, lookup) or fitted
            if decided.rewrite is None or fitted.refusals:
                result.allowed, result.messages = False, fitted.refusals or decided.refusals
                if fitted.refusals and decided.rewrite is not None:
                    result.messages = [
                        m + _pin_instead(decided.rewrite.patch, context) for m in fitted.refusals
                    ]
            else:
                _, warnings, result.claim_templates = decided.rewrite
                result.patch, result.warnings = fitted.patch, [*warnings, *fitted.notes]
                if not result.patch and not result.warnings:
                    result.warnings = _gpu_nodes_elsewhere(plain.get("spec") or {}, context)
                _keep_templates(manifest, doc, result.claim_templates)
                if result.patch:
                    edits_metadata = any(op["path"].startswith("/metadata") for op in result.patch)
                    if edits_metadata and template.get("metadata") is None and hasattr(template, "insert"):
                        template.insert(0, "metadata", {})  # where a reader expects it: before the spec
                    _apply(template, plain, result.patch)
                    document.changed.append(path)
                    annotations = (template.get("metadata") or {}).get("annotations")
                    if annotations is not None and TRANSLATED_FROM in annotations:
                        entries = recorded.setdefault(id(annotations), (annotations, []))[1]
                        entries.append((path, annotations[TRANSLATED_FROM]))
            results.append(result)
        _merge_records(recorded)
        mine = [r for r in results if r.document == number]
        if document.changed and all(r.allowed for r in mine):
            # Only beside pods translated here: a workload refused, or left in its own words, keeps its
            # placement as written (half a translation would say one cloud's nodes and the other's GPUs).
            placement = _exclusive_topology(number, document, kind, name, context)
            results += placement
            if not all(r.allowed for r in placement):
                # The other way round too: pods translated beside a placement refused would be half of
                # one. The workload is printed as written, without claim templates only it referred to.
                document.changed = []
                _drop_templates(manifest, doc, number, results)
    still = _referred_templates(manifest)
    for number, document in enumerate(manifest.documents):
        key = claim_object_key(document.edited)
        if key is not None and key in referred and key not in still:
            # Its workloads ask for the target's resources now; a cluster without DRA could not
            # even store it. (A ResourceClaim is never left out: pods outside these files may use it.)
            document.left_out = True
            why = f"gpuport: left out: its workloads ask for {context.target.name}'s GPU resources now"
            results.append(TemplateResult(number, "ResourceClaimTemplate", key[1], "/", True, warnings=[why]))
    results += _leave_out_classes(manifest, context.target.name)
    results += _kueue_gaps(manifest, context)
    results += _compute_classes(manifest, context)
    return results


def _compute_classes(manifest: Manifest, context: Context) -> list[TemplateResult]:
    """The GPUs a GKE ComputeClass in the file gave the pods that select it, said where they are lost."""
    results = []
    for number, document in enumerate(manifest.documents):
        doc = document.edited
        if hasattr(doc, "get") and is_compute_class(doc):
            plain = as_plain(doc)
            if said := class_gpus(plain, context.target, context.dialects):
                name = str((plain.get("metadata") or {}).get("name", ""))
                results.append(TemplateResult(number, "ComputeClass", name, "/", True, warnings=said))
    return results


def _said_again(context: Context) -> dict[str, str]:
    """Every node-label key a translation may say in the target's words, with what it says: each map's
    GPU keys (model, partition, sharing labels) and capacity labels."""
    capacity = {
        key: "capacity"
        for m in context.dialects.maps
        for key, _ in (*m.node_labels.spot, *m.node_labels.on_demand, *m.node_labels.reserved)
    }
    return {key: "gpu" for key in context.dialects.selector_keys()} | capacity


def _exclusive_topology(
    number: int, document: Document, kind: str, name: str, context: Context
) -> list[TemplateResult]:
    """JobSet's and LeaderWorkerSet's exclusive placement written on the workload (the JobSet, a
    replicated job's template, the LeaderWorkerSet), which their controllers copy to the pods, and KAI's
    placement levels on any workload (its pod grouper reads the pods' top owner): each topology key
    translated as the webhook translates it on pods (topology_keys.py)."""
    # Another kind's JobSet or LWS annotation is read by no controller that places pods.
    read = (
        (*WORKLOAD_ANNOTATIONS, *KAI_ANNOTATIONS)
        if kind in ("JobSet", "LeaderWorkerSet")
        else KAI_ANNOTATIONS
    )
    doc = document.edited
    places: list[tuple[str, Any]] = [("/metadata", doc.get("metadata"))]
    spec = doc.get("spec")
    jobs = spec.get("replicatedJobs") if kind == "JobSet" and isinstance(spec, dict) else None
    for index, job in enumerate(jobs if isinstance(jobs, list) else ()):
        template = job.get("template") if isinstance(job, dict) else None
        if isinstance(template, dict):
            places.append((f"/spec/replicatedJobs/{index}/template/metadata", template.get("metadata")))
    results = []
    for path, metadata in places:
        annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
        if not isinstance(annotations, dict) or annotations.keys().isdisjoint(read):
            continue
        plain = {k: str(v) for k, v in annotations.items() if k in read or k == KAI_TOPOLOGY}
        plan = plan_topology({}, plain, context.target, context.dialects, translated=True)
        where = f"{path}/annotations"
        if plan.refusals:
            results.append(TemplateResult(number, kind, name, where, allowed=False, messages=plan.refusals))
            continue
        view: dict[str, Any] = {"metadata": {"annotations": dict(plain)}, "spec": {}}
        said = apply_edits(view, plan.edits)
        if not said:
            continue
        kept = view["metadata"]["annotations"]
        for key in plain:
            if key not in kept:  # a preference no node here can score is removed, said
                del annotations[key]
        for key, value in kept.items():
            annotations[key] = value
        if not annotations:  # every one removed: no empty map left behind
            del metadata["annotations"]
        document.changed.append(path)
        results.append(TemplateResult(number, kind, name, where, allowed=True, warnings=said))
    return results


def _gpu_nodes_elsewhere(spec: Any, context: Context) -> list[str]:
    """For a pod asking no GPU that selects another platform's GPU nodes by their labels: said, as it
    runs on no node here (gpuport translates GPU asks, and this pod has none). Only where the target's
    map says what its nodes carry: a scheduler layer's map (generic, HAMi...) runs on any cloud."""
    if not context.target.node_labels.owned or not isinstance(spec, dict) or spec.get("resourceClaims"):
        return []
    keys = gpu_labels_elsewhere(spec, context.target, context.dialects)
    # The names its containers write, read as every step reads a pod (init containers and sidecars too).
    if not keys or any(map(gives_gpus(context.dialects), read_pod({"spec": spec}).resource_names)):
        return []
    target, labels = context.target.name, "a GPU label" if len(keys) == 1 else "GPU labels"
    return [
        f"gpuport: asks for no GPU, so nothing is translated, yet it selects nodes by {', '.join(keys)} "
        f"({labels} of another platform), which no {target} node carries: its pods run on no {target} "
        f"node (select {target}'s GPU nodes by a label they carry)"
    ]


def _left_to_the_webhook(
    doc: Any, plain: dict[str, Any], patch: list[dict[str, Any]], context: Context, templates: Any
) -> Fitted | None:
    """A translated pod of a kind that does not pass every pod field (NIM): when the fields it cannot
    hold are what the webhook gives the pod by itself once the rest is written (GKE's whole-GPU terms,
    which every pod in GKE's words gets), the rest is written and those left to the webhook, as for a
    pod already in the target's words; None when the webhook would not give them."""
    written = carried_ops(doc, patch)
    trial = copy.deepcopy(plain)
    jsonpatch.apply_patch(trial, written, in_place=True)
    again = decide_template(trial, context, hints=False, templates=templates)
    if again.rewrite is None:
        return None
    added = [op for op in again.rewrite.patch if op not in carried_ops(doc, again.rewrite.patch)]
    if _ops(added) != _ops([op for op in patch if op not in written]):
        return None
    return Fitted(written, fit_to_kind(doc, trial.get("spec") or {}, again.rewrite.patch).notes, [])


def _ops(patch: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(op, sort_keys=True) for op in patch)


def _pin_instead(patch: list[dict[str, Any]], context: Context) -> str:
    """For a kind that takes a nodeSelector only: the single label value, or the values one of which,
    that would pin the GPUs the translation's required node affinity names."""
    found = [
        (e["key"], tuple(e["values"]))
        for op in patch
        if op["path"].startswith("/spec/affinity")
        for e in _expressions(op.get("value"))
        if e.get("operator") == "In" and isinstance(e.get("values"), list)
    ]
    for key, values in found:
        said = [f"{label}: {value}" for label, value in context.target.single_pins(key, values)]
        if len(values) > 1 and key in context.target.selector_keys():
            said.append(f"{key}: one of {', '.join(values)}")
        if said:
            return f"; pin the GPUs in a nodeSelector instead: {' or '.join(said)}"
    return ""


def _expressions(value: Any) -> list[Any]:
    """Every matchExpressions entry under an affinity value."""
    if isinstance(value, dict):
        here = value.get("matchExpressions")
        found = [e for e in here if isinstance(e, dict)] if isinstance(here, list) else []
        return found + [e for k, v in value.items() if k != "matchExpressions" for e in _expressions(v)]
    if isinstance(value, list):
        return [e for v in value for e in _expressions(v)]
    return []


def written_device_classes(manifest: Manifest) -> tuple[dict[str, Any], ...]:
    """The DeviceClasses among the documents, as plain values (what the cluster they are for has)."""
    return tuple(
        as_plain(d.edited)
        for d in manifest.documents
        if (claim_object_key(d.edited) or ("", ""))[1].startswith(DEVICE_CLASS)
    )


def _merge_records(recorded: dict[int, Any]) -> None:
    """Where several templates share one metadata (an InferenceService's components all take its own),
    each translation's record of the original ask would overwrite the last: they are kept side by
    side instead, by the template they came from."""
    for annotations, entries in recorded.values():
        if len(entries) > 1:
            merged = {path: json.loads(value) for path, value in entries}
            annotations[TRANSLATED_FROM] = json.dumps(merged, sort_keys=True, separators=(",", ":"))


def _kueue_gaps(manifest: Manifest, context: Context) -> list[TemplateResult]:
    """What the file's Kueue queues and flavors no longer cover of its translated workloads."""
    kinds = ("ClusterQueue", "ResourceFlavor")
    kueue = [
        (number, d.edited)
        for number, d in enumerate(manifest.documents)
        if hasattr(d.edited, "get") and any(is_kueue(d.edited, kind) for kind in kinds)
    ]
    if not kueue:
        return []  # most files: their templates are not walked again
    asked: set[str] = set()
    for document in manifest.documents:
        doc = document.edited
        for _, template in pod_templates(doc) if hasattr(doc, "get") else ():
            spec = template.get("spec")
            for container in container_specs(spec if hasattr(spec, "get") else {}):
                for section in ("limits", "requests"):
                    names = resource_section(container, section)
                    asked |= {n for n in names if context.target.is_accelerator(n)}
    results = []
    for number, doc in kueue:
        try:
            plain = as_plain(doc)
        except (TypeError, ValueError):
            continue  # a document JSON cannot hold (a {{template}} key): not Kueue's to read
        kind = str(plain["kind"])
        if kind == "ClusterQueue":
            said = queue_gaps(plain, asked, context.target, context.dialects)
        else:
            said = flavor_gaps(plain, context.target, context.dialects)
        if said:
            name = str((plain.get("metadata") or {}).get("name", ""))
            results.append(TemplateResult(number, kind, name, "/", True, warnings=said))
    return results


def _leave_out_classes(manifest: Manifest, target: str) -> list[TemplateResult]:
    """DeviceClasses only the templates left out asked for go with them (a cluster without DRA could
    not store them either); one a claim still written asks for stays."""
    kept: set[str] = set()
    gone: set[str] = set()
    for document in manifest.documents:
        key = claim_object_key(document.edited)
        if key is not None and not key[1].startswith(DEVICE_CLASS):
            (gone if document.left_out else kept).update(_classes_named(document.edited))
    results = []
    for number, document in enumerate(manifest.documents):
        key = claim_object_key(document.edited)
        if key is None or not key[1].startswith(DEVICE_CLASS):
            continue
        name = key[1].removeprefix(DEVICE_CLASS)
        if name in gone and name not in kept:
            document.left_out = True
            why = f"gpuport: left out: only claims of workloads that ask for {target}'s GPU resources used it"
            results.append(TemplateResult(number, "DeviceClass", name, "/", True, warnings=[why]))
    return results


def _classes_named(value: Any) -> set[str]:
    """Every deviceClassName in a claim or template, wherever the API version nests it."""
    if hasattr(value, "items"):
        found = {value["deviceClassName"]} if isinstance(value.get("deviceClassName"), str) else set()
        return found.union(*(_classes_named(v) for _, v in value.items()))
    if isinstance(value, list):
        return set().union(*(_classes_named(v) for v in value))
    return set()


def _referred_templates(manifest: Manifest) -> set[tuple[str, str]]:
    referred = set()
    for document in manifest.documents:
        doc = document.edited
        if not hasattr(doc, "get"):
            continue
        for _, template in pod_templates(doc):
            spec = template.get("spec") if hasattr(template, "get") else None
            claims = spec.get("resourceClaims") if spec is not None and hasattr(spec, "get") else None
            for claim in claims if isinstance(claims, list) else ():
                name = claim.get("resourceClaimTemplateName") if hasattr(claim, "get") else None
                if isinstance(name, str):
                    referred.add((namespace_of(doc), name))
    return referred


def _keep_templates(manifest: Manifest, doc: Any, templates: list[dict[str, Any]]) -> None:
    """The workload's templates, in its namespace when it names one (else kubectl's namespace)."""
    namespace = namespace_of(doc)
    for template in templates:
        placed = copy.deepcopy(template)
        if namespace:
            placed["metadata"] = {
                "name": placed["metadata"]["name"],
                "namespace": namespace,
                **{k: v for k, v in placed["metadata"].items() if k != "name"},
            }
        manifest.claim_templates[(namespace, placed["metadata"]["name"])] = placed


def _drop_templates(manifest: Manifest, doc: Any, number: int, results: list[TemplateResult]) -> None:
    """The claim templates document `number`'s results kept that no other document's result refers to."""
    namespace = namespace_of(doc)
    others = {t["metadata"]["name"] for r in results if r.document != number for t in r.claim_templates}
    for result in (r for r in results if r.document == number):
        for template in result.claim_templates:
            if template["metadata"]["name"] not in others:
                manifest.claim_templates.pop((namespace, template["metadata"]["name"]), None)


def _apply(template: Any, plain: dict, patch: list[dict[str, Any]]) -> None:
    """Apply the webhook's patch to the round-trip template in place (comments and quotes inside the
    edited entries survive, counts are as the author writes them); where anchors make two entries
    one node, set the entries instead."""
    styles = quoting(template)
    try:
        jsonpatch.apply_patch(template, patch, in_place=True)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException):
        set_units(template, jsonpatch.apply_patch({"metadata": {}, **plain}, patch))
    write_counts(template, styles)


def unified_diff(before: str, after: str, source: str) -> str:
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            f"{source} (as written)",
            f"{source} (translated)",
        )
    )


def results_json(results: list[TemplateResult]) -> str:
    return json.dumps([asdict(r) for r in results], indent=2, ensure_ascii=False)
