"""The clustering head's loss spikes up close: for the seed with the most spikes, the epochs before each of its
first spikes, with the loss, the smallest pre-normalisation norm and the Hessian's largest eigenvalue on one epoch
axis, so that one sees whether the curvature rises before the loss does (every epoch of the window when the
run's ``curv_window`` covers it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...figstyle import empty_panel, integer_ticks, save, subplots

MAX_SPIKES = 3


def spike_windows_figure(recs, out: Path, window: int = 20) -> Path | None:
    """One column per spike (at most :data:`MAX_SPIKES`) of the seed with the most spikes over every setting;
    None when no run has a spike."""
    runs = [(r["point"]["label"], run) for r in recs for run in r["result"]["runs"] if run["diverged_at"] is None]
    runs = [x for x in runs if x[1]["spikes"]]
    if not runs:
        return None
    label, best = max(runs, key=lambda x: (len(x[1]["spikes"]), -x[1]["seed"]))
    spikes = best["spikes"][:MAX_SPIKES]
    fig, axes = subplots(3, len(spikes), panel=(3.6, 2.3), sharex="col")
    loss = np.asarray(best["curves"]["loss"], float)
    znorm = np.asarray(best["curves"]["z_norm_min"], float)
    c_ep = np.asarray(best["curvature"]["epoch"], int)
    c_lam = np.abs(np.asarray(best["curvature"]["lambda_max"], float))
    for j, sp in enumerate(spikes):
        t = sp["epoch"]
        lo, hi = max(0, t - window), min(len(loss) - 1, t + 2)
        ep = np.arange(lo, hi + 1)
        axes[0, j].semilogy(ep, loss[lo : hi + 1], "k.-", lw=0.8, ms=3)
        axes[0, j].set_title(f"{label}\nseed {best['seed']}, spike at epoch {t}", fontsize=9)
        axes[1, j].semilogy(ep, znorm[lo : hi + 1], ".-", color="tab:blue", lw=0.8, ms=3)
        keep = (c_ep >= lo) & (c_ep <= hi)
        if keep.any():
            axes[2, j].semilogy(c_ep[keep], c_lam[keep], ".-", color="tab:red", lw=0.8, ms=3)
        else:
            empty_panel(axes[2, j], "no curvature in this window (curv_window)")
        for ax in axes[:, j]:
            ax.axvline(t, color="0.5", ls="--", lw=0.8)
        axes[2, j].set_xlabel("epoch")
        integer_ticks(axes[2, j].xaxis)
    axes[0, 0].set_ylabel("train loss")
    axes[1, 0].set_ylabel("min ||z|| before norm")
    axes[2, 0].set_ylabel("|lambda_max|")
    fig.suptitle("the epochs before a loss spike (dashed: the spike's epoch)", fontsize=9)
    return save(fig, out)
