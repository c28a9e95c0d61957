"""The pure decision of this checkout against another commit's, measured alternately in one run.

    .venv/bin/python bench/tree_bench.py --baseline 9dfd384 [--rounds 5] [--calls 3000]

Each round runs both trees once, in fresh processes and alternating, on decision_bench.py's cases
(the baseline's own cases and code, so an old tree is measured as it was). A tree's figure is the
minimum over rounds of the minimum of 7 repeats: on a shared machine, noise only ever adds time, so
the least time is the cost. "afresh" decides without the memo, "memo hit" with it; µs per call.
The ratio is this tree's figure over the baseline's.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import timeit
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def measure(tree: Path, calls: int) -> dict[str, list[float]]:
    """{case: [afresh µs, memo hit µs]} for the checkout at `tree`, in this process."""
    sys.path.insert(0, str(tree))
    sys.path.insert(0, str(tree / "bench"))
    import decision_bench

    from tests.inventories import mixed_cluster
    from webhook.adapters.http.memo import DecisionMemo
    from webhook.config.cloudmap import default_directory
    from webhook.config.loading import build_context
    from webhook.core.deciding import pipeline
    from webhook.core.deciding.review import parse_review

    with tempfile.TemporaryDirectory() as tmp:
        context = build_context(default_directory(), "generic", mixed_cluster(Path(tmp)))
    found = {}
    for label, (route, review) in decision_bench.CASES.items():
        request = parse_review(json.dumps(review).encode())
        memo = DecisionMemo()
        if route == "mutate":
            afresh = lambda r=request: pipeline.mutate(r, context, pipeline.NO_GATES, None)  # noqa: E731
            hit = lambda r=request, m=memo: pipeline.mutate(r, context, pipeline.NO_GATES, m)  # noqa: E731
        else:
            afresh = hit = lambda r=request: pipeline.validate(r, context)
        found[label] = [min(timeit.repeat(f, number=calls, repeat=7)) / calls * 1e6 for f in (afresh, hit)]
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="a commit to measure this checkout against")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # a tree, in a child process
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(Path(args.measure), args.calls)))
        return 0
    if not args.baseline:
        parser.error("--baseline REV is required")
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "baseline"
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "-q", "--detach", str(base), args.baseline],
            check=True,
        )
        try:
            runs: dict[Path, list[dict[str, list[float]]]] = {base: [], REPO: []}
            for _ in range(args.rounds):
                for tree in (base, REPO):
                    command = [sys.executable, __file__, "--measure", str(tree), "--calls", str(args.calls)]
                    done = subprocess.run(command, capture_output=True, text=True)
                    if done.returncode:
                        sys.exit(f"measuring {tree} failed:\n{done.stderr}")
                    runs[tree].append(json.loads(done.stdout))
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)], check=True)
    print(f"min over {args.rounds} alternating rounds of min of 7 × {args.calls} calls (µs)")
    print(f"{'case':30} {'':9} {args.baseline[:10]:>10} {'this tree':>10} {'ratio':>6}")
    for label in runs[REPO][0]:
        for index, name in enumerate(("afresh", "memo hit")):
            before = min(r[label][index] for r in runs[base])
            now = min(r[label][index] for r in runs[REPO])
            print(f"{label:30} {name:9} {before:10.1f} {now:10.1f} {now / before:6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
