"""The training-dynamics laboratory (issue 16; docs/dynlab.md): named configs, resumable runs and summaries
of the clustering-head experiment (:mod:`.clustering_head`), the focus-dilution experiment
(:mod:`.focus_dilution`) and its equilibrium counterpart (the posterior-mean attention entropy of the copy
task against P, by MCMC).

A run writes, under its output folder::

    points/<part>/*.json   one file per batch of seeds of one setting (seeds vmapped), or per P (equilibrium)
    summary.json           config, per setting: success fraction, spikes per run, cycles per run, divergences

Every point goes through :func:`bayesattn.sweep.run_sweep` (atomic, resumable); PRNG keys are the seeds
recorded in each point.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np

from .._validate import check_choice, check_int
from ..sweep import package_versions, run_sweep, write_json_atomic
from . import clustering_head as ch
from . import focus_dilution as fd
from ._configs import check_keys, config_dirs, load_toml

EXPERIMENTS = ("clustering_head", "focus_dilution")
CONFIG_DIRS = config_dirs("dynlab")


@dataclass
class DynlabConfig:
    """``base``: fields of :class:`.clustering_head.ClusterConfig` or :class:`.focus_dilution.FDConfig`;
    ``settings``: a list of overrides of ``base`` (one grid point each; for focus-dilution ``vocab`` and
    ``ratio`` stand for ``pi = geometric_pi(vocab, ratio)``); ``optimizers`` (focus-dilution): one run per
    optimizer per setting; ``options``: per-point options of the clustering head (curv_every, frames,
    sandbox_seqs, lanczos_iter, block); ``equilibrium``: the MCMC counterpart (empty: none)."""

    name: str = "dynlab"
    experiment: str = "clustering_head"
    seed: int = 0
    seeds: int = 8
    seeds_per_point: int = 8
    base: dict = field(default_factory=dict)
    settings: list = field(default_factory=lambda: [{}])
    optimizers: list = field(default_factory=lambda: ["gd"])
    options: dict = field(default_factory=dict)
    equilibrium: dict = field(default_factory=dict)
    adam_lr: float = 0.01  # focus-dilution: the Adam step where a setting gives no lr (base lr is GD's)

    def __post_init__(self):
        check_choice("experiment", self.experiment, EXPERIMENTS)
        check_int("seeds", self.seeds, minimum=1)
        check_int("seeds_per_point", self.seeds_per_point, minimum=1)
        check_int("seed", self.seed, minimum=0)
        for o in self.optimizers:
            check_choice("optimizers item", o, fd.OPTIMIZERS)
        if not self.settings:
            raise ValueError("settings=[]: expected at least one setting (use [{}] for the base alone)")
        for s in self.settings:
            self.setting_config(s, self.optimizers[0])  # validate early

    @classmethod
    def from_toml(cls, path) -> DynlabConfig:
        path, data = load_toml(path, CONFIG_DIRS)
        check_keys(cls, data, path)
        return cls(**data)

    def setting_config(self, setting: dict, optimizer: str):
        kw = {**self.base, **setting, "seeds": 1}
        if self.experiment == "clustering_head":
            return ch.ClusterConfig(**kw)
        if "vocab" in kw or "ratio" in kw:
            kw["pi"] = fd.geometric_pi(kw.pop("vocab", 4), kw.pop("ratio", 0.25))
        opt = kw.setdefault("optimizer", optimizer)
        if opt == "adam" and "lr" not in setting:
            kw["lr"] = self.adam_lr
        return fd.FDConfig(**kw)


def label(cfg) -> str:
    if isinstance(cfg, ch.ClusterConfig):
        return f"p={cfg.p}, k={cfg.k}"
    return f"V={cfg.V}, pi=({', '.join(f'{x:.3g}' for x in cfg.pi)}), {cfg.optimizer}"


def points(cfg: DynlabConfig) -> dict:
    seeds = [cfg.seed + i for i in range(cfg.seeds)]
    chunks = [seeds[i : i + cfg.seeds_per_point] for i in range(0, len(seeds), cfg.seeds_per_point)]
    out = {"train": []}
    opts = cfg.optimizers if cfg.experiment == "focus_dilution" else ["adam"]
    for s in cfg.settings:
        for o in opts:
            c = cfg.setting_config(s, o)
            d = dataclasses.asdict(c)
            if any(p["config"] == d for p in out["train"]):
                continue  # a setting that fixes its optimizer appears once
            for chunk in chunks:
                pt = {"experiment": cfg.experiment, "label": label(c), "config": d, "seeds": chunk}
                if cfg.experiment == "clustering_head":
                    pt.update(cfg.options)
                out["train"].append(pt)
    if cfg.equilibrium:
        eq = dict(cfg.equilibrium)
        Ps = [int(P) for P in eq.pop("P")]
        Ts = eq.pop("T", 8)
        Ts = [int(T) for T in (Ts if isinstance(Ts, list) else [Ts])]
        # the first T keeps the point of a single-T config (same file); one theory point per T
        out["equilibrium"] = [{"method": "equilibrium", "P": P, **eq, "T": T, "seed": cfg.seed} for T in Ts for P in Ps]
        prior = {k: eq[k] for k in ("sigma_A2", "sigma_V2", "sigma2") if k in eq}
        out["theory"] = [{"method": "entropy_theory", "P": Ps, "T": T, "d": int(eq.get("d", 4)), **prior} for T in Ts]
    return out


def _train_point(point: dict, progress: bool = False) -> dict:
    mod = ch if point["experiment"] == "clustering_head" else fd
    return mod.run_point(point, progress=progress)


def equilibrium_point(point: dict) -> dict:
    """Posterior-mean attention entropy (and m) of the one-head softmax copy-task posterior at one P (NUTS)."""
    import jax

    from ..bayes.posterior import Posterior, Prior
    from ..bayes.sampling import sample
    from ..tasks import CopyTask

    task = CopyTask(T=int(point.get("T", 8)), d=int(point.get("d", 4)))
    prior = Prior(point.get("sigma_A2", 1.0), point.get("sigma_V2", 100.0), point.get("sigma2", 400.0))
    k_data, k_mcmc = jax.random.split(jax.random.fold_in(jax.random.key(point["seed"]), point["P"]))
    post = Posterior(task.sample(k_data, point["P"]), "softmax", prior)
    s = sample(
        post,
        k_mcmc,
        num_chains=int(point.get("num_chains", 2)),
        num_warmup=int(point.get("num_warmup", 300)),
        num_samples=int(point.get("num_samples", 300)),
    )
    summ = s.summary()
    return {
        "entropy": {f: summ["entropy"][f] for f in ("mean", "se", "r_hat")},
        "m": {f: summ["m"][f] for f in ("mean", "se", "r_hat")},
        "T": task.T,
        "uniform_entropy": float(np.log(task.T)),
    }


def theory_point(point: dict) -> dict:
    """The reduced theory's posterior-mean attention entropy against P (``bayesattn.bayes.theory.entropy_curve``)."""
    from ..bayes.posterior import Prior
    from ..bayes.theory import entropy_curve
    from ..tasks import CopyTask

    prior = Prior(point.get("sigma_A2", 1.0), point.get("sigma_V2", 100.0), point.get("sigma2", 400.0))
    ec = entropy_curve(CopyTask(T=int(point["T"]), d=int(point["d"])), prior, point["P"])
    return {k: ec[k] for k in ("P", "posterior", "m", "masked_cells", "uniform")}


# ------------------------------------------------------------------------------------------- summaries
def cluster_summary(records: list) -> dict:
    out: dict = {}
    for r in records:
        e = out.setdefault(
            r["point"]["label"],
            {"runs": 0, "success": 0, "spikes": [], "diverged": [], "final_test_acc": [], "lambda_ratio": []},
        )
        for run in r["result"]["runs"]:
            e["runs"] += 1
            e["success"] += int(run["success"])
            e["final_test_acc"].append(run["final_test_acc"])
            if run["diverged_at"] is not None:  # a failure, reported; its curve and spikes are not counted
                e["diverged"].append({"seed": run["seed"], "epoch": run["diverged_at"]})
                continue
            e["spikes"].append(len(run["spikes"]))
            for sp in run["spikes"]:
                if sp["lambda_max"] and sp["lambda_max_before"]:
                    e["lambda_ratio"].append(sp["lambda_max"] / sp["lambda_max_before"])
    for e in out.values():
        e["success_fraction"] = e["success"] / max(e["runs"], 1)
        e["mean_spikes"] = float(np.mean(e["spikes"])) if e["spikes"] else 0.0
        e["median_lambda_ratio_at_spike"] = float(np.median(e["lambda_ratio"])) if e["lambda_ratio"] else None
    return out


def stage_durations(st: dict) -> dict:
    """Steps spent in the first rank-one condensation, the first focus and the first dilution after it, and the
    period from the first focus to the restart (the next focus after a dilution); None where absent."""
    ph = st["phases"]
    f = next((i for i, p in enumerate(ph) if p["stage"] == "focus"), None)
    d = None if f is None else next((i for i in range(f + 1, len(ph)) if ph[i]["stage"] == "dilution"), None)
    nxt = None if d is None else next((p for p in ph[d + 1 :] if p["stage"] == "focus"), None)
    c = st["condensation"]
    return {
        "condensation": None if c is None else c[1] - c[0],
        "focus": None if f is None else ph[f]["end"] - ph[f]["start"],
        "dilution": None if d is None else ph[d]["end"] - ph[d]["start"],
        "period": None if nxt is None else nxt["start"] - ph[f]["start"],
    }


def fd_summary(records: list) -> dict:
    out: dict = {}
    for r in records:
        e = out.setdefault(
            r["point"]["label"],
            {
                "cycles": [],
                "first_focus_step": [],
                "condensation_end": [],
                "diverged": [],
                "seeds": [],
                "pi": r["point"].get("config", {}).get("pi"),
                "optimizer": r["point"].get("config", {}).get("optimizer"),
                "durations": [],
            },
        )
        for run in r["result"]["runs"]:
            if run["diverged_at_step"] is not None:  # reported, never counted as a converged run
                e["diverged"].append({"seed": run["seed"], "step": run["diverged_at_step"]})
                continue
            e["seeds"].append(run["seed"])
            e["cycles"].append(run["cycles"])
            ph = [p for p in run["stage_steps"]["phases"] if p["stage"] == "focus"]
            e["first_focus_step"].append(ph[0]["start"] if ph else None)
            c = run["stage_steps"]["condensation"]
            e["condensation_end"].append(None if c is None else c[1])
            e["durations"].append(stage_durations(run["stage_steps"]))
    for e in out.values():
        e["mean_cycles"] = float(np.mean(e["cycles"])) if e["cycles"] else None
    return out


def run(cfg: DynlabConfig, out_dir, progress: bool = True) -> dict:
    """Compute every missing point (resumable), write summary.json and return it."""
    out = Path(out_dir)
    t0 = time.perf_counter()
    pts = points(cfg)
    recs = {
        "train": run_sweep(
            pts["train"],
            partial(_train_point, progress=progress),
            out / "points" / "train",
            progress=progress,
            desc=cfg.experiment,
        )
    }
    if pts.get("equilibrium"):
        recs["equilibrium"] = run_sweep(
            pts["equilibrium"], equilibrium_point, out / "points" / "equilibrium", progress=progress, desc="equilibrium"
        )
    summary = {
        "config": dataclasses.asdict(cfg),
        "versions": package_versions(),
        "wall_time_s": time.perf_counter() - t0,
        "point_wall_s": [r["wall_time_s"] for r in recs["train"]],
    }
    if cfg.experiment == "clustering_head":
        summary["clustering_head"] = cluster_summary(recs["train"])
    else:
        summary["focus_dilution"] = fd_summary(recs["train"])
    if "equilibrium" in recs:
        recs["equilibrium"].sort(key=lambda r: (r["point"].get("T", 8), r["point"]["P"]))
        summary["equilibrium"] = {
            "T": [r["point"].get("T", 8) for r in recs["equilibrium"]],
            "P": [r["point"]["P"] for r in recs["equilibrium"]],
            "entropy": [r["result"]["entropy"]["mean"] for r in recs["equilibrium"]],
            "entropy_se": [r["result"]["entropy"]["se"] for r in recs["equilibrium"]],
            "m": [r["result"]["m"]["mean"] for r in recs["equilibrium"]],
        }
    if pts.get("theory"):
        th = run_sweep(pts["theory"], theory_point, out / "points" / "theory", progress=progress, desc="theory")
        summary["equilibrium_theory"] = {str(r["point"]["T"]): r["result"] for r in th}
    write_json_atomic(out / "summary.json", summary)
    return summary
