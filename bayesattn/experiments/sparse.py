"""Sparse attention patterns (issue 15; docs/sparse.md): random emergence of sparse patterns in trained
one-layer transformers and causal MLP-Mixers, and the Bayesian learnability threshold of the regression
surrogate.

A run writes, under its output folder::

    points/grid/*.json      one file per (S, s): every seed of the transformer (trained together, vmapped)
    points/heads/*.json     one file per H at fixed width
    points/head_dim/*.json  one file per head size at fixed H
    points/mixer/*.json     one file per (model, s) at fixed S
    points/bayes/*.json     one file per (S, s, P): NUTS on the closed-form posterior of the surrogate
    points/theory/*.json    one file per (S, s): the s-source order-parameter theory over P
    summary.json            config, per point: solved seeds, t* (median, range), plateau, IoU; P_c(S, s)

Every point goes through :func:`bayesattn.sweep.run_sweep` (atomic, resumable); seeds and PRNG keys are in
the point, package versions in every record.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from .._validate import check_choice, check_int
from ..bayes.posterior import Posterior, Prior
from ..bayes.sampling import sample
from ..models.attention import hot_logits
from ..sweep import package_versions, run_sweep, write_json_atomic
from ..tasks.sparse import SparseRegressionTask
from ._configs import check_keys, config_dirs, load_toml
from .sparse_training import SparseTrainConfig, train_seeds
from .staircase import transitions

PARTS = ("grid", "heads", "head_dim", "mixer", "bayes", "theory")
CONFIG_DIRS = config_dirs("sparse")
KEEP_EVERY = 10  # histories are stored every 10 steps (t* is computed at full resolution before)


@dataclass
class BayesSparseConfig:
    """The surrogate's posterior: for every (S, s) in ``grid`` and every P, NUTS (cold start, L = 0, and hot
    start on the support) on :class:`~bayesattn.SparseRegressionTask` with random supports."""

    grid: list = field(default_factory=lambda: [[8, 1], [8, 2], [8, 3], [16, 1], [16, 2], [16, 3]])
    P: list = field(default_factory=lambda: [25, 50, 100, 200, 400, 800, 1600])
    dim: int = 8
    normalize: bool = False  # y / sqrt(s): the signal per row independent of s
    sigma_A2: float = 1.0
    sigma_V2: float = 100.0
    sigma2: float = 400.0
    inits: list = field(default_factory=lambda: ["cold", "hot"])
    num_chains: int = 2
    num_warmup: int = 300
    num_samples: int = 300
    theory_P: int = 25  # values of P (geometric, P[0] .. 2 P[-1]) of the theory's curve


@dataclass
class SparseConfig:
    """Named config (phase_diagrams/sparse/NAME.toml). ``train``: :class:`SparseTrainConfig` fields shared by
    every training point; ``grid``: [S, s] pairs; ``heads``: H at the train width; ``head_dims``: head sizes
    at ``head_dim_heads`` heads; ``mixer_S``, ``mixer_s``: transformer vs Mixer across s at S = mixer_S."""

    name: str = "sparse_emergence"
    parts: list = field(default_factory=lambda: list(PARTS))
    seed: int = 0
    seeds: int = 16
    train: dict = field(default_factory=dict)
    grid: list = field(default_factory=lambda: [[8, 1], [8, 2], [8, 3], [16, 1], [16, 2], [16, 3]])
    heads: list = field(default_factory=lambda: [1, 2, 4, 8])
    head_dims: list = field(default_factory=lambda: [2, 4, 8, 16])
    head_dim_heads: int = 4
    heads_S: int = 8
    heads_s: int = 3
    mixer_S: int = 8
    mixer_s: list = field(default_factory=lambda: [1, 2, 3, 4])
    bayes: BayesSparseConfig = field(default_factory=BayesSparseConfig)

    @classmethod
    def from_toml(cls, path) -> SparseConfig:
        path, data = load_toml(path, CONFIG_DIRS)
        bayes = data.pop("bayes", {})
        check_keys(cls, data, path)
        bknown = {f.name for f in dataclasses.fields(BayesSparseConfig)}
        if set(bayes) - bknown:
            raise ValueError(
                f"config {path}: unknown [bayes] key(s) {sorted(set(bayes) - bknown)}: expected some "
                f"of {sorted(bknown)}"
            )
        cfg = cls(**data, bayes=BayesSparseConfig(**bayes))
        cfg.validate()
        return cfg

    def validate(self) -> None:
        for p in self.parts:
            check_choice("parts item", p, PARTS)
        check_int("seeds", self.seeds, minimum=1)
        for S, s in self.grid:
            self.train_config(S=S, s=s)
        for S, s in self.bayes.grid:
            SparseRegressionTask(S=S, s=s, dim=self.bayes.dim)
        for H in self.heads:
            self.train_config(S=self.heads_S, s=self.heads_s, heads=H)
        for hd in self.head_dims:
            self.train_config(S=self.heads_S, s=self.heads_s, heads=self.head_dim_heads, head_dim=hd)

    def train_config(self, **changes) -> SparseTrainConfig:
        return SparseTrainConfig(**{**self.train, **changes})


# ---------------------------------------------------------------------------------------------- training
def train_point(point: dict) -> dict:
    """All seeds of one training configuration, vmapped. Stores t*, plateau, final IoU / entropy per seed and
    the histories every KEEP_EVERY steps (accuracy as the 10-step trailing mean)."""
    cfg = SparseTrainConfig(**point["train"])
    seeds = list(range(point["seed0"], point["seed0"] + point["seeds"]))
    r = train_seeds(cfg, seeds, jax.random.key(point["key"]))
    acc = np.asarray(r["acc"])
    trail = np.stack([np.convolve(a, np.ones(10) / 10, mode="full")[: a.size] for a in acc])
    keep = np.arange(KEEP_EVERY - 1, r["steps_run"], KEEP_EVERY)
    return {
        "seeds": seeds,
        "t_star": r["t_star"],
        "plateau": r["plateau"],
        "steps_run": r["steps_run"],
        "train_wall_s": r["wall_s"],
        "iou_final": r["iou"][:, -1].tolist(),
        "entropy_final": r["entropy"][:, -1].tolist(),
        "history": {"step": (keep + 1).tolist(), "loss": r["loss"][:, keep].tolist(), "acc10": trail[:, keep].tolist()},
        "records": {"step": r["record_step"].tolist(), "iou": r["iou"].tolist(), "entropy": r["entropy"].tolist()},
        "attention_seed0": r["attention"][0].tolist(),
        "support": cfg.make_task().row_supports.tolist(),
    }


def difficulty(result: dict) -> dict:
    """Solved seeds, median and range of t* over solved seeds, mean plateau, mean final IoU, and the median
    escape step from ln 2 (first stored step with loss < ln 2 - 0.05)."""
    ts = [t for t in result["t_star"] if t is not None]
    h = result.get("history", {})
    esc = [next((st for st, l in zip(h["step"], loss) if l < np.log(2) - 0.05), None) for loss in h.get("loss", [])]
    esc = [e for e in esc if e is not None]
    return {
        "solved": len(ts),
        "seeds": len(result["t_star"]),
        "escape_median": float(np.median(esc)) if esc else None,
        "t_median": float(np.median(ts)) if ts else None,
        "t_min": min(ts) if ts else None,
        "t_max": max(ts) if ts else None,
        "plateau": float(np.mean(result["plateau"])),
        "iou": float(np.mean(result["iou_final"])),
    }


# ---------------------------------------------------------------------------------------------- posterior
def bayes_point(point: dict) -> dict:
    """NUTS on the surrogate's closed-form posterior at one (S, s, P, init). Mass on the support
    M = s m (m: the order parameter against the pattern A / s), normalised overlap u_s = s u (1 at the pattern)."""
    b = BayesSparseConfig(**point["bayes"])
    S, s, P = point["S"], point["s"], point["P"]
    task = SparseRegressionTask(S=S, s=s, dim=b.dim, seed=point["task_seed"], normalize=b.normalize)
    prior = Prior(b.sigma_A2, b.sigma_V2, b.sigma2)
    k_data, k_mcmc = jax.random.split(jax.random.key(point["key"]))
    post = Posterior(task.sample(k_data, P), "softmax", prior)
    init = "cold"
    if point["init"] == "hot":
        # logits c on the support with s e^c / (s e^c + S - s) = 0.9: 90% of every row's mass on its support
        c = float(np.log(9.0 * max(S - s, 1) / s))
        init = jnp.asarray(hot_logits(task.support, task.key_mask, "softmax", c))
    smp = sample(post, k_mcmc, num_chains=b.num_chains, num_warmup=b.num_warmup, num_samples=b.num_samples, init=init)
    m = np.asarray(smp.order_parameters["m"]).reshape(b.num_chains, -1)
    u = np.asarray(smp.order_parameters["u"]).reshape(b.num_chains, -1)
    return {
        "mass": float(s * m.mean()),
        "mass_chains": (s * m.mean(1)).tolist(),
        "mass_std": float(s * m.std()),
        "u_s": float(s * u.mean()),
        "diagnostics": smp.summary()["diagnostics"],
    }


def bayes_summary(records: list) -> dict:
    """{"S=8,s=2": {"P": [...], "mass": {init: [...]}, "excess": [...], "P_c": ...}}: excess = (M - s/S) / (1 - s/S)
    of the mass M averaged over inits (0 for uniform attention, 1 on the support); P_c: where it crosses 1/2
    (log-interpolated; None if it does not within the grid)."""
    out: dict = {}
    for r in records:
        pt = r["point"]
        e = out.setdefault(f"S={pt['S']},s={pt['s']}", {"S": pt["S"], "s": pt["s"], "by": {}})
        e["by"].setdefault(pt["init"], {})[pt["P"]] = r["result"]["mass"]
    for e in out.values():
        P = sorted(set().union(*[set(v) for v in e["by"].values()]))
        e["P"] = P
        e["mass"] = {init: [v.get(p) for p in P] for init, v in e["by"].items()}
        mean = np.array([np.mean([v[p] for v in e["by"].values() if p in v]) for p in P])
        e["mass_mean"] = mean.tolist()
        base = e["s"] / e["S"]
        excess = (mean - base) / (1 - base) if base < 1 else np.ones_like(mean)
        e["excess"] = excess.tolist()
        e["P_c"] = transitions(np.asarray(P, float), excess, 0.5)
        del e["by"]
    return out


def theory_point(point: dict) -> dict:
    """The order-parameter theory's stable excess mass over a fine grid of P, and its P_c (excess = 1/2)."""
    from ..bayes.theory.sparse import excess_curve

    b = BayesSparseConfig(**point["bayes"])
    P = np.geomspace(min(point["P"]), 2 * max(point["P"]), b.theory_P)
    r = excess_curve(
        point["S"],
        point["s"],
        P,
        normalize=b.normalize,
        sigma_A2=b.sigma_A2,
        seed=point["key"],
        d=b.dim,
        sigma2=b.sigma2,
        sigma_V2=b.sigma_V2,
    )
    r["P_c"] = transitions(P, np.asarray(r["excess"]), 0.5)
    return r


# --------------------------------------------------------------------------------------------- driver
def points(cfg: SparseConfig) -> dict:
    def tp(part, i, **changes):
        return {
            "part": part,
            "train": cfg.train_config(**changes).config(),
            "seed0": 0,
            "seeds": cfg.seeds,
            "key": cfg.seed,
        }

    out = {p: [] for p in PARTS}
    if "grid" in cfg.parts:
        out["grid"] = [tp("grid", i, S=S, s=s) for i, (S, s) in enumerate(cfg.grid)]
    if "heads" in cfg.parts:
        out["heads"] = [tp("heads", i, S=cfg.heads_S, s=cfg.heads_s, heads=H) for i, H in enumerate(cfg.heads)]
    if "head_dim" in cfg.parts:
        out["head_dim"] = [
            tp("head_dim", i, S=cfg.heads_S, s=cfg.heads_s, heads=cfg.head_dim_heads, head_dim=hd)
            for i, hd in enumerate(cfg.head_dims)
        ]
    if "mixer" in cfg.parts:
        out["mixer"] = [
            tp("mixer", 0, S=cfg.mixer_S, s=s, model=m) for m in ("transformer", "mixer") for s in cfg.mixer_s
        ]
    if "bayes" in cfg.parts:
        b = dataclasses.asdict(cfg.bayes)
        b.pop("grid"), b.pop("P"), b.pop("inits")
        out["bayes"] = [
            {
                "part": "bayes",
                "S": S,
                "s": s,
                "P": int(P),
                "init": init,
                "bayes": b,
                "task_seed": 0,
                "key": cfg.seed * 1000003 + int(P),
            }
            for S, s in cfg.bayes.grid
            for P in cfg.bayes.P
            for init in cfg.bayes.inits
        ]
    if "theory" in cfg.parts:
        b = dataclasses.asdict(cfg.bayes)
        b.pop("grid"), b.pop("P"), b.pop("inits")
        out["theory"] = [
            {"part": "theory", "S": S, "s": s, "P": [int(p) for p in cfg.bayes.P], "bayes": b, "key": cfg.seed}
            for S, s in cfg.bayes.grid
        ]
    return {k: v for k, v in out.items() if v}


def run(cfg: SparseConfig, out_dir, progress: bool = True) -> dict:
    """Compute every missing point (resumable), write summary.json and return it."""
    out = Path(out_dir)
    t0 = time.perf_counter()
    summary = {"config": dataclasses.asdict(cfg), "versions": package_versions()}
    for part, pts in points(cfg).items():
        fn = {"bayes": bayes_point, "theory": theory_point}.get(part, train_point)
        recs = run_sweep(pts, fn, out / "points" / part, progress=progress, desc=part)
        if part == "bayes":
            summary["bayes"] = bayes_summary(recs)
        elif part == "theory":
            summary["theory"] = {f"S={r['point']['S']},s={r['point']['s']}": r["result"]["P_c"] for r in recs}
        else:
            summary[part] = [
                {
                    **{k: r["point"]["train"][k] for k in ("S", "s", "model", "heads", "head_dim", "width")},
                    **difficulty(r["result"]),
                    "wall_s": r["wall_time_s"],
                }
                for r in recs
            ]
    summary["wall_time_s"] = time.perf_counter() - t0
    write_json_atomic(out / "summary.json", summary)
    return summary
