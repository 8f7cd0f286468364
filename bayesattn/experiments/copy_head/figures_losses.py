"""Figure 8: the error against P, the theory's predictions with MCMC and Adam measured on held-out data."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...models.attention import attention_kind
from .figures_common import SERIES, arr, attention_panels, inits, log_P_axis, num, save, title_params


def fig_losses(runs: dict, out: Path) -> list[Path]:
    """Per attention: the posterior's predicted test error (what MCMC measures), the joint mode's (where Adam
    lands on the stable branch) and the plateau (uniform attention / L = 0), against MCMC's posterior-mean test
    error and Adam's final test loss, both on held-out sequences."""
    if not (panels := attention_panels(runs, "theory", 4.4, need="losses")):
        return []
    atts, fig, axes = panels
    for ax, att in zip(axes, atts):
        th = runs["theory"][att][0]
        lc = th["result"]["losses"]
        P = arr(lc["P"])
        ax.plot(P, arr(lc["posterior"]), "k-", lw=1.6, label="theory: posterior (MCMC's target)")
        if lc.get("joint_mode") is not None:
            ax.plot(
                P,
                arr(lc["joint_mode"]),
                "-",
                color="tab:green",
                lw=1.2,
                label="theory: joint mode (Adam's target, stable branch)",
            )
        ax.plot(
            P,
            arr(lc["plateau"]),
            ":",
            color="0.5",
            lw=1.2,
            label="plateau: uniform attention" if attention_kind(att).normalised else "plateau: L = 0",
        )
        P_all = P.tolist()
        for method in ("mcmc", "adam"):
            for rec_list in [runs.get(method, {}).get(att)]:
                if not rec_list:
                    continue
                Pm = np.array([r["point"]["P"] for r in rec_list], dtype=float)
                P_all += Pm.tolist()
                for init in inits(rec_list[0]):
                    marker, color, shift = SERIES.get((method, init), ("x", "0.3", 1.0))
                    if method == "mcmc":
                        te = [inits(r)[init].get("test_error") for r in rec_list]
                        ok = [i for i, t in enumerate(te) if t]
                        if not ok:
                            continue
                        ax.errorbar(
                            Pm[ok] * shift,
                            [num(te[i]["mean"]) for i in ok],
                            yerr=[num(te[i]["sem"]) for i in ok],
                            fmt=marker,
                            ms=4,
                            capsize=2,
                            color=color,
                            label=f"MCMC, {init} start (held-out error, mean ± sem)",
                        )
                    else:
                        fin = [arr(inits(r)[init]["history"].get("test_loss", [[np.nan]]))[:, -1] for r in rec_list]
                        ax.errorbar(
                            Pm * shift,
                            [np.nanmean(v) for v in fin],
                            yerr=[np.nanstd(v) for v in fin],
                            fmt=marker,
                            mfc="none",
                            ms=5,
                            capsize=2,
                            color=color,
                            label=f"Adam, {init} init (held-out loss, mean ± sd)",
                        )
        log_P_axis(ax, min(P_all), max(P_all))
        ax.set_yscale("log")
        ax.set_xlabel("training sequences P")
        ax.set_ylabel("test error (fraction of the target's variance)")
        ax.set_title(f"{att} attention")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    fig.suptitle("Test error vs number of training sequences\n" + title_params(runs["theory"][atts[0]][0]), fontsize=10)
    return save(fig, out, "fig8_test_error_vs_P")
