"""How a model screen's classification depends on the probe size N and on the baseline rule: read several
``bayesattn screens --config smollm2`` result folders (each one model point) and tabulate, per folder, the heads
per class at 30x, the induction-circuit (50x) and previous-token-circuit (100x) heads, the paper's best-class
counts, and the agreement of each head set with the reference folder's (the largest N of the paper's rule by
default): |A & B| / |A | B| (Jaccard).

    python scripts/screens_convergence.py RUN [RUN ...] [--reference RUN] [--json OUT.json]

RUN: a result folder (its model point is read) or a summary.json that records the head sets (``model.head_sets``,
written since 2026-12-06), so a committed summary is enough.

docs/results/screens.md shows its table for SmolLM2 (N = 64, 256, 1000, 2000; paper and class-free baselines).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bayesattn.diagnostics.screens import THRESHOLD
from bayesattn.experiments.screens.summary import head_sets as result_head_sets
from bayesattn.files import load_results


def head_sets(run: Path) -> dict:
    """N, baseline and the head sets (sets of (layer, head)) of a run folder or of a summary.json with head sets."""
    if run.is_file():
        model = json.loads(run.read_text())["model"]
        probe, sets = model["probe"], model["head_sets"]
    else:
        (rec,) = load_results(run / "points" / "model")
        threshold = rec["point"].get("model", {}).get("threshold", THRESHOLD)
        probe, sets = rec["result"]["probe"], result_head_sets(rec["result"], threshold)
    return {
        "N": probe["N"],
        "baseline": probe.get("baseline", "class_free"),
        "sets": {name: {tuple(h) for h in heads} for name, heads in sets.items()},
    }


def _has_head_sets(path: Path) -> bool:
    try:
        return path.is_file() and "head_sets" in json.loads(path.read_text()).get("model", {})
    except (OSError, ValueError, AttributeError):
        return False


def jaccard(a: set, b: set) -> float:
    return 1.0 if not (a | b) else len(a & b) / len(a | b)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--reference", type=Path, help="the folder the others are compared with (default: largest N, paper)")
    p.add_argument("--json", type=Path, help="write the table as JSON here")
    args = p.parse_args(argv)
    for r in args.runs + ([args.reference] if args.reference else []):
        if not ((r / "points" / "model").is_dir() or _has_head_sets(r)):
            print(
                f"screens_convergence: {r}: no points/model folder (not a model screen run) and not a summary.json "
                "with model.head_sets",
                file=sys.stderr,
            )
            return 2
    runs = {str(r): head_sets(r) for r in args.runs}
    if args.reference:
        ref = head_sets(args.reference)
    else:
        ref = max(runs.values(), key=lambda x: (x["baseline"] == "paper", x["N"]))
    cols = sorted(runs.values(), key=lambda x: (x["baseline"] != "paper", x["N"]))
    names = list(ref["sets"])
    print("| heads | " + " | ".join(f"N = {c['N']} ({c['baseline']})" for c in cols) + " |")
    print("|---|" + "---|" * len(cols))
    table = []
    for name in names:
        cells = [f"{len(c['sets'][name])} ({jaccard(c['sets'][name], ref['sets'][name]):.2f})" for c in cols]
        print(f"| {name} | " + " | ".join(cells) + " |")
        table.append(
            {
                "heads": name,
                "counts": [len(c["sets"][name]) for c in cols],
                "jaccard_with_reference": [jaccard(c["sets"][name], ref["sets"][name]) for c in cols],
            }
        )
    print(f"(in brackets: Jaccard overlap with N = {ref['N']} ({ref['baseline']}))")
    if args.json:
        out = {
            "columns": [{"N": c["N"], "baseline": c["baseline"]} for c in cols],
            "reference": {"N": ref["N"], "baseline": ref["baseline"]},
            "rows": table,
        }
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
