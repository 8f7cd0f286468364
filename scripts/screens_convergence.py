"""How a model screen's classification depends on the probe size N and on the baseline rule: read several
``bayesattn screens --config smollm2`` result folders (each one model point) and tabulate, per folder, the heads
per class at 30x, the induction-circuit (50x) and previous-token-circuit (100x) heads, the paper's best-class
counts, and the agreement of each head set with the reference folder's (the largest N of the paper's rule by
default): |A & B| / |A | B| (Jaccard).

    python scripts/screens_convergence.py RUN_DIR [RUN_DIR ...] [--reference RUN_DIR] [--json OUT.json]

docs/results/screens.md shows its table for SmolLM2 (N = 64, 256, 1000, 2000; paper and class-free baselines).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bayesattn.diagnostics.screens import CLASSES
from bayesattn.files import load_results


def head_sets(folder: Path) -> dict:
    (rec,) = load_results(folder / "points" / "model")
    res = rec["result"]
    heads = {(r["layer"], r["head"]): r for r in res["records"]}
    sets = {f"{c} (30x)": {h for h, r in heads.items() if c in r["classes"]} for c in CLASSES}
    sets["induction circuit (50x)"] = {h for h, r in heads.items() if r["induction_circuit"]}
    sets["previous-token circuit (100x)"] = {h for h, r in heads.items() if r["previous_token_circuit"]}
    for c in CLASSES:
        sets[f"best class {c}"] = {h for h, r in heads.items() if r["best_class"] == c}
    sets["unclassified"] = {h for h, r in heads.items() if r["best_class"] is None}
    probe = res["probe"]
    return {"N": probe["N"], "baseline": probe.get("baseline", "class_free"), "sets": sets}


def jaccard(a: set, b: set) -> float:
    return 1.0 if not (a | b) else len(a & b) / len(a | b)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--reference", type=Path, help="the folder the others are compared with (default: largest N, paper)")
    p.add_argument("--json", type=Path, help="write the table as JSON here")
    args = p.parse_args(argv)
    for r in args.runs + ([args.reference] if args.reference else []):
        if not (r / "points" / "model").is_dir():
            print(f"screens_convergence: {r}: no points/model folder (not a model screen run)", file=sys.stderr)
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
