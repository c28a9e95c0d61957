"""The pure decision's cost, in process: what one admission costs gpuport's CPU before HTTP and JSON.

    .venv/bin/python bench/decision_bench.py [--iterations N]

Cases are the `make bench` routes' bodies: a native GPU pod, a GKE pod asking for 4 H100s translated
to `generic` with an inventory of node-agent records (so placement hints are added too), a fractional
ask (denied) and /validate. "first" decides each review as if it were the first of its kind: the memo
emptied and the body parsed just before, untimed, as the server parses a body and then decides it (a
review parsed long before would be measured out of the CPU's caches, which no server request is);
"again" decides one parsed review over and over without the memo (the decision alone, warm: how the
issue measured it); "repeated" decides the same pod with the memo, as the replicas of one ReplicaSet
arrive. The reference row parses the review body, the one step every route pays, so the ratios
compare across machines; the medians are in microseconds.
"""

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.helpers import fixture  # noqa: E402
from tests.inventories import mixed_cluster  # noqa: E402
from webhook.adapters.http.memo import DecisionMemo  # noqa: E402
from webhook.config.cloudmap import default_directory  # noqa: E402
from webhook.config.loading import build_context  # noqa: E402
from webhook.core.deciding import pipeline  # noqa: E402
from webhook.core.deciding.review import parse_review  # noqa: E402


def translated_review() -> dict:
    """The captured GPU pod as a GKE user writes a 4×H100 pod: translated, and given topology hints."""
    review = fixture("pod-create-gpu-limit-1.json")
    spec = review["request"]["object"]["spec"]
    spec["nodeSelector"] = {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}
    spec["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "4"}}
    return review


CONTEXT = None  # set in main: the generic map with the node-agent inventory

CASES = {
    "native 1-GPU pod": ("mutate", fixture("pod-create-gpu-limit-1.json")),
    "GKE 4×H100 → generic, hints": ("mutate", translated_review()),
    "0.5 GPU (denied)": ("mutate", fixture("pod-create-fractional-gpu-500m-before-validation.json")),
    "/validate 8-GPU pod": ("validate", fixture("validate-pod-create-gpu-8.json")),
}


def _decide(route, request, memo):
    # The routes as the server calls them: /mutate with the worker's memo, /validate without gates.
    if route == "mutate":
        return pipeline.mutate(request, CONTEXT, pipeline.NO_GATES, memo)
    return pipeline.validate(request, CONTEXT)


def median_us(call, iterations: int, prepare=None) -> float:
    """The median time of `call`, given what `prepare` returns when there is one (prepared untimed)."""
    samples = []
    for _ in range(iterations):
        args = (prepare(),) if prepare is not None else ()
        started = time.perf_counter_ns()
        call(*args)
        samples.append(time.perf_counter_ns() - started)
    return statistics.median(samples) / 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=3000)
    args = parser.parse_args()
    global CONTEXT
    with tempfile.TemporaryDirectory() as tmp:
        CONTEXT = build_context(default_directory(), "generic", mixed_cluster(Path(tmp)))
    rows = {}
    for label, (route, review) in CASES.items():
        body = json.dumps(review).encode()
        memo = DecisionMemo()

        def just_parsed(body=body, memo=memo):
            memo.clear()
            return parse_review(body)

        def first(request, route=route, memo=memo):
            _decide(route, request, memo)

        same = parse_review(body)

        def again(same=same, route=route):
            _decide(route, same, None)

        def repeated(same=same, route=route, memo=memo):
            _decide(route, same, memo)

        rows[label] = {
            "parse_us": median_us(lambda body=body: parse_review(body), args.iterations),
            "first_us": median_us(first, args.iterations, prepare=just_parsed),
            "again_us": median_us(again, args.iterations),
            "repeated_us": median_us(repeated, args.iterations),
        }
    print(f"pure decision, median of {args.iterations} calls each (µs)")
    print(f"{'case':30} {'parse':>8} {'first':>8} {'again':>8} {'repeated':>9} {'first/parse':>12}")
    for label, row in rows.items():
        print(
            f"{label:30} {row['parse_us']:8.1f} {row['first_us']:8.1f} {row['again_us']:8.1f} "
            f"{row['repeated_us']:9.1f} {row['first_us'] / row['parse_us']:12.2f}"
        )
    out = REPO / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "decision.json").write_text(json.dumps({"args": vars(args), "results": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
