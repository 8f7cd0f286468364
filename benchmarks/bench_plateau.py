"""The plateau experiment's default config end to end (docs/results/plateau.md; issue target: at most 10 minutes
on 2 cores), in a fresh process without the persistent compilation cache, so that every compilation is paid:
prints the wall time per part (theory, runs) and in all, and the share of the runs per method. Not a test.

    .venv/bin/python benchmarks/bench_plateau.py [--seeds N] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = """
import json, sys, time
from bayesattn.experiments import get_experiment
from bayesattn.sweep import run_experiment
cls = get_experiment("plateau")
cfg = cls.load_config("plateau", sys.argv[2:])
t0 = time.perf_counter()
s = run_experiment(cls(), cfg, sys.argv[1], progress=False)
print(json.dumps({"wall_s": time.perf_counter() - t0, "compute_s": s["compute_time_s"]}))
"""


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=None, help="seeds per (case, method) (default: the config's, 8)")
    ap.add_argument("--out", default=None, help="result folder (default: a temporary one, removed after)")
    args = ap.parse_args(argv)
    sets = [] if args.seeds is None else [f"seeds={args.seeds}"]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out or Path(tmp) / "plateau")
        # a cold start: run_experiment alone never turns the persistent compilation cache on; the variable keeps a
        # user's setting from doing so either
        env = {"BAYESATTN_CACHE_DIR": "off"}
        t0 = time.perf_counter()
        r = subprocess.run(
            [sys.executable, "-c", CHILD, str(out), *sets],
            capture_output=True,
            text=True,
            env={**os.environ, **env},
            check=True,
        )
        total = time.perf_counter() - t0
        inner = json.loads(r.stdout.strip().splitlines()[-1])
        per = {}
        for f in (out / "points" / "runs").glob("*.json"):
            rec = json.loads(f.read_text())
            per.setdefault(rec["point"]["method"], 0.0)
            per[rec["point"]["method"]] += rec["result"]["wall_s"]
    print(
        f"plateau default: {total:.1f} s in a fresh process (run_experiment {inner['wall_s']:.1f} s), target <= 600 s"
    )
    print("  runs' own wall time per method: " + ", ".join(f"{k} {v:.1f} s" for k, v in sorted(per.items())))


if __name__ == "__main__":
    main()
