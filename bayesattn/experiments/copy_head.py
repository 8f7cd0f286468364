"""The phase-diagram job: a typed config, what one grid point of each method computes, and the driver.

A run writes, under its output folder::

    summary.json                 config, transitions per attention and method, keys, versions, wall time
    points/theory/*.json         one file per (attention[, plane]) : phase curve, landscapes, planes
    points/mcmc/*.json           one file per (attention, P): cold / hot chains, order parameters, diagnostics
    points/adam/*.json           one file per (attention, P): Adam from small and hot init over seeds
    figures/*.png, *.pdf         drawn from the files above only (``bayesattn figures`` redraws them)

Every point file holds the full point (config, seeds), its result, package versions and wall time. Points are
computed through :func:`bayesattn.sweep.run_sweep`, so an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import dataclasses
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

import jax
import numpy as np

from ..bayes import theory as th
from .._validate import check_choice, check_int
from ..models.attention import ATTENTIONS, ORDER_PARAMETER
from ..bayes.posterior import Posterior, Prior
from ..bayes.sampling import sample
from ..sweep import package_versions, run_sweep, to_jsonable, write_json_atomic
from ..tasks import CopyTask
from ..training import train_sweep

METHODS = ("theory", "mcmc", "adam")
# named configs: phase_diagrams/NAME.toml in the working directory, else in the source checkout
CONFIG_DIRS = (Path("phase_diagrams"), Path(__file__).resolve().parents[2] / "phase_diagrams")


# ----------------------------------------------------------------------------------------------- config
@dataclass
class GridConfig:
    """P values: explicit ``values``, or ``num`` points from ``start`` to ``stop`` (log- or linearly spaced)."""

    start: float = 200.0
    stop: float = 4000.0
    num: int = 12
    spacing: str = "log"
    values: list[int] = field(default_factory=list)

    def grid(self) -> np.ndarray:
        if self.values:
            P = np.asarray(self.values, dtype=int)
        else:
            check_int("P.num", self.num, minimum=1)
            check_choice("P.spacing", self.spacing, ("log", "linear"))
            if not (0 < self.start <= self.stop):
                raise ValueError(f"P.start={self.start}, P.stop={self.stop}: expected 0 < start <= stop")
            f = np.geomspace if self.spacing == "log" else np.linspace
            P = np.unique(np.round(f(self.start, self.stop, self.num)).astype(int))
        if P.size == 0 or np.any(P < 1) or np.any(np.diff(P) <= 0):
            raise ValueError(f"P={P.tolist()}: expected a non-empty increasing list of positive integers")
        return P


@dataclass
class TheoryConfig:
    num_P: int = 200  # dense grid for the theory curves
    vary_name: str = ""  # "sigma_A2" or "T": also compute the (P, vary) plane
    vary_values: list[float] = field(default_factory=list)
    T_values: list[int] = field(default_factory=list)  # finite-size scaling


@dataclass
class MCMCConfig:
    method: str = "nuts"
    backend: str = "blackjax"
    num_chains: int = 2
    num_warmup: int = 300
    num_samples: int = 500
    inits: list[str] = field(default_factory=lambda: ["cold", "hot"])


@dataclass
class AdamConfig:
    seeds: int = 4
    steps: int = 3000
    lr: float = 0.01
    inits: list[str] = field(default_factory=lambda: ["small", "hot"])
    record_every: int = 50


@dataclass
class RunConfig:
    """Everything a phase-diagram run depends on. Override from the CLI with ``--set section.key=value``."""

    name: str = "default"
    attention: list[str] = field(default_factory=lambda: ["softmax", "linear"])
    methods: list[str] = field(default_factory=lambda: ["theory", "mcmc", "adam"])
    seed: int = 0
    workers: int = 1
    # the task and prior dataclasses themselves are the config sections (validated when built)
    task: CopyTask = field(default_factory=lambda: CopyTask(T=32, d=8))
    prior: Prior = field(default_factory=Prior)
    P: GridConfig = field(default_factory=GridConfig)
    theory: TheoryConfig = field(default_factory=TheoryConfig)
    mcmc: MCMCConfig = field(default_factory=MCMCConfig)
    adam: AdamConfig = field(default_factory=AdamConfig)

    # --- construction ---
    @classmethod
    def from_dict(cls, data: dict) -> "RunConfig":
        return _from_dict(cls, data, "")

    @classmethod
    def from_toml(cls, path: str | Path) -> "RunConfig":
        path = Path(path)
        if not path.exists():
            named = [d / f"{path.stem}.toml" for d in CONFIG_DIRS if (d / f"{path.stem}.toml").exists()]
            if not named:
                names = ", ".join(sorted({p.stem for d in CONFIG_DIRS for p in d.glob("*.toml")}))
                raise ValueError(f"config={str(path)!r}: no such file or named config (named configs: {names})")
            path = named[0]
        with open(path, "rb") as f:
            try:
                data = tomllib.load(f)
            except tomllib.TOMLDecodeError as e:
                raise ValueError(f"config={str(path)!r}: invalid TOML ({e})") from None
        return cls.from_dict(data)

    def override(self, dotted: str, value: Any) -> "RunConfig":
        """Return a copy with ``section.key`` (or ``key``) set to ``value`` (coerced to the field's type)."""
        data = dataclasses.asdict(self)
        *path, last = dotted.split(".")
        node = data
        for part in path:
            if not isinstance(node.get(part), dict):
                raise ValueError(f"--set {dotted}: unknown section {part!r}")
            node = node[part]
        if last not in node:
            raise ValueError(f"--set {dotted}: unknown key {last!r} (known: {', '.join(node)})")
        node[last] = value
        return RunConfig.from_dict(data)

    def validate(self) -> "RunConfig":
        if not self.attention:
            raise ValueError("attention=[]: expected at least one of 'softmax', 'linear'")
        for a in self.attention:
            check_choice("attention", a, ATTENTIONS)
        if not self.methods:
            raise ValueError("methods=[]: expected at least one of 'theory', 'mcmc', 'adam'")
        for m in self.methods:
            check_choice("methods", m, METHODS)
        check_int("seed", self.seed, minimum=0)
        check_int("workers", self.workers, minimum=1)
        self.P.grid()
        for i in self.mcmc.inits:
            check_choice("mcmc.inits", i, ("cold", "hot", "prior"))
        for i in self.adam.inits:
            check_choice("adam.inits", i, ("small", "hot"))
        check_int("mcmc.num_chains", self.mcmc.num_chains, minimum=1)
        check_int("mcmc.num_warmup", self.mcmc.num_warmup, minimum=1)
        check_int("mcmc.num_samples", self.mcmc.num_samples, minimum=1)
        check_int("adam.seeds", self.adam.seeds, minimum=1)
        check_int("adam.steps", self.adam.steps, minimum=1)
        check_int("theory.num_P", self.theory.num_P, minimum=2)
        if self.theory.vary_name:
            check_choice("theory.vary_name", self.theory.vary_name, ("sigma_A2", "T"))
        return self

    def make_task(self) -> CopyTask:
        return self.task

    def make_prior(self) -> Prior:
        return self.prior

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _from_dict(cls, data: dict, where: str):
    if not isinstance(data, dict):
        raise ValueError(f"config section {where or 'top level'!r}: expected a table, got {data!r}")
    hints = get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(data) - names
    if unknown:
        raise ValueError(f"config {where or 'top level'}: unknown key(s) {sorted(unknown)} (known: {sorted(names)})")
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        value, hint = data[f.name], hints[f.name]
        key = f"{where}.{f.name}" if where else f.name
        if dataclasses.is_dataclass(hint):
            kwargs[f.name] = _from_dict(hint, value, key)
        else:
            kwargs[f.name] = _coerce(key, value, hint)
    return cls(**kwargs)


def _coerce(key: str, value: Any, hint) -> Any:
    """Coerce CLI strings and TOML values to the field type; ValueError naming the key otherwise."""
    origin = getattr(hint, "__origin__", None)
    try:
        if origin is list:
            (inner,) = hint.__args__
            if isinstance(value, str):
                value = [v for v in value.split(",") if v.strip()]
            return [_coerce(key, v, inner) for v in value]
        if hint is bool:
            if isinstance(value, str):
                return {"true": True, "1": True, "false": False, "0": False}[value.lower()]
            return bool(value)
        if hint is int:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            return int(value)
        if hint is float:
            return float(value)
        return str(value).strip()
    except (ValueError, TypeError, KeyError):
        raise ValueError(f"{key}={value!r}: expected {getattr(hint, '__name__', hint)}") from None


# ----------------------------------------------------------------------------------------------- keys
def point_keys(seed: int, *tags: int) -> jax.Array:
    """A key for one purpose of one grid point: fold the integer tags into the run seed."""
    key = jax.random.key(seed)
    for t in tags:
        key = jax.random.fold_in(key, int(t))
    return key


DATA, MCMC, ADAM = 1, 2, 3  # key streams: data, sampler, training are independent


# ----------------------------------------------------------------------------------------------- point functions
def theory_point(point: dict) -> dict:
    """Theory for one attention: the phase curve on a dense P grid, landscapes below / at / above the transition,
    the optional (P, vary) plane and finite-size scaling."""
    cfg = RunConfig.from_dict(point["config"])
    task, prior, att = cfg.make_task(), cfg.make_prior(), point["attention"]
    P_grid = cfg.P.grid()
    P_dense = np.unique(np.round(np.geomspace(P_grid[0], P_grid[-1], cfg.theory.num_P)).astype(int)).astype(float)
    curve = th.phase_curve(task, prior, att, P_dense)
    tr = curve.transition
    P_mark = tr.get("P_c") or float(np.median(P_dense))
    land_P = [0.6 * P_mark, P_mark, 1.5 * P_mark]
    out = {"curve": curve.to_dict(),
           "landscapes": [dict(th.landscape(task, prior, att, float(p)), P=float(p)) for p in land_P]}
    if cfg.theory.vary_name:
        out["plane"] = th.phase_diagram(task, prior, att, P_dense, vary={cfg.theory.vary_name: cfg.theory.vary_values}).to_dict()
    if cfg.theory.T_values:
        fs = th.finite_size_scaling(task, prior, att, P_dense, cfg.theory.T_values)
        out["curves_T"] = {str(T): curve.to_dict() for T, curve in fs.pop("curves").items()}
        out["finite_size"] = to_jsonable(fs)
    return out


def mcmc_point(point: dict) -> dict:
    """Exact-posterior sampling at one (attention, P), one chain group per init.

    ``mean_attention`` is E[alpha] for softmax and E[sign(m) alpha] for linear attention: that posterior is
    symmetric under L -> -L, so its plain mean is zero up to noise."""
    cfg = RunConfig.from_dict(point["config"])
    task, prior, att, P = cfg.make_task(), cfg.make_prior(), point["attention"], int(point["P"])
    data = task.sample(point_keys(cfg.seed, DATA, P), P)
    post = Posterior(data, attention=att, prior=prior)
    alpha = jax.jit(jax.vmap(jax.vmap(post.attention_weights)))
    out = {}
    for i, init in enumerate(cfg.mcmc.inits):
        s = sample(post, point_keys(cfg.seed, MCMC, P, i), method=cfg.mcmc.method, backend=cfg.mcmc.backend,
                   num_chains=cfg.mcmc.num_chains, num_warmup=cfg.mcmc.num_warmup,
                   num_samples=cfg.mcmc.num_samples, init=init)
        summ = s.summary()
        A = np.asarray(alpha(s.L))
        if att == "linear":
            A = A * np.sign(s.order_parameters["m"])[..., None, None]
        summ["mean_attention"] = A.mean(axis=(0, 1))
        out[init] = summ
    return out


def adam_point(point: dict) -> dict:
    """Adam from each init over seeds at one (attention, P)."""
    cfg = RunConfig.from_dict(point["config"])
    task, prior, att, P = cfg.make_task(), cfg.make_prior(), point["attention"], int(point["P"])
    out = {}
    for i, init in enumerate(cfg.adam.inits):
        res = train_sweep(task, prior, att, [P], list(range(cfg.adam.seeds)), point_keys(cfg.seed, ADAM, P, i),
                          optimizer="adam", lr=cfg.adam.lr, steps=cfg.adam.steps, init=init,
                          record_every=cfg.adam.record_every)
        out[init] = res.to_dict()
    return out


COMPUTE = {"theory": theory_point, "mcmc": mcmc_point, "adam": adam_point}


# ----------------------------------------------------------------------------------------------- the job
def build_points(cfg: RunConfig) -> dict[str, list[dict]]:
    """The grid points of each requested method; each point carries the full config."""
    conf = cfg.to_dict()
    pts: dict[str, list[dict]] = {}
    for method in cfg.methods:
        if method == "theory":
            pts[method] = [{"method": method, "attention": a, "config": conf} for a in cfg.attention]
        else:
            pts[method] = [{"method": method, "attention": a, "P": int(P), "config": conf}
                           for a in cfg.attention for P in cfg.P.grid()]
    return pts


def run_phase_diagram(cfg: RunConfig, out_dir: str | Path, *, progress: bool = True, figures: bool = True,
                      log=print) -> dict:
    """Run every method of ``cfg`` over its grid, write points, summary.json and figures; return the summary."""
    cfg.validate()
    out = Path(out_dir)
    t0 = time.perf_counter()
    records = {}
    for method, points in build_points(cfg).items():
        records[method] = run_sweep(points, COMPUTE[method], out / "points" / method, workers=cfg.workers,
                                    progress=progress, desc=method)
    summary = summarize(cfg, records)
    summary["wall_time_s"] = time.perf_counter() - t0
    write_json_atomic(out / "summary.json", summary)
    if figures:
        from ..plots import draw_all

        summary["figures"] = [str(p.relative_to(out)) for p in draw_all(out)]
        write_json_atomic(out / "summary.json", summary)
    for line in describe(summary):
        log(line)
    return summary


def summarize(cfg: RunConfig, records: dict[str, list[dict]]) -> dict:
    """Transitions per attention and method, from the saved records."""
    trans: dict[str, dict] = {a: {} for a in cfg.attention}
    for rec in records.get("theory", []):
        a = rec["point"]["attention"]
        trans[a]["theory"] = rec["result"]["curve"]["transition"]
    for method in ("mcmc", "adam"):
        for a in cfg.attention:
            recs = sorted((r for r in records.get(method, []) if r["point"]["attention"] == a),
                          key=lambda r: r["point"]["P"])
            if recs:
                trans[a][method] = empirical_transition(recs, method, a)
    return {"config": cfg.to_dict(), "seed": cfg.seed,
            "key_streams": {"data": DATA, "mcmc": MCMC, "adam": ADAM,
                            "rule": "fold_in(key(seed), stream, P[, init index])"},
            "transitions": trans, "versions": package_versions(),
            "points": {m: len(r) for m, r in records.items()}}


def empirical_transition(recs: list[dict], method: str, attention: str) -> dict:
    """Where a sampled / trained order parameter rises over the P grid (per init).

    ``P_jump``: geometric midpoint of the consecutive grid points with the largest rise (and ``jump``, that rise);
    ``P_onset``: the first grid P where it exceeds its value at the smallest P by 0.05 (None if it never does,
    or if it is already above 0.5 at the smallest P, i.e. the rise lies below the grid).
    """
    x = ORDER_PARAMETER[attention]
    P = np.array([r["point"]["P"] for r in recs], dtype=float)
    out = {}
    for init in recs[0]["result"]:
        if method == "mcmc":
            vals = np.array([r["result"][init][x]["mean"] for r in recs], dtype=float)
        else:
            vals = np.array([np.nanmean(np.asarray(r["result"][init]["final_order_parameters"][x], dtype=float))
                             for r in recs])
        rise = np.diff(vals)
        k = int(np.nanargmax(rise)) if rise.size and np.any(np.isfinite(rise)) else None
        onset = np.flatnonzero(vals > vals[0] + 0.05)
        out[init] = {
            "P_jump": float(np.sqrt(P[k] * P[k + 1])) if k is not None and rise[k] > 0.05 else None,
            "jump": float(rise[k]) if k is not None else None,
            "P_onset": float(P[onset[0]]) if onset.size and vals[0] <= 0.5 else None,
            "below_grid": bool(vals[0] > 0.5),
            "P": P.tolist(), x: vals.tolist(),
        }
    return out


def describe(summary: dict) -> list[str]:
    lines = []
    for a, tr in summary["transitions"].items():
        if "theory" in tr:
            t = tr["theory"]
            sp = ", spinodals at P = " + ", ".join(f"{s:.0f}" for s in t["spinodals"]) if t.get("spinodals") else ""
            pc = f"P_c = {t['P_c']:.0f}" if t.get("P_c") else "no transition in the P range"
            lines.append(f"{a}: theory: {t['order']} order, {pc}{sp}")
        for method in ("mcmc", "adam"):
            x = ORDER_PARAMETER[a]
            for init, v in tr.get(method, {}).items():
                if v["below_grid"]:
                    where = f"{x} > 0.5 already at the smallest P"
                elif v["P_onset"] is None:
                    where = f"{x} does not rise within the P range"
                else:
                    where = f"{x} rises from P ~ {v['P_onset']:.0f}"
                    if v["P_jump"]:
                        where += f"; steepest rise ({v['jump']:+.2f}) around P ~ {v['P_jump']:.0f}"
                lines.append(f"{a}: {method} ({init} start): {where}")
    return lines
