"""The staircase (issue 13; docs/staircase.md): in the amount of data, from the exact posterior of H heads on
:class:`~bayesattn.MultiLagCopyTask`; in training time, the paper's minimal model on
:class:`~bayesattn.HighOrderMarkovTask` (:mod:`.staircase_training`); and the simplified ODE
(:mod:`bayesattn.dynamics.ode`).

A run writes, under its output folder::

    points/mcmc/*.json       one file per (attention, H, P, init): per-head and label-free lag masses, diagnostics
    points/train/*.json      one file per seed of the minimal model: records over steps, stage times
    points/ode/*.json        the ODE trajectory
    summary.json             config, transitions P_k per (attention, H, init), stage times, wall time

Every point goes through :func:`bayesattn.sweep.run_sweep` (atomic, resumable).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path

import jax
import numpy as np

from .._validate import check_choice, check_int
from ..bayes.posterior import Posterior, Prior
from ..bayes.sampling import sample
from ..bayes.theory.common import first_crossing
from ..models.attention import hot_logits
from ..sweep import package_versions, run_sweep, write_json_atomic
from ..tasks import MultiLagCopyTask
from ._configs import check_keys, config_dirs, load_toml
from .staircase_training import TrainingConfig, stage_times, train_minimal

PARTS = ("mcmc", "theory", "train", "ode")
# named configs: phase_diagrams/staircase/NAME.toml (a subfolder: phase_diagrams/*.toml are phase-diagram configs)
CONFIG_DIRS = config_dirs("staircase")


@dataclass
class BayesConfig:
    """The Bayesian staircase: ``heads`` lists H; for each H the task has H lags 1..H with weights
    ``ratio``^k (k = 0 strongest, lag 1), orthogonal U_k (identity U_k would let one head carry every lag).
    ``ratio`` may be a list (a sweep of the weight ratio w_2/w_1: every ratio gets its own curves)."""

    T: int = 16
    d: int = 8
    heads: list = field(default_factory=lambda: [2, 3])
    ratio: float | list = 0.6
    attention: list = field(default_factory=lambda: ["softmax", "linear"])
    inits: list = field(default_factory=lambda: ["cold", "hot"])
    P: list = field(default_factory=lambda: [int(x) for x in np.unique(np.round(np.geomspace(200, 30000, 12)))])
    sigma_A2: float = 1.0
    sigma_V2: float = 100.0
    sigma2: float = 400.0
    num_chains: int = 4
    num_warmup: int = 500
    num_samples: int = 1000

    def __post_init__(self):
        for r in self.ratios:
            if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0 < r <= 1:
                raise ValueError(
                    f"ratio={self.ratio!r}: the weight ratio w_2/w_1 must be a number in (0, 1], "
                    "or a non-empty list of them"
                )

    @property
    def ratios(self) -> list:
        r = self.ratio if isinstance(self.ratio, (list, tuple)) else [self.ratio]
        if len(r) == 0:
            raise ValueError("ratio=[]: give at least one weight ratio w_2/w_1 in (0, 1]")
        return list(r)

    def task(self, H: int, ratio: float | None = None) -> MultiLagCopyTask:
        r = self.ratios[0] if ratio is None else ratio
        return MultiLagCopyTask(
            T=self.T,
            d=self.d,
            spans=tuple((k + 1,) for k in range(H)),
            weights=tuple(r**k for k in range(H)),
            rotations="orthogonal",
        )


@dataclass
class StaircaseConfig:
    name: str = "staircase"
    parts: list = field(default_factory=lambda: list(PARTS))
    seed: int = 0
    bayes: BayesConfig = field(default_factory=BayesConfig)
    train: dict = field(default_factory=dict)  # TrainingConfig fields
    train_seeds: int = 2
    # more training runs: {name: {TrainingConfig fields overriding ``train``, and "seeds": int (default 1)}}
    train_variants: dict = field(default_factory=dict)
    train_only: list | None = None  # names of the training runs to compute ("main" and variants); None: all
    ode: dict = field(default_factory=dict)  # ODEConfig fields
    # the H-head theory (ba.theory.heads_curve) on the MCMC grid, softmax only (for linear heads the figure shows
    # the rotation-invariant capture, which the theory curve does not give): {"heads": [H...], "num_samples": n}
    theory: dict = field(default_factory=dict)

    @classmethod
    def from_toml(cls, path) -> StaircaseConfig:
        path, data = load_toml(path, CONFIG_DIRS)
        bayes = data.pop("bayes", {})
        check_keys(cls, data, path)
        cfg = cls(**data, bayes=BayesConfig(**bayes))
        for p in cfg.parts:
            check_choice("parts item", p, PARTS)
        TrainingConfig(**cfg.train)  # validate early
        theory_options(cfg.theory)
        for name, v in cfg.train_variants.items():
            TrainingConfig(**{**cfg.train, **{k: x for k, x in v.items() if k != "seeds"}})
            check_int(f"train_variants.{name}.seeds", v.get("seeds", 1), minimum=1)
        return cfg


# ------------------------------------------------------------------------------------------ the posterior
def hot_init(task: MultiLagCopyTask, H: int, attention: str, prior: Prior) -> np.ndarray:
    """(H, T, T): head h on span h mod K (the cooperative, solved configuration)."""
    pats = list(task.target_patterns.values())
    scale = None
    if attention == "linear":
        scale = np.sqrt(prior.sigma_A2 * int(task.key_mask.sum()))
    return np.stack([hot_logits(pats[h % len(pats)], task.key_mask, attention, scale) for h in range(H)])


# The label-free lag order parameter: softmax heads are exchangeable (the best head's mass on the lag, its stage at
# 3 |span| / T); linear heads can be mixed by any rotation of the heads' logits (with the readout rotated alike,
# prior and likelihood are unchanged), so per-head masses drift and the invariant is the fraction of the lag
# pattern in the span of the heads (diagnostics.observables.pattern_capture), its stage at 1/2.
LAG_OBSERVABLE = {"softmax": "mass_max", "linear": "capture"}


def point_posterior(b: BayesConfig, attention: str, H: int, P: int, seed: int):
    """The data set and posterior of one sweep point, and its sampler key: (task, prior, posterior, key). The
    data key is fold_in(key(seed), P), split into data and sampler keys."""
    task = b.task(H)
    prior = Prior(b.sigma_A2, b.sigma_V2, b.sigma2)
    k_data, k_mcmc = jax.random.split(jax.random.fold_in(jax.random.key(seed), P))
    return task, prior, Posterior(task.sample(k_data, P), attention, prior, heads=H), k_mcmc


def mcmc_point(point: dict) -> dict:
    """One (attention, H, P, init): NUTS on the closed-form posterior. Returns per chain the mean of every
    declared observable, its ESS and R-hat, and the fraction of draws in a "competitive" state (two heads with
    mass > 3 |span| / T on the same span)."""
    b = BayesConfig(**point["bayes"], heads=[point["heads"]], attention=[point["attention"]])
    H = point["heads"]
    task, prior, post, k_mcmc = point_posterior(b, point["attention"], H, point["P"], point["seed"])
    init = "cold" if point["init"] == "cold" else hot_init(task, H, point["attention"], prior)
    s = sample(post, k_mcmc, num_chains=b.num_chains, num_warmup=b.num_warmup, num_samples=b.num_samples, init=init)
    op = s.order_parameters
    alpha = np.asarray(post.model.weights(jax.numpy.asarray(s.L).reshape(-1, *post.L_shape), task.key_mask))
    comp = {}
    for name, pat in task.target_patterns.items():
        thr = 3.0 * pat[task.query_mask].sum(1).mean() / task.T
        per_head = np.einsum("nhts,ts->nh", alpha, pat) / task.query_mask.sum()
        # linear heads can be mixed by any rotation (LAG_OBSERVABLE): "two heads on one lag" has no meaning there
        comp[name] = float(np.mean(np.sum(per_head > thr, axis=1) >= 2)) if point["attention"] == "softmax" else None
    summ = s.summary()
    names = tuple(op)
    return {
        "means": {k: summ[k]["mean"] for k in names},
        "observables": {
            k: {f: summ[k][f] for f in ("mean", "std", "se", "ess_bulk", "r_hat", "chain_means")} for k in names
        },
        "diagnostics": summ["diagnostics"],
        "competitive": comp,
        "threshold": {
            n: (3.0 * len(sp) / task.T if point["attention"] == "softmax" else 0.5)
            for n, sp in zip(task.target_patterns, task.spans)
        },
    }


# P where a label-free lag mass (increasing P) first crosses its threshold, log-interpolated; None if never
transitions = first_crossing


def series_key(point: dict) -> str:
    """One curve of the sweep: "softmax/H=2/w=0.6/cold" (attention, heads, weight ratio w_2/w_1, init; a theory
    point has no init: "softmax/H=2/w=0.6")."""
    init = f"/{point['init']}" if "init" in point else ""
    return f"{point['attention']}/H={point['heads']}/w={point['bayes']['ratio']:g}{init}"


def mcmc_summary(records: list) -> dict:
    """{series_key: {"P": [...], "mass_max:lagk": [...], "P_k": {lagk: P or None}, "competitive": ...}}."""
    out: dict = {}
    for r in records:
        pt, res = r["point"], r["result"]
        key = series_key(pt)
        e = out.setdefault(
            key,
            {
                "P": [],
                "means": [],
                "competitive": [],
                "threshold": res["threshold"],
                "attention": pt["attention"],
                "heads": pt["heads"],
                "ratio": pt["bayes"]["ratio"],
                "init": pt["init"],
            },
        )
        e["P"].append(pt["P"])
        e["means"].append(res["means"])
        e["competitive"].append(res["competitive"])
    for e in out.values():
        order = np.argsort(e["P"])
        P = np.asarray(e["P"])[order]
        e["P"] = P.tolist()
        means = [e["means"][i] for i in order]
        e["means"] = {k: [m[k] for m in means] for k in means[0]}
        e["competitive"] = {k: [e["competitive"][i][k] for i in order] for k in e["competitive"][0]}
        obs = LAG_OBSERVABLE[e["attention"]]
        e["P_k"] = {
            lag: transitions(P, np.asarray(e["means"][f"{obs}:{lag}"]), thr) for lag, thr in e["threshold"].items()
        }
        comp = [x for v in e["competitive"].values() for x in v if x is not None]
        e["max_competitive"] = max(comp) if comp else None
    return out


def ratio_table(mcmc: dict) -> list:
    """The weight-ratio dependence of the stages: for every (attention, H, init) measured at two or more ratios
    w_2/w_1, rows {"ratio", "P_1", "P_2", "P2/P1"} (None where a transition is not inside the P grid), sorted by
    ratio; compare P2/P1 with (w_1/w_2)^2 = ratio^-2."""
    groups: dict = {}
    for e in mcmc.values():
        groups.setdefault((e["attention"], e["heads"], e["init"]), []).append(e)
    rows = []
    for (att, H, init), es in sorted(groups.items()):
        if len(es) < 2:
            continue
        for e in sorted(es, key=lambda e: e["ratio"]):
            p1, p2 = e["P_k"].get("lag1"), e["P_k"].get("lag2")
            rows.append(
                {
                    "attention": att,
                    "heads": H,
                    "init": init,
                    "ratio": e["ratio"],
                    "P_1": p1,
                    "P_2": p2,
                    "P2/P1": p2 / p1 if p1 and p2 else None,
                }
            )
    return rows


# ----------------------------------------------------------------------------------------- training, ODE
def train_point(point: dict) -> dict:
    cfg = TrainingConfig(**point["train"])
    t0 = time.perf_counter()
    rec = train_minimal(cfg, point["seed"])
    rec["stages"] = stage_times(rec["step"], rec["mass_last"])
    rec["train_wall_s"] = time.perf_counter() - t0
    return rec


def ode_point(point: dict) -> dict:
    from ..dynamics.ode import ODEConfig, solve
    from ..dynamics.ode import stage_times as ode_stages

    sol = solve(ODEConfig(**point["ode"]))
    return {
        "t": sol["t"],
        "loss": sol["loss"],
        "S": sol["S"][:, : max(point["ode"].get("groups", 3) + 1, 4)],
        "plateaus": sol["plateaus"],
        "stages": ode_stages(sol),
        "num_steps": sol["num_steps"],
    }


def theory_options(theory: dict) -> dict:
    unknown = set(theory) - {"heads", "num_samples"}
    if unknown:
        raise ValueError(f"theory: unknown key(s) {sorted(unknown)}; allowed: heads, num_samples")
    heads = [check_int("theory.heads item", H, minimum=1) for H in theory.get("heads", [2])]
    return {
        "heads": heads,
        "num_samples": check_int("theory.num_samples", theory.get("num_samples", 100_000), minimum=1000),
    }


def theory_point(point: dict) -> dict:
    """The H-head theory (docs/theory.md section 12) on one curve's P grid: the label-free mean mass of the best
    head per lag, and the transitions and coexistence it finds."""
    from ..bayes.theory import heads_curve

    b = BayesConfig(**point["bayes"], heads=[point["heads"]], attention=[point["attention"]])
    H = point["heads"]
    task = b.task(H)
    c = heads_curve(
        np.asarray(point["P_grid"], float),
        task=task,
        heads=H,
        attention=point["attention"],
        prior=Prior(b.sigma_A2, b.sigma_V2, b.sigma2),
        num_samples=point["num_samples"],
        seed=point["seed"],
    )
    lags = list(task.target_patterns)
    mass = np.asarray(c.mean["mass_max"])
    return {
        "P": [float(x) for x in c.P],
        "mass_max": {lag: mass[:, k].tolist() for k, lag in enumerate(lags)},
        "P_k": {lag: None if c.transitions.get(lag) is None else float(c.transitions[lag]) for lag in lags},
        "coexistence_P": c.transitions.get("coexistence_P", []),
        "binodals": c.transitions.get("binodals", []),
    }


# --------------------------------------------------------------------------------------------- driver
def points(cfg: StaircaseConfig) -> dict:
    # a point holds only what it depends on, so the same point computed under another grid is reused
    b = {k: v for k, v in dataclasses.asdict(cfg.bayes).items() if k not in ("heads", "attention", "inits", "P")}
    out = {"mcmc": [], "train": [], "ode": []}
    if "mcmc" in cfg.parts:
        out["mcmc"] = [
            {
                "method": "mcmc",
                "attention": a,
                "heads": H,
                "P": int(P),
                "init": i,
                "bayes": {**b, "ratio": float(r)},
                "seed": cfg.seed,
            }
            for r in cfg.bayes.ratios
            for a in cfg.bayes.attention
            for H in cfg.bayes.heads
            for P in cfg.bayes.P
            for i in cfg.bayes.inits
        ]
    if "train" in cfg.parts:
        tc = TrainingConfig(**cfg.train).config()
        out["train"] = [
            {"method": "train", "variant": "main", "train": tc, "seed": cfg.seed + s}
            for s in range(check_int("train_seeds", cfg.train_seeds, minimum=1))
        ]
        for name, v in cfg.train_variants.items():
            vc = TrainingConfig(**{**cfg.train, **{k: x for k, x in v.items() if k != "seeds"}}).config()
            out["train"] += [
                {"method": "train", "variant": name, "train": vc, "seed": cfg.seed + s}
                for s in range(v.get("seeds", 1))
            ]
        if cfg.train_only is not None:
            for name in cfg.train_only:
                check_choice("train_only item", name, ("main", *cfg.train_variants))
            out["train"] = [p for p in out["train"] if p["variant"] in cfg.train_only]
    if "ode" in cfg.parts:
        out["ode"] = [{"method": "ode", "ode": dict(cfg.ode)}]
    if "theory" in cfg.parts:
        th = theory_options(cfg.theory)
        out["theory"] = [
            {
                "method": "theory",
                "attention": "softmax",
                "heads": H,
                "P_grid": [int(P) for P in cfg.bayes.P],
                "bayes": {**b, "ratio": float(r)},
                "num_samples": th["num_samples"],
                "seed": cfg.seed,
            }
            for r in cfg.bayes.ratios
            for H in th["heads"]
            if "softmax" in cfg.bayes.attention
        ]
    return out


COMPUTE = {"mcmc": mcmc_point, "theory": theory_point, "train": train_point, "ode": ode_point}


def run(cfg: StaircaseConfig, out_dir, progress: bool = True) -> dict:
    """Compute every missing point (resumable), write summary.json and return it."""
    out = Path(out_dir)
    t0 = time.perf_counter()
    recs = {
        part: run_sweep(pts, COMPUTE[part], out / "points" / part, progress=progress, desc=part)
        for part, pts in points(cfg).items()
        if pts
    }
    summary = {
        "config": dataclasses.asdict(cfg),
        "versions": package_versions(),
        "wall_time_s": time.perf_counter() - t0,
    }
    if "mcmc" in recs:
        summary["mcmc"] = mcmc_summary(recs["mcmc"])
        summary["ratio_sweep"] = ratio_table(summary["mcmc"])
    if "train" in recs:
        summary["train"] = {
            "stages": [r["result"]["stages"] for r in recs["train"]],
            "variants": [r["point"].get("variant", "main") for r in recs["train"]],
            "seeds": [r["point"]["seed"] for r in recs["train"]],
            "wall_s": [r["wall_time_s"] for r in recs["train"]],
            "paper_stages": [330, 575],
        }
    if "theory" in recs:
        summary["theory"] = {
            series_key(r["point"]): {k: r["result"][k] for k in ("P_k", "coexistence_P", "binodals")}
            for r in recs["theory"]
        }
    if "ode" in recs:
        summary["ode"] = {
            "stages": recs["ode"][0]["result"]["stages"],
            "plateaus": recs["ode"][0]["result"]["plateaus"],
        }
    write_json_atomic(out / "summary.json", summary)
    return summary
