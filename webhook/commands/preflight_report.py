"""Render a preflight Report as a terminal table, JSON for machines, or Markdown for a pull request."""

import json

from webhook.core.migration.preflight import Report


def as_json(report: Report) -> str:
    return json.dumps(
        {
            "source": report.source,
            "target": report.target,
            "total_weight": report.total_weight,
            "max_risk": report.max_risk,
            "passed": report.passed,
            "inventory_nodes": report.inventory_nodes,
            "unread": report.unread,
            "mig_slices": report.mig_slices,
            "workloads": [
                {
                    "workload": w.key,
                    "category": w.category,
                    "replicas": w.replicas,
                    "risk": w.risk,
                    "translated": w.translated,
                    "placement": w.placement,
                    "pending": w.pending,
                    "refused": w.refused,
                    "checks": [
                        {
                            "check": c.check,
                            "compat": c.compat,
                            "weight": c.weight,
                            "contribution": round(c.contribution, 4),
                            "why": c.why,
                        }
                        for c in w.checks
                    ],
                }
                for w in report.workloads
            ],
            "pending": {w.key: w.pending for w in report.workloads if w.pending},
            "refused": {w.key: w.refused for w in report.workloads if w.refused},
            "held_by_running_pods": {node: float(use) for node, use in sorted(report.held.items())},
            "waves": report.waves,
        },
        indent=2,
        ensure_ascii=False,
    )


def as_text(report: Report) -> str:
    lines = [
        f"gpuport preflight: {report.source} → {report.target} "
        f"(max risk {report.max_risk:.2f} of {report.total_weight:.2f})",
        "",
    ]
    for w in report.workloads:
        flag = "OK " if w.risk <= report.max_risk and not w.pending and not w.refused else "FAIL"
        lines.append(f"[{flag}] {w.key}  {w.category}, {w.replicas} replica(s), risk {w.risk:.3f}")
        for line in w.translated:
            lines.append(f"       becomes {line}")
        lines.append(f"       {'check':17} {'compat':>6} {'weight':>6} {'risk':>6}  why")
        for c in w.checks:
            lines.append(
                f"       {c.check:17} {c.compat:6.2f} {c.weight:6.2f} {c.contribution:6.3f}  {c.why}"
            )
        lines.append("")
    lines += _summary(report, bullet="  ")
    return "\n".join(lines) + "\n"


def as_markdown(report: Report) -> str:
    verdict = (
        "✅ every workload fits and is under the risk limit"
        if report.passed
        else "⚠️ some workloads are over the risk limit, refused or do not fit"
    )
    lines = [
        f"### gpuport preflight: `{report.source}` → `{report.target}`",
        "",
        f"{verdict} (max risk {report.max_risk:.2f} of total weight {report.total_weight:.2f}).",
        "",
        "| workload | category | replicas | risk | pending | refused |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for w in report.workloads:
        lines.append(
            f"| `{w.key}` | {w.category} | {w.replicas} | {w.risk:.3f} | {w.pending} | {w.refused} |"
        )
    for w in report.workloads:
        lines += ["", f"<details><summary><code>{w.key}</code>: risk {w.risk:.3f}</summary>", ""]
        lines += [f"Becomes: {line}" for line in w.translated]
        lines += ["", "| check | compat | weight | contribution | why |", "|---|---:|---:|---:|---|"]
        for c in w.checks:
            why = c.why.replace("|", "\\|")
            lines.append(f"| {c.check} | {c.compat:.2f} | {c.weight:.2f} | {c.contribution:.3f} | {why} |")
        lines += ["", "</details>"]
    lines += ["", *_summary(report, bullet="- ")]
    return "\n".join(lines) + "\n"


def _summary(report: Report, bullet: str) -> list[str]:
    lines = ["Summary (highest risk first):"]
    lines += [f"{bullet}{w.key}: {w.risk:.3f}" for w in report.workloads]
    pending = [w for w in report.workloads if w.pending]
    refused = [w for w in report.workloads if w.refused]
    if refused:  # said with or without an inventory: a refused replica fits nowhere
        lines.append("Refused by translation (never created, so fitting nowhere):")
        lines += [f"{bullet}{w.key}: {w.refused} of {w.replicas} replica(s)" for w in refused]
    if report.inventory_nodes is None:
        lines.append("Capacity: not checked (no --inventory).")
    elif pending:
        lines.append("Does not fit (stays Pending):")
        lines += [f"{bullet}{w.key}: {w.pending} of {w.replicas} replica(s)" for w in pending]
    elif refused:
        lines.append(f"Capacity: every translatable replica fits on the {report.inventory_nodes} node(s).")
    else:
        lines.append(f"Capacity: everything fits on the {report.inventory_nodes} inventory node(s).")
    if report.held:
        where = ", ".join(f"{node} {float(use):g}" for node, use in sorted(report.held.items()))
        lines.append(
            f"Held by running pods, so not free for what moves in (GPU-equivalents per node): {where}."
        )
    if report.unread:
        lines.append(
            "Not looked into (no risk can be given; the preflight fails until they are moved by hand):"
        )
        lines += [f"{bullet}{line}" for line in report.unread]
    if report.mig_slices:
        lines.append(
            f"MIG slices are asked by {len(report.mig_slices)} workload(s): the target's nodes must be "
            f"partitioned to hold them. Plan their layouts with `gpuport plan mig FILE... --from "
            f'{report.source} --to {report.target} --inventory NODES` (README: "Planning MIG layouts").'
        )
    lines.append("Wave plan (stateless first, then training, then stateful; lowest risk first):")
    lines += [f"{bullet}wave {n}: {', '.join(wave)}" for n, wave in enumerate(report.waves, 1)]
    return lines
