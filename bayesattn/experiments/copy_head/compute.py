"""What one grid point of the phase diagram computes: the theory of one attention, exact-posterior MCMC at one
(attention, P), Adam at one (attention, P); and MCMC points of one shape sampled together (:func:`mcmc_points`).

A point holds only what its method depends on (``DEPENDS_ON``), so its file name (a hash of the point) changes
exactly when its result would. Every method at one P uses the same data set (:func:`point_data`), recorded by
:func:`data_record`.
"""

from __future__ import annotations

import functools
import hashlib
import json

import jax
import jax.numpy as jnp
import numpy as np

from ...bayes import theory as th
from ...bayes.batched import BATCHED_METHODS, sample_many
from ...bayes.posterior import Posterior, Prior
from ...bayes.sampling import sample
from ...bayes.theory.common import covers
from ...files import to_jsonable
from ...models.attention import attention_kind
from ...tasks import Dataset
from ...training import train
from ..sections import CENTRED_TARGET
from .config import AdamSection, RunConfig


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
def point_config(point: dict) -> RunConfig:
    """The config a point depends on (the sections it carries; the rest at their defaults)."""
    data = {k: point[k] for k in ("task", "prior", "seed", "theory", "mcmc", "adam") if k in point}
    if "P_grid" in point:
        data["P"] = point["P_grid"]
    return RunConfig.load(data, source="point")


def theory_point(point: dict) -> dict:
    """Theory for one attention: the phase curve on a dense P grid, landscapes below / at / above the transition
    (where the landscape's theory covers the task: not for one-hot tokens, nor softmax with the causal boundary),
    the loss predictions (one-hot tokens: of the centred target, :func:`held_out_error`), the optional (P, vary)
    plane and finite-size scaling."""
    cfg = point_config(point)
    task, prior, att = cfg.make_task(), cfg.make_prior(), point["attention"]
    P_grid = cfg.P.grid()
    P_dense = np.unique(np.round(np.geomspace(P_grid[0], P_grid[-1], cfg.theory.num_P)).astype(int)).astype(float)
    curve = th.phase_curve(task, prior, att, P_dense)
    tr = curve.transition
    P_mark = tr.get("P_c") or float(np.median(P_dense))
    land_P = [0.6 * P_mark, P_mark, 1.5 * P_mark]
    # the grid points nearest the transition, where figure 5 overlays the theory's density on the MCMC draws
    near = sorted(P_grid.tolist(), key=lambda p: abs(np.log(p / P_mark)))[:3]
    out = {"curve": curve.to_dict()}
    if covers(task, att):  # the landscape's theory: Gaussian tokens, the cyclic boundary (linear: causal too)
        out["landscapes"] = [dict(th.landscape(task, prior, att, float(p)), P=float(p)) for p in land_P]
        out["grid_landscapes"] = [dict(th.landscape(task, prior, att, float(p)), P=float(p)) for p in sorted(near)]
    # one-hot tokens: the prediction is the centred target's error, which MCMC's held-out error measures there
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
    cfg = point_config(point)
    prior, att, P = cfg.make_prior(), point["attention"], int(point["P"])
    data = point_data(cfg.make_task(), cfg.seed, P)
    post = Posterior(data, attention=att, prior=prior)
    alpha = functools.partial(_draw_attention, post)
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


# One compiled program each for every MCMC point of a run: the posterior and the data are arguments (a posterior is
# a pytree whose task and attention are static), so points that differ in P or in their data share a compilation.
@jax.jit
def _draw_attention(post: Posterior, L: jax.Array) -> jax.Array:
    """The attention weights of draws L: (chains, draws, *L_shape)."""
    return jax.vmap(jax.vmap(post.attention_weights))(L)


@functools.partial(jax.jit, static_argnames="centred")
def _held_out_errors(
    post: Posterior, Xt: jax.Array, Yt: jax.Array, rows: jax.Array, Ls: jax.Array, centred: bool = False
) -> jax.Array:
    """Per draw L of Ls: the squared error of the readout's posterior mean at L on (Xt, Yt), query rows only, as a
    fraction of the target's variance: the mean over coordinates (N(0, I) targets) or, ``centred``, the error of
    the part orthogonal to the all-ones vector over that part's variance (d - 1)/d (one-hot targets)."""
    d = Yt.shape[-1]

    def error(L):
        mean, _ = post.predict(L, Xt)
        r = mean[:, rows] - Yt
        if centred:  # r (I - 11^T/d): the all-ones component, which the theory leaves out, removed
            r = r - r.mean(-1, keepdims=True)
            return jnp.mean(jnp.sum(r**2, -1)) / ((d - 1) / d)
        return jnp.mean(r**2)

    return jax.lax.map(error, Ls)


def held_out_error(cfg: RunConfig, post: Posterior, P: int):
    """Draws Ls -> the held-out error of the readout's posterior mean at each L, as a fraction of the target's
    variance, on MCMC_TEST_SEQUENCES held-out sequences of grid point P (key stream TEST): for Gaussian tokens the
    squared error per query row and output coordinate; for one-hot tokens that of the centred target (the part
    orthogonal to the all-ones vector, over its variance (d - 1)/d), which is what the theory's loss prediction
    gives (``theory.loss_curve``)."""
    test = cfg.make_task().sample(point_keys(cfg.seed, TEST, P), MCMC_TEST_SEQUENCES)
    rows = np.flatnonzero(np.asarray(test.task.query_mask))
    centred = cfg.task.held_out_target == CENTRED_TARGET
    return functools.partial(
        _held_out_errors, post, jnp.asarray(test.X), jnp.asarray(test.Y)[:, rows], jnp.asarray(rows), centred=centred
    )


def chain_summary(s, alpha, att: str, test_error=None) -> dict:
    """One init's entry of an MCMC point: the samples' summary, the posterior-mean attention and, given
    ``test_error`` (:func:`held_out_error`), the held-out error over MCMC_TEST_DRAWS thinned draws."""
    summ = s.summary()
    A = np.asarray(alpha(s.L))
    if attention_kind(att).sign_symmetric:
        A = A * np.sign(s.order_parameters["m"])[..., None, None]
    summ["mean_attention"] = A.mean(axis=(0, 1))
    if test_error is not None:
        Ls = np.asarray(s.L).reshape((-1,) + np.asarray(s.L).shape[2:])
        thin = Ls[np.linspace(0, len(Ls) - 1, min(MCMC_TEST_DRAWS, len(Ls))).astype(int)]
        errs = np.asarray(test_error(jnp.asarray(thin)))
        summ["test_error"] = {
            "mean": float(errs.mean()),
            "sem": float(errs.std(ddof=1) / np.sqrt(len(errs))),
            "draws": len(errs),
            "sequences": MCMC_TEST_SEQUENCES,
            **({"target": "centred"} if getattr(test_error, "keywords", {}).get("centred") else {}),
        }
    return summ


def adam_runs(
    data: Dataset, prior: Prior, attention: str, adam: AdamSection, seed: int, init_index: int, init: str
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
    cfg = point_config(point)
    P = int(point["P"])
    data = point_data(cfg.make_task(), cfg.seed, P)
    inits = {
        init: adam_runs(data, cfg.make_prior(), point["attention"], cfg.adam, cfg.seed, i, init)
        for i, init in enumerate(cfg.adam.inits)
    }
    return {"data": data_record(data), "inits": inits}


COMPUTE = {"theory": theory_point, "mcmc": mcmc_point, "adam": adam_point}


# ----------------------------------------------------------------------------------------------- the job


# ----------------------------------------------------------------------------------------------- batched MCMC
# MCMC points that differ only in P share the statistics' shapes (fixed by T and d), so their chains run as one
# compiled program (bayesattn.bayes.batched.sample_many): vmapped over the points on a GPU, one after another inside
# the program on a CPU. Each point's data and keys are those of mcmc_point, so a batched point's result is that of
# the point computed alone (on a CPU bit for bit, timings aside: tests/test_scaleout.py).
def mcmc_group_key(point: dict) -> str | None:
    """Points with the same key (everything but P) can be sampled together; None: not batchable."""
    mcmc = point.get("mcmc", {})
    if mcmc.get("backend", "blackjax") != "blackjax" or mcmc.get("method", "nuts") not in BATCHED_METHODS:
        return None
    return json.dumps(to_jsonable({k: v for k, v in point.items() if k != "P"}), sort_keys=True)


def mcmc_points(points: list[dict]) -> list[dict]:
    """``[mcmc_point(p) for p in points]`` for points of one :func:`mcmc_group_key`, one program per init."""
    if len({mcmc_group_key(p) for p in points}) != 1 or mcmc_group_key(points[0]) is None:
        raise ValueError("points: expected batchable points that differ only in P (mcmc_group_key)")
    cfg = point_config(points[0])
    att, Ps = points[0]["attention"], [int(p["P"]) for p in points]
    datas = [point_data(cfg.make_task(), cfg.seed, P) for P in Ps]
    posts = [Posterior(d, attention=att, prior=cfg.make_prior()) for d in datas]
    alphas = [functools.partial(_draw_attention, post) for post in posts]
    errors = [held_out_error(cfg, post, P) for post, P in zip(posts, Ps)]
    inits: list[dict] = [{} for _ in points]
    for i, init in enumerate(cfg.mcmc.inits):
        samples = sample_many(
            posts,
            [point_keys(cfg.seed, MCMC, P, i) for P in Ps],
            method=cfg.mcmc.method,
            num_chains=cfg.mcmc.num_chains,
            num_warmup=cfg.mcmc.num_warmup,
            num_samples=cfg.mcmc.num_samples,
            init=init,
        )
        for j, s in enumerate(samples):
            inits[j][init] = chain_summary(s, alphas[j], att, errors[j])
    return [{"data": data_record(d), "inits": ini} for d, ini in zip(datas, inits)]
