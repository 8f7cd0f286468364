"""The Bayesian copy head through the circuit screens (docs/screens.md): selectivity and PR of the single layer's
attention, averaged over posterior draws of L (NUTS on the closed-form posterior, V integrated out), across P.

For the copy task (offset 1) the screened class is previous_token; at the last query t = T - 1 the selectivity
of a draw is alpha[t, t - 1] / mean of alpha[t, s] over the other allowed keys (all of them: T is small, so no
sampling of 50), and its PR is that of the N x d matrix of outputs before the readout, sum_s alpha_ts x_s, over
N fresh probe sequences of the task's tokens. For Gaussian tokens these outputs are distributed as
||alpha_t|| z_n with z_n i.i.d. N(0, I_d) whatever alpha is, and the PR is scale-free, so its distribution does
not depend on the posterior at all (on one fixed probe it varies only by the finite-N fluctuation); it is
recorded as ``pr_gaussian`` to show this. For one-hot tokens the outputs have mean 1/d in every coordinate and
fluctuations of size ||alpha_t||, so the PR grows as the attention concentrates.

A run writes points/P_<P>.json (one per P, atomic; a rerun keeps them) and summary.json.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path

import jax
import numpy as np

from ..bayes.posterior import Posterior, Prior
from ..bayes.sampling import sample
from ..bayes.theory.common import first_crossing
from ..diagnostics.screens import THRESHOLD, participation_ratio
from ..sweep import package_versions, read_json, write_json_atomic
from ..tasks import CopyTask
from ._configs import check_keys, config_dirs, load_toml

CONFIG_DIRS = config_dirs("screens")


@dataclass
class BayesLensConfig:
    name: str = "screens_bayes"
    T: int = 8
    d: int = 8
    tokens: str = "onehot"
    boundary: str = "cyclic"
    sigma_A2: float = 1.0
    sigma_V2: float = 100.0
    sigma2: float = 10.0
    P: list = field(default_factory=lambda: [int(x) for x in np.unique(np.round(np.geomspace(30, 30000, 13)))])
    num_chains: int = 4
    num_warmup: int = 500
    num_samples: int = 500
    probe_N: int = 256
    seed: int = 0
    theory_points: int = 25  # P values of the theory line (log-spaced over the range of P; 0: no theory line)

    @classmethod
    def from_toml(cls, path) -> BayesLensConfig:
        path, data = load_toml(path, CONFIG_DIRS)
        check_keys(cls, data, path)
        return cls(**data)

    def task(self, tokens: str | None = None) -> CopyTask:
        return CopyTask(T=self.T, d=self.d, offset=1, tokens=tokens or self.tokens, boundary=self.boundary)


def pr_onehot_limit(q, d: int):
    """PR of the outputs sum_s alpha_s x_s of uniform one-hot tokens in the limit of many probe sequences, for an
    attention row with sum_s alpha_s^2 = q: the second-moment matrix 11^T / d^2 + q (I / d - 11^T / d^2) has
    eigenvalue 1/d along the mean and q/d on the d - 1 directions orthogonal to it."""
    q = np.asarray(q, dtype=np.float64)
    p0 = 1.0 / (1.0 + (d - 1) * q)
    p1 = q * p0
    ent = -(p0 * np.log(p0) + (d - 1) * np.where(p1 > 0, p1 * np.log(np.where(p1 > 0, p1, 1.0)), 0.0))
    return np.exp(ent)


def lens(alpha: np.ndarray, task: CopyTask, probe_X: np.ndarray) -> dict:
    """Per draw (alpha: (S, T, T)): previous-token selectivity and PR at the last query on probe_X (N, T, d)."""
    T = task.T
    t, src = T - 1, int(task.source[T - 1])
    others = np.flatnonzero(task.key_mask[t] & (np.arange(T) != src))
    a = np.asarray(alpha, dtype=np.float64)[:, t]  # (S, T)
    sel = a[:, src] / np.maximum(a[:, others].mean(-1), 1e-12)
    outputs = np.einsum("st,ntd->snd", a, np.asarray(probe_X, dtype=np.float64))
    return {
        "selectivity": sel,
        "pr": participation_ratio(outputs),
        "mass": a[:, src],
        "pr_limit": pr_onehot_limit(np.sum(a**2, axis=-1), task.d),
    }


def point(cfg: BayesLensConfig, P: int) -> dict:
    task = cfg.task()
    key = jax.random.fold_in(jax.random.key(cfg.seed), P)
    k_data, k_mcmc, k_probe = jax.random.split(key, 3)
    post = Posterior(task.sample(k_data, P), "softmax", Prior(cfg.sigma_A2, cfg.sigma_V2, cfg.sigma2))
    t0 = time.perf_counter()
    s = sample(
        post, k_mcmc, num_chains=cfg.num_chains, num_warmup=cfg.num_warmup, num_samples=cfg.num_samples, init="cold"
    )
    alpha = np.asarray(post.model.weights(jax.numpy.asarray(s.L).reshape(-1, *post.L_shape), task.key_mask))
    res = lens(alpha, task, task.sample(k_probe, cfg.probe_N).X)
    gauss = lens(alpha, task, cfg.task("gaussian").sample(k_probe, cfg.probe_N).X)["pr"]
    sel = res["selectivity"]
    return {
        "P": P,
        "selectivity_mean": float(sel.mean()),
        "selectivity_median": float(np.median(sel)),
        "log10_selectivity_mean": float(np.log10(sel).mean()),
        "frac_above_threshold": float(np.mean(sel >= THRESHOLD)),
        "pr_mean": float(res["pr"].mean()),
        "pr_sd": float(res["pr"].std()),
        "mass_mean": float(res["mass"].mean()),
        "pr_limit_mean": float(res["pr_limit"].mean()),
        "m": float(np.mean(s.order_parameters["m"])),
        "q": float(np.mean(s.order_parameters["q"])),
        "pr_gaussian_mean": float(gauss.mean()),
        "pr_gaussian_range": float(gauss.max() - gauss.min()),
        "draws": int(sel.size),
        "wall_s": time.perf_counter() - t0,
    }


def _half_rise(P, y):
    y = np.asarray(y, float)
    return first_crossing(P, y, y[0] + 0.5 * (y.max() - y[0])) if y.max() > y[0] else None


def theory_line(cfg: BayesLensConfig) -> dict | None:
    """The theory's screens (:mod:`.screens_theory`) on ``theory_points`` log-spaced P over the range of ``P``;
    None unless the theory covers the task (one-hot tokens need softmax, cyclic)."""
    if not cfg.theory_points or cfg.tokens != "onehot" or cfg.boundary != "cyclic":
        return None
    from ..bayes.posterior import Prior as _Prior
    from .screens_theory import theory_screens

    P = np.geomspace(min(cfg.P), max(cfg.P), int(cfg.theory_points))
    t0 = time.perf_counter()
    pts = theory_screens(cfg.task(), _Prior(cfg.sigma_A2, cfg.sigma_V2, cfg.sigma2), P)
    return {
        "points": pts,
        "wall_s": time.perf_counter() - t0,
        "P_selectivity_threshold": first_crossing(P, [p["selectivity_median"] for p in pts], THRESHOLD),
        "P_pr_half_rise": _half_rise(P, [p["pr_limit_mean"] for p in pts]),
    }


def run(cfg: BayesLensConfig, out_dir, progress: bool = True) -> dict:
    out = Path(out_dir)
    t0 = time.perf_counter()
    pts = []
    for P in sorted(int(p) for p in cfg.P):
        f = out / "points" / f"P_{P:08d}.json"
        if not f.exists():
            write_json_atomic(f, {"config": dataclasses.asdict(cfg), "result": point(cfg, P)})
            if progress:
                print(f"  P = {P} done", flush=True)
        pts.append(read_json(f)["result"])
    P = [p["P"] for p in pts]
    ft = out / "theory.json"
    if ft.exists() and read_json(ft)["config"] == dataclasses.asdict(cfg):
        theory = read_json(ft)["result"]
    else:
        theory = theory_line(cfg)
        write_json_atomic(ft, {"config": dataclasses.asdict(cfg), "versions": package_versions(), "result": theory})
        if progress and theory:
            print(f"  theory line ({len(theory['points'])} P) done", flush=True)
    summary = {
        "config": dataclasses.asdict(cfg),
        "versions": package_versions(),
        "wall_s": time.perf_counter() - t0,
        "points": pts,
        "P_selectivity_threshold": first_crossing(P, [p["selectivity_median"] for p in pts], THRESHOLD),
        "P_pr_half_rise": _half_rise(P, [p["pr_mean"] for p in pts]),
        "P_pr_limit_half_rise": _half_rise(P, [p["pr_limit_mean"] for p in pts]),
        "theory": theory,
    }
    write_json_atomic(out / "summary.json", summary)
    return summary


def figure(out_dir, path=None) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    s = read_json(out / "summary.json")
    pts = s["points"]
    P = [p["P"] for p in pts]
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.5))
    ax[0].plot(P, [p["selectivity_median"] for p in pts], "o-", label="posterior median")
    ax[0].plot(P, [10 ** p["log10_selectivity_mean"] for p in pts], "s--", ms=3, label="geometric mean")
    th = (s.get("theory") or {}).get("points")
    if th:
        ax[0].plot(
            [p["P"] for p in th],
            [p["selectivity_median"] for p in th],
            "k-",
            lw=1,
            label="theory: median over the row law",
        )
    ax[0].axhline(THRESHOLD, color="k", ls=":", lw=0.8, label=f"{THRESHOLD:.0f}x")
    ax[0].set(xscale="log", yscale="log", xlabel="P", ylabel="previous-token selectivity", title="(a) selectivity")
    ax[0].legend(fontsize=7)
    ax[1].errorbar(
        P,
        [p["pr_mean"] for p in pts],
        yerr=[p["pr_sd"] for p in pts],
        fmt="o-",
        label=f"NUTS, {s['config']['tokens']}, {s['config']['probe_N']} probe sequences",
    )
    if "pr_limit_mean" in pts[0]:
        ax[1].plot(P, [p["pr_limit_mean"] for p in pts], "kx", ms=5, label="NUTS, many-sequence limit")
    if th:
        ax[1].plot(
            [p["P"] for p in th], [p["pr_limit_mean"] for p in th], "k-", lw=1, label="theory: mean over the row law"
        )
    ax[1].plot(P, [p["pr_gaussian_mean"] for p in pts], "s--", ms=3, label="gaussian tokens")
    for x, st in ((s["P_selectivity_threshold"], "k:"), (s["P_pr_half_rise"], "r:")):
        if x:
            for a in ax:
                a.axvline(x, color=st[0], ls=":", lw=0.8)
    ax[1].set(xscale="log", xlabel="P", ylabel="PR", title="(b) PR of the outputs at the last query")
    ax[1].legend(fontsize=7)
    c = s["config"]
    fig.suptitle(
        f"Bayesian copy head, T={c['T']}, d={c['d']}, sigma2={c['sigma2']} (NUTS, "
        f"{c['num_chains']}x{c['num_samples']} draws per P)",
        fontsize=9,
    )
    fig.tight_layout()
    path = Path(path) if path else out / "figures" / "bayes_lens.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path
