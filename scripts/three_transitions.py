"""Issue 20's figure set: the transition P of the joint mode (Adam on the network), the marginal mode (Adam with
the readout integrated out) and the posterior, across T, for softmax and linear; and SGLD at temperature tau.

    python scripts/three_transitions.py --config three_transitions --out results/three_transitions
    python scripts/three_transitions.py --out results/three_transitions --figures-only

Resumable: every point is one JSON file under OUT/points (bayesattn.sweep.run_sweep); rerunning computes only
what is missing. Writes OUT/summary.json (the table) and OUT/figures/three_transitions.{png,pdf}.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bayesattn.experiments.three_transitions import ThreeTransitionsConfig, run
from bayesattn.plots.three_transitions import plot_three_transitions


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--config",
        default="three_transitions",
        help="a TOML file or a named config in phase_diagrams/three_transitions/ (default: three_transitions)",
    )
    ap.add_argument("--out", default="results/three_transitions", help="output folder (points, summary, figures)")
    ap.add_argument("--figures-only", action="store_true", help="redraw the figure from OUT's saved files only")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)
    out = Path(args.out)
    if not args.figures_only:
        summary = run(ThreeTransitionsConfig.from_toml(args.config), out, progress=not args.no_progress)
        print(json.dumps({"wall_s": summary["wall_s"], "cpu_s": summary["cpu_s"]}))
    for path in plot_three_transitions(out):
        print(path)


if __name__ == "__main__":
    main()
