"""The phase-diagram job: a typed config, what one grid point of each method computes, and the driver.

A run writes, under its output folder::

    summary.json                 config, transitions, key rules, provenance, versions, wall and compute time
    points/theory/*.json         one file per attention: phase curve, landscapes, planes
    points/mcmc/*.json           one file per (attention, P): data record, cold / hot chains, diagnostics
    points/adam/*.json           one file per (attention, P): data record, Adam from small and hot init
    figures/*.png, *.pdf         drawn from the files above only (``bayesattn figures`` redraws them)

A point holds only what its method depends on (``DEPENDS_ON``), so its file name (a hash of the point) changes
exactly when its result would. Every method at one P uses the same data set (:func:`point_data`), recorded by
:func:`data_record`. Points are computed through :func:`bayesattn.sweep.run_sweep`, so an interrupted run
resumes where it stopped."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from ..bayes import theory as th
from ..bayes.posterior import Posterior, Prior
from ..bayes.sampling import sample
from ..models.attention import ORDER_PARAMETER
from ..sweep import SweepError, point_id, prepare_output_dir, provenance, run_sweep, to_jsonable, write_json_atomic
from ..tasks import Dataset
from ..training import train

# the config lives in its own module; its names stay importable from here
from ._copy_head_config import CONFIG_DIRS, METHODS, AdamConfig, GridConfig, MCMCConfig, RunConfig, TheoryConfig  # noqa: F401

# what each method's grid point depends on, besides attention, task and prior (its cache key; docs: README)
DEPENDS_ON = {"theory": ("theory", "P"), "mcmc": ("mcmc", "seed"), "adam": ("adam", "seed")}


# ----------------------------------------------------------------------------------------------- keys, data
def point_keys(seed: int, *tags: int) -> jax.Array:
    """A key for one purpose of one grid point: fold the integer tags into the run seed."""
    key = jax.random.key(seed)
    for t in tags:
        key = jax.random.fold_in(key, int(t))
    return key


DATA, MCMC, ADAM, TEST = 1, 2, 3, 4  # key streams: data, sampler, training, held-out data are independent
KEY_RULES = {
    "data": "fold_in(key(seed), 1, P)",
    "mcmc": "fold_in(key(seed), 2, P, init index)",
    "adam": "fold_in(key(seed), 3, P, init index, run index)",
    "test": "fold_in(key(seed), 4, P): MCMC_TEST_SEQUENCES held-out sequences for the test error",
}
MCMC_TEST_SEQUENCES = 256  # held-out sequences on which each thinned posterior draw's test error is measured
MCMC_TEST_DRAWS = 64  # thinned draws per init for the test error


def point_data(task, seed: int, P: int) -> Dataset:
    """The P training sequences of grid point P: every method at that point sees exactly these."""
    return task.sample(point_keys(seed, DATA, P), P)


def data_record(data: Dataset) -> dict:
    """What identifies a data set in a result file: its size, its key rule and a SHA-256 of (X, Y)."""
    h = hashlib.sha256()
    for a in (data.X, data.Y):
        a = np.ascontiguousarray(np.asarray(a, dtype=np.float64))
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return {"P": data.P, "n": data.n, "key": KEY_RULES["data"], "sha256": h.hexdigest()}


# ----------------------------------------------------------------------------------------------- point functions
def _point_config(point: dict) -> RunConfig:
    """The config a point depends on (the sections it carries; the rest at their defaults)."""
    data = {k: point[k] for k in ("task", "prior", "seed", "theory", "mcmc", "adam") if k in point}
    if "P_grid" in point:
        data["P"] = point["P_grid"]
    return RunConfig.from_dict(data)


def theory_point(point: dict) -> dict:
    """Theory for one attention: the phase curve on a dense P grid, landscapes below / at / above the transition,
    the optional (P, vary) plane and finite-size scaling."""
    cfg = _point_config(point)
    task, prior, att = cfg.make_task(), cfg.make_prior(), point["attention"]
    P_grid = cfg.P.grid()
    P_dense = np.unique(np.round(np.geomspace(P_grid[0], P_grid[-1], cfg.theory.num_P)).astype(int)).astype(float)
    curve = th.phase_curve(task, prior, att, P_dense)
    tr = curve.transition
    P_mark = tr.get("P_c") or float(np.median(P_dense))
    land_P = [0.6 * P_mark, P_mark, 1.5 * P_mark]
    # the grid points nearest the transition, where figure 5 overlays the theory's density on the MCMC draws
    near = sorted(P_grid.tolist(), key=lambda p: abs(np.log(p / P_mark)))[:3]
    out = {
        "curve": curve.to_dict(),
        "landscapes": [dict(th.landscape(task, prior, att, float(p)), P=float(p)) for p in land_P],
        "grid_landscapes": [dict(th.landscape(task, prior, att, float(p)), P=float(p)) for p in sorted(near)],
    }
    out["losses"] = th.loss_curve(task, prior, att, P_dense, curve=curve)
    if cfg.theory.vary_name:
        out["plane"] = th.phase_diagram(
            task, prior, att, P_dense, vary={cfg.theory.vary_name: cfg.theory.vary_values}
        ).to_dict()
    if cfg.theory.T_values:
        fs = th.finite_size_scaling(task, prior, att, P_dense, cfg.theory.T_values)
        out["curves_T"] = {str(T): curve.to_dict() for T, curve in fs.pop("curves").items()}
        out["finite_size"] = to_jsonable(fs)
    return out


def mcmc_point(point: dict) -> dict:
    """Exact-posterior sampling at one (attention, P), one chain group per init, on :func:`point_data`.

    ``mean_attention`` is E[alpha] for softmax and E[sign(m) alpha] for linear attention: that posterior is
    symmetric under L -> -L, so its plain mean is zero up to noise."""
    cfg = _point_config(point)
    prior, att, P = cfg.make_prior(), point["attention"], int(point["P"])
    data = point_data(cfg.make_task(), cfg.seed, P)
    post = Posterior(data, attention=att, prior=prior)
    alpha = jax.jit(jax.vmap(jax.vmap(post.attention_weights)))
    test_error = held_out_error(cfg, post, P)
    inits = {}
    for i, init in enumerate(cfg.mcmc.inits):
        s = sample(
            post,
            point_keys(cfg.seed, MCMC, P, i),
            method=cfg.mcmc.method,
            backend=cfg.mcmc.backend,
            num_chains=cfg.mcmc.num_chains,
            num_warmup=cfg.mcmc.num_warmup,
            num_samples=cfg.mcmc.num_samples,
            init=init,
        )
        inits[init] = chain_summary(s, alpha, att, test_error)
    return {"data": data_record(data), "inits": inits}


def held_out_error(cfg: RunConfig, post: Posterior, P: int):
    """L -> the squared error per query row and output coordinate of the readout's posterior mean at L, on
    MCMC_TEST_SEQUENCES held-out sequences of grid point P (key stream TEST)."""
    test = cfg.make_task().sample(point_keys(cfg.seed, TEST, P), MCMC_TEST_SEQUENCES)
    rows = np.flatnonzero(np.asarray(test.task.query_mask))
    Xt, Yt = jnp.asarray(test.X), jnp.asarray(test.Y)[:, rows]

    @jax.jit
    def error(L):
        mean, _ = post.predict(L, Xt)
        return jnp.mean((mean[:, rows] - Yt) ** 2)

    return error


def chain_summary(s, alpha, att: str, test_error=None) -> dict:
    """One init's entry of an MCMC point: the samples' summary, the posterior-mean attention and, given
    ``test_error`` (:func:`held_out_error`), the held-out error over MCMC_TEST_DRAWS thinned draws."""
    summ = s.summary()
    A = np.asarray(alpha(s.L))
    if att == "linear":
        A = A * np.sign(s.order_parameters["m"])[..., None, None]
    summ["mean_attention"] = A.mean(axis=(0, 1))
    if test_error is not None:
        Ls = np.asarray(s.L).reshape((-1,) + np.asarray(s.L).shape[2:])
        thin = Ls[np.linspace(0, len(Ls) - 1, min(MCMC_TEST_DRAWS, len(Ls))).astype(int)]
        errs = np.asarray(jax.lax.map(test_error, jnp.asarray(thin)))
        summ["test_error"] = {
            "mean": float(errs.mean()),
            "sem": float(errs.std(ddof=1) / np.sqrt(len(errs))),
            "draws": len(errs),
            "sequences": MCMC_TEST_SEQUENCES,
        }
    return summ


def adam_runs(
    data: Dataset, prior: Prior, attention: str, adam: AdamConfig, seed: int, init_index: int, init: str
) -> dict:
    """``adam.seeds`` Adam runs from ``init`` on the same ``data``; runs differ only in their init / noise key.
    Histories are (runs, records) arrays, final order parameters (runs,)."""
    runs = [
        train(
            data,
            prior,
            attention,
            point_keys(seed, ADAM, data.P, init_index, r),
            optimizer="adam",
            lr=adam.lr,
            steps=adam.steps,
            init=init,
            record_every=adam.record_every,
            log_records=adam.log_records,
            seed=r,
        )
        for r in range(adam.seeds)
    ]
    hist = {k: np.stack([np.asarray(r.history[k]) for r in runs]) for k in runs[0].history if k != "L"}
    config = {k: v for k, v in runs[0].config.items() if k not in ("seed", "task", "prior", "attention", "P")}
    return {
        "runs": list(range(adam.seeds)),
        "config": config,
        "history": hist,
        "final_order_parameters": {k: [r.final_order_parameters[k] for r in runs] for k in ("m", "q", "u")},
        "final_L": np.stack([np.asarray(r.final_params[0]) for r in runs]),
        "emergence": [r.emergence("m") for r in runs],
        "failures": [{"run": i, "message": r.failure} for i, r in enumerate(runs) if r.failure],
    }


def adam_point(point: dict) -> dict:
    """Adam from each init over ``adam.seeds`` runs at one (attention, P), on :func:`point_data`."""
    cfg = _point_config(point)
    P = int(point["P"])
    data = point_data(cfg.make_task(), cfg.seed, P)
    inits = {
        init: adam_runs(data, cfg.make_prior(), point["attention"], cfg.adam, cfg.seed, i, init)
        for i, init in enumerate(cfg.adam.inits)
    }
    return {"data": data_record(data), "inits": inits}


COMPUTE = {"theory": theory_point, "mcmc": mcmc_point, "adam": adam_point}


# ----------------------------------------------------------------------------------------------- the job
def build_points(cfg: RunConfig) -> dict[str, list[dict]]:
    """The grid points of each requested method. A point carries only what its method depends on (its config
    section, the task, the prior and, for sampling and training, the seed and P), so that its file name, a
    hash of the point, changes exactly when its result would."""
    conf = cfg.to_dict()
    pts: dict[str, list[dict]] = {}
    for method in cfg.methods:
        base = {"method": method, "task": conf["task"], "prior": conf["prior"]}
        base.update({("P_grid" if k == "P" else k): conf[k] for k in DEPENDS_ON[method]})
        if method == "theory":
            pts[method] = [{**base, "attention": a} for a in cfg.attention]
        else:  # an MCMC point carries its attention's sampler settings (mcmc.by_attention applied)
            per = {a: {"mcmc": cfg.mcmc.effective(a)} if method == "mcmc" else {} for a in cfg.attention}
            pts[method] = [{**base, **per[a], "attention": a, "P": int(P)} for a in cfg.attention for P in cfg.P.grid()]
    return pts


def run_phase_diagram(
    cfg: RunConfig,
    out_dir: str | Path,
    *,
    progress: bool = True,
    figures: bool = True,
    log=print,
    executor=None,
    batch: int = 1,
) -> dict:
    """Run every method of ``cfg`` over its grid, write points, summary.json and figures; return the summary.

    ``out_dir`` is created and checked for writing before any work (ValueError naming it otherwise).
    ``executor``: where points run (:func:`bayesattn.scaleout.sweep_executor`; default: ``cfg.workers``
    processes); ``batch``: MCMC points of one shape sampled ``batch`` at a time in one program
    (``experiments/batched.py``). A failed point does not stop the other methods: SweepError at the end."""
    from .batched import mcmc_batch

    cfg.validate()
    out = prepare_output_dir(out_dir, "out_dir")
    t0 = time.perf_counter()
    records, resumed, errors = {}, 0, []
    for method, points in build_points(cfg).items():
        folder = out / "points" / method
        resumed += sum((folder / f"{point_id(p)}.json").exists() for p in points)
        try:
            records[method] = run_sweep(
                points,
                COMPUTE[method],
                folder,
                workers=cfg.workers,
                executor=executor,
                progress=progress,
                desc=method,
                batch=mcmc_batch(batch) if method == "mcmc" else None,
            )
        except SweepError as e:
            errors.append(e)
    if errors:
        raise SweepError("; ".join(map(str, errors)), [f for e in errors for f in e.failures])
    summary = summarize(cfg, records)
    summary["points_resumed"] = resumed
    summary["points_computed"] = sum(map(len, records.values())) - resumed

    def finish(**extra):
        summary.update(extra, wall_time_s=time.perf_counter() - t0)
        write_json_atomic(out / "summary.json", summary)

    finish()
    if figures:
        from ..plots import draw_all

        finish(figures=[str(p.relative_to(out)) for p in draw_all(out)])
    for line in describe(summary):
        log(line)
    return summary


def summarize(cfg: RunConfig, records: dict[str, list[dict]]) -> dict:
    """Transitions per attention and method, from the saved records, and the total compute time (the sum of
    the points' own times, whichever run computed them)."""
    trans: dict[str, dict] = {a: {} for a in cfg.attention}
    for rec in records.get("theory", []):
        a = rec["point"]["attention"]
        trans[a]["theory"] = rec["result"]["curve"]["transition"]
    for method in ("mcmc", "adam"):
        for a in cfg.attention:
            recs = sorted(
                (r for r in records.get(method, []) if r["point"]["attention"] == a), key=lambda r: r["point"]["P"]
            )
            if recs:
                trans[a][method] = empirical_transition(recs, method, a)
    prov = provenance()
    compute = {m: float(sum(r["wall_time_s"] for r in recs)) for m, recs in records.items()}
    return {
        "config": cfg.to_dict(),
        "seed": cfg.seed,
        "key_streams": {"data": DATA, "mcmc": MCMC, "adam": ADAM, "rules": KEY_RULES},
        "transitions": trans,
        "versions": prov.pop("versions"),
        "provenance": prov,
        "points": {m: len(r) for m, r in records.items()},
        "compute_time_s": float(sum(compute.values())),
        "compute_time_s_by_method": compute,
    }


def final_values(result: dict, method: str, x: str) -> np.ndarray:
    """Per-init final values of ``x`` in one point's result: MCMC posterior means (1 value), Adam runs (runs,)."""
    if method == "mcmc":
        return np.array([result[x]["mean"]], dtype=float)
    return np.asarray(result["final_order_parameters"][x], dtype=float).ravel()


def empirical_transition(recs: list[dict], method: str, attention: str) -> dict:
    """Where a sampled / trained order parameter rises over the P grid (per init).

    ``rise_between``: the two neighbouring grid values of P with the largest increase of the order parameter,
    and ``rise``, that increase; ``P_jump``: their geometric midpoint (None when no increase exceeds 0.05);
    ``below_grid``: already above 0.5 at the smallest P (the rise lies below the grid).
    """
    x = ORDER_PARAMETER[attention]
    P = np.array([r["point"]["P"] for r in recs], dtype=float)
    out = {}
    for init in recs[0]["result"]["inits"]:
        vals = np.array([np.nanmean(final_values(r["result"]["inits"][init], method, x)) for r in recs])
        rise = np.diff(vals)
        k = int(np.nanargmax(rise)) if rise.size and np.any(np.isfinite(rise)) else None
        big = k is not None and rise[k] > 0.05
        out[init] = {
            "rise_between": [float(P[k]), float(P[k + 1])] if big else None,
            "rise": float(rise[k]) if k is not None else None,
            "P_jump": float(np.sqrt(P[k] * P[k + 1])) if big else None,
            "below_grid": bool(vals[0] > 0.5),
            "P": P.tolist(),
            x: vals.tolist(),
        }
    return out


def describe(summary: dict) -> list[str]:
    """The printed summary: one line per attention and method."""
    lines = []
    for a, tr in summary["transitions"].items():
        if "theory" in tr:
            t = tr["theory"]
            sp = ", spinodals at P = " + ", ".join(f"{s:.0f}" for s in t["spinodals"]) if t.get("spinodals") else ""
            kind = "smooth crossover" if t["order"] == "crossover" else f"{t['order']}-order transition"
            pc = f"P_c = {t['P_c']:.0f}" if t.get("P_c") else "not within the P range"
            lines.append(f"{a}: theory: {kind}, {pc}{sp}")
        for method in ("mcmc", "adam"):
            x = ORDER_PARAMETER[a]
            for init, v in tr.get(method, {}).items():
                P, vals = v["P"], v[x]
                span = f"{x} = {vals[0]:.2f} at P = {P[0]:.0f}, {vals[-1]:.2f} at P = {P[-1]:.0f}"
                if v["below_grid"]:
                    where = "already above 0.5 at the smallest P"
                elif v["rise_between"] is None:
                    where = "no rise above 0.05 between neighbouring grid points"
                else:
                    lo, hi = v["rise_between"]
                    where = f"largest rise {v['rise']:+.2f} between P = {lo:.0f} and {hi:.0f}"
                lines.append(f"{a}: {method} ({init} start): {span}; {where}")
    return lines
