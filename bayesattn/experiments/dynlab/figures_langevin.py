"""The posterior's Langevin dynamics beside its equilibrium: the seed-mean attention entropy and copy weight m of
the copy-task posterior along Langevin time, one colour per P, with NUTS's posterior means as dotted levels
(drawn from the ``langevin`` and ``equilibrium`` point files only)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...figstyle import legend, log_x_axis, save, subplots
from .summary import langevin_summary


def langevin_figure(records: list, equilibrium: list, out: Path) -> Path | None:
    """Two panels against Langevin time (log axis, the first record at t = 0 left out): the seed-mean entropy
    with a 95% band (1.96 standard errors over seeds) and the seed-mean m; NUTS's posterior mean at the same
    (T, P), where the run has it, as a dotted line of the same colour. None when there is nothing to draw."""
    lg = langevin_summary(records, equilibrium)
    if not lg["seeds"]:
        return None
    t = np.asarray(lg["t"], float)
    keep = t > 0
    fig, axes = subplots(1, 2, panel=(5.0, 3.8))
    a, b = axes[0]
    for k, row in enumerate(lg["per_P"]):
        col = f"C{k}"
        mean, se = np.asarray(row["entropy_mean"]), np.asarray(row["entropy_se"])
        a.plot(t[keep], mean[keep], color=col, lw=1.1, label=f"P={row['P']}: Langevin, mean of {lg['seeds']} seeds")
        a.fill_between(t[keep], (mean - 1.96 * se)[keep], (mean + 1.96 * se)[keep], color=col, alpha=0.2, lw=0)
        b.plot(t[keep], np.asarray(row["m_mean"])[keep], color=col, lw=1.1, label=f"P={row['P']}: Langevin")
        if "nuts" in row:
            a.axhline(row["nuts"]["entropy"]["mean"], color=col, ls=":", lw=1.0, label=f"P={row['P']}: NUTS mean")
            b.axhline(row["nuts"]["m"]["mean"], color=col, ls=":", lw=1.0, label=f"P={row['P']}: NUTS mean")
    a.axhline(np.log(lg["T"]), color="0.5", ls="--", lw=0.8, label=f"log T = {np.log(lg['T']):.3f} (uniform)")
    for ax in (a, b):
        log_x_axis(ax, t[keep].tolist())
    a.set(
        xlabel="Langevin time (lr x steps)",
        ylabel="attention entropy over positions (nats)",
        title=f"posterior's Langevin dynamics, T={lg['T']}, d={lg['d']}",
    )
    b.set(xlabel="Langevin time (lr x steps)", ylabel="copy weight m", title="band: 1.96 se over seeds (left)")
    legend(a)
    legend(b)
    return save(fig, out)
