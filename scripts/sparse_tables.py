"""Markdown tables of a `bayesattn sparse` run (docs/results/sparse.md sections 3-4), from its saved point files.

python scripts/sparse_tables.py results/sparse_emergence
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bayesattn.experiments.sparse.summary import bayes_summary, difficulty, group_seeds
from bayesattn.files import load_results
from bayesattn.stats import fmt_ci


def training_table(run: Path) -> str:
    rows = [
        "| part | model | S | s | H | head size | solved [95% Wilson] | median t* [95% bootstrap] (range of solved) | "
        "escape from ln 2 | final IoU | final entropy | wall (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for part in ("grid", "heads", "head_dim", "mixer"):
        recs = group_seeds(load_results(run / "points" / part))
        recs.sort(
            key=lambda r: tuple(
                (str(v) if isinstance(v, str) else f"{v or 0:06d}")
                for v in (r["point"]["train"][k] for k in ("model", "S", "s", "heads", "head_dim"))
            )
        )
        for r in recs:
            t, res = r["point"]["train"], r["result"]
            d = difficulty(res)
            hd = t["head_dim"] or (t["width"] // t["heads"])
            # the median counts unsolved seeds at the budget: above it (or equal) it is "> budget"
            if d["t_median"] is None or d["t_median"] >= d["budget"]:
                tm = f"> {d['budget']:.0f}"
            else:
                tm = f"{d['t_median']:.0f} {fmt_ci(d['t_ci'], 0)} ({d['t_min']}-{d['t_max']})"
            esc = "-" if d["escape_median"] is None else f"{d['escape_median']:.0f}"
            tf = t["model"] == "transformer"
            rows.append(
                f"| {part} | {t['model']} | {t['S']} | {t['s']} | {t['heads'] if tf else '-'} "
                f"| {hd if tf else '-'} | {d['solved']}/{d['seeds']} {fmt_ci(d['solve_ci'])} | {tm} | {esc} "
                f"| {d['iou']:.2f} | {d['entropy']:.2f} | {r['wall_time_s']:.0f} |"
            )
    return "\n".join(rows)


def bayes_table(run: Path) -> str:
    summ = bayes_summary(load_results(run / "points" / "bayes"))
    if not summ:
        return ""
    P = next(iter(summ.values()))["P"]
    theory = {(r["point"]["S"], r["point"]["s"]): r["result"]["P_c"] for r in load_results(run / "points" / "theory")}
    rows = [
        "| S | s | " + " | ".join(f"P={p}" for p in P) + " | P_c (NUTS) | P_c (theory) |",
        "|---|---|" + "---|" * (len(P) + 2),
    ]
    fmt = lambda p: "> grid" if p is None else f"{p:.0f}"  # noqa: E731
    for e in sorted(summ.values(), key=lambda e: (e["S"], e["s"])):
        rows.append(
            f"| {e['S']} | {e['s']} | "
            + " | ".join(f"{x:.2f}" for x in e["excess"])
            + f" | {fmt(e['P_c'])} | {fmt(theory.get((e['S'], e['s'])))} |"
        )
    return "\n".join(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run", type=Path, help="a result folder written by `bayesattn sparse`")
    args = ap.parse_args(argv)
    if not (args.run / "points").is_dir():
        ap.error(f"run={str(args.run)!r}: no points/ folder there (expected a folder written by `bayesattn sparse`)")
    print(training_table(args.run))
    print()
    print(bayes_table(args.run))
    return 0


if __name__ == "__main__":
    sys.exit(main())
