"""Figure 8: the error against P, the theory's predictions with MCMC and Adam measured on held-out data."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ... import figstyle
from ...models.attention import attention_kind
from ..sections import CENTRED_TARGET
from .figures_common import SERIES, arr, attention_panels, inits, log_P_axis, num, save, title_params


def fig_losses(runs: dict, out: Path) -> list[Path]:
    """Per attention: the posterior's predicted test error (what MCMC measures), the joint mode's (where Adam
    lands on the stable branch) and the plateau (uniform attention / L = 0), against MCMC's posterior-mean test
    error and Adam's final test loss, both on held-out sequences. Every error bar is a standard error
    (:data:`bayesattn.figstyle.SEM`): MCMC's over its thinned posterior draws, Adam's over its runs; the legend,
    below the panels, says so. One-hot tokens: the error of the centred target (the part orthogonal to the all-ones
    vector, what the theory predicts and MCMC measures there), without Adam, whose loss is the plain one."""
    if not (panels := attention_panels(runs, "theory", 4.4, need="losses")):
        return []
    atts, fig, axes = panels
    handles: dict = {}
    draws, n_runs = set(), set()
    plateau = "plateau: uniform attention (softmax), L = 0 (linear)"
    # the theory point's marker (CopyTaskSection.held_out_target): one-hot runs predict the centred target's error
    centred = runs["theory"][atts[0]][0]["point"].get("held_out") == CENTRED_TARGET
    for ax, att in zip(axes, atts):
        kind = attention_kind(att)
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
            label=plateau if len(atts) > 1 else "plateau: " + ("uniform attention" if kind.normalised else "L = 0"),
        )
        P_all = P.tolist()
        for method in ("mcmc",) if centred else ("mcmc", "adam"):
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
                        draws |= {int(te[i]["draws"]) for i in ok if te[i].get("draws")}
                        ax.errorbar(
                            Pm[ok] * shift,
                            [num(te[i]["mean"]) for i in ok],
                            yerr=[num(te[i]["sem"]) for i in ok],
                            fmt=marker,
                            ms=4,
                            capsize=2,
                            color=color,
                            label=f"MCMC, {init} start (held-out error)",
                        )
                    else:
                        fin = [arr(inits(r)[init]["history"].get("test_loss", [[np.nan]]))[:, -1] for r in rec_list]
                        n = [int(np.sum(np.isfinite(v))) for v in fin]
                        n_runs |= set(n)
                        sem = [np.nanstd(v, ddof=1) / np.sqrt(k) if k > 1 else np.nan for v, k in zip(fin, n)]
                        ax.errorbar(
                            Pm * shift,
                            [np.nanmean(v) for v in fin],
                            yerr=sem,
                            fmt=marker,
                            mfc="none",
                            ms=5,
                            capsize=2,
                            color=color,
                            label=f"Adam, {init} init (held-out loss)",
                        )
        log_P_axis(ax, min(P_all), max(P_all))
        ax.set_yscale("log")
        ax.set_xlabel("training sequences P")
        ax.set_ylabel(
            "centred test error (fraction of variance)" if centred else "test error (fraction of the target's variance)"
        )
        ax.set_title(f"{att} attention")
        ax.grid(alpha=0.3, which="both")
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    over = [f"MCMC: over {'/'.join(map(str, sorted(draws)))} posterior draws" if draws else ""]
    over += [f"Adam: over {'/'.join(map(str, sorted(n_runs)))} runs" if n_runs else ""]
    title = f"error bars: {figstyle.SEM} (" + "; ".join(o for o in over if o) + ")" if any(over) else None
    # one legend for both panels, below them: inside, it would cover the markers
    ncol = min(3, len(handles))
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=ncol, title=title)
    what = "Centred target's test error (one-hot tokens)" if centred else "Test error"
    fig.suptitle(f"{what} vs number of training sequences\n" + title_params(runs["theory"][atts[0]][0]))
    return save(fig, out, "fig8_test_error_vs_P")
