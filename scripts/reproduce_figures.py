"""Reproduce every figure of the theory (docs/model.md section 5) from the phase diagram's named configs.

    python scripts/reproduce_figures.py                    # all configs, results in results/NAME/
    python scripts/reproduce_figures.py --only default finite_size
    python scripts/reproduce_figures.py --update-docs      # also copy the PNGs shown in the README to docs/figures/

Each config is one resumable `bayesattn run phase-diagram --config NAME` run: an interrupted reproduction picks up where it
stopped. Figures are drawn from the saved results only (`bayesattn figures DIR` redraws one run).
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from bayesattn.experiments import get_experiment
from bayesattn.sweep import run_experiment

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = (
    "default",
    "finite_size",
    "sigma_A2_plane",
    "T_plane",
    "training_dynamics",
    "coexistence",
    "softmax_vs_linear",
)
# the figures the README embeds: (config, file stem)
DOC_FIGURES = (
    ("default", "fig1_order_parameter_vs_P"),
    ("default", "fig2_free_energy_landscapes"),
    ("sigma_A2_plane", "fig3_phase_diagram_P_sigma_A2"),
    ("T_plane", "fig3_phase_diagram_P_T"),
    ("default", "fig4_posterior_mean_attention"),
    ("coexistence", "fig5_posterior_histograms"),
    ("training_dynamics", "fig6_training_curves"),
    ("finite_size", "fig7_finite_size_scaling"),
    ("default", "fig8_test_error_vs_P"),
)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="+", choices=CONFIGS, help="run only these configs")
    ap.add_argument("--update-docs", action="store_true", help="copy the README's figures to docs/figures/")
    ap.add_argument("--quiet", action="store_true", help="no progress bars")
    args = ap.parse_args(argv)
    cls = get_experiment("phase-diagram")
    for name in args.only or CONFIGS:
        t0 = time.perf_counter()
        print(f"== {name}", flush=True)
        run_experiment(cls(), cls.load_config(name), ROOT / "results" / name, progress=not args.quiet)
        print(f"== {name}: {time.perf_counter() - t0:.0f} s", flush=True)
    if args.update_docs:
        dest = ROOT / "docs" / "figures"
        dest.mkdir(parents=True, exist_ok=True)
        for name, stem in DOC_FIGURES:
            src = ROOT / "results" / name / "figures" / f"{stem}.png"
            if src.exists():
                shutil.copy(src, dest / src.name)
                print(f"copied {src.relative_to(ROOT)} -> {(dest / src.name).relative_to(ROOT)}")


if __name__ == "__main__":
    main()
