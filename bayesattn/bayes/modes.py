"""Mode weights at a first-order transition: the evidence of each branch by tempered SMC from a reference fitted
to that branch (docs/theory.md section 5).

SMC from the prior cannot give the weights where the prior barely covers a branch (the softmax copy branch at
the T = 64 binodal: weight 0.01 from the prior against the theory's 0.52). Here each branch b gets its own
reference q_b, a diagonal Gaussian fitted to draws on that branch (e.g. NUTS chains started there), and
``tempered_smc`` is run with q_b as its "prior" and p(L, D) / q_b(L) as its "likelihood". Its particles stay on
the branch (they cross the barrier only through MCMC moves), so its log evidence estimates
log Z_b = log int_{branch b} p(L, D) dL, and the weights are w_b = Z_b / sum Z.

>>> import jax, numpy as np, jax.numpy as jnp
>>> logp = lambda x: jnp.logaddexp(jnp.log(0.25) - 0.5 * jnp.sum((x - 5) ** 2), jnp.log(0.75) - 0.5 * jnp.sum((x + 5) ** 2))
>>> refs = {"a": (np.full(2, 5.0), np.ones(2)), "b": (np.full(2, -5.0), np.ones(2))}
>>> mw = branch_evidences(logp, jax.random.key(0), refs, runs=2, num_particles=200)
>>> bool(abs(mw.weights["a"] - 0.25) < 0.05)
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

from .._json import to_plain
from .._validate import (
    brief,
    check_between,
    check_callable,
    check_int,
    check_key,
    check_keywords,
    check_real_dtype,
    keyword_only,
)
from ..diagnostics.observables import declared
from .posterior import Posterior, check_posterior
from .samplers.smc import tempered_smc
from .samples import Samples, draw_observables, key_data

MIN_STD = 1e-3  # floor of a fitted reference's standard deviation (a coordinate a branch pins exactly)


@dataclass
class ModeWeights:
    """Evidence and weight of each branch.

    log_evidence[b]: log Z_b (runs combined in Z, where the SMC estimator is unbiased); log_evidence_se[b]: its
    standard error (delta method over runs); log_evidence_runs[b]: per run; weights[b] = Z_b / sum Z and
    weights_se[b] (delta method); log_odds[b]: log Z_b - log Z of the first branch; observable_range[b]:
    (min, max) of the observable that tells the branches apart over each branch's final particles, when known.
    """

    names: list
    log_evidence: dict
    log_evidence_se: dict
    log_evidence_runs: dict
    weights: dict
    weights_se: dict
    log_odds: dict
    observable_range: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return to_plain(
            {
                k: getattr(self, k)
                for k in (
                    "names",
                    "log_evidence",
                    "log_evidence_se",
                    "log_evidence_runs",
                    "weights",
                    "weights_se",
                    "log_odds",
                    "observable_range",
                    "config",
                )
            },
            nonfinite="string",
        )


def _mean_std(name: str, ref: Any, shape: tuple | None) -> tuple[np.ndarray, np.ndarray]:
    """A (mean, std) reference given as a tuple, checked: both of ``shape`` (None: the mean's), finite, std > 0."""
    if not (isinstance(ref, tuple) and len(ref) == 2):
        raise ValueError(
            f"branches[{name!r}]={type(ref).__name__}: expected a (mean, std) tuple of the position's shape"
        )
    try:
        mean, std = (np.asarray(check_real_dtype("mean, std", x), np.float64) for x in ref)
    except (TypeError, ValueError):  # text, objects, complex numbers (cut to their real part before)
        raise ValueError(f"branches[{name!r}]: expected a (mean, std) tuple of real numeric arrays") from None
    shape = mean.shape if shape is None else shape
    if mean.shape != shape or std.shape != shape:
        raise ValueError(f"branches[{name!r}] = (mean, std) of shapes {mean.shape}, {std.shape}: expected {shape} each")
    if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(std)) and np.all(std > 0)):
        raise ValueError(f"branches[{name!r}]: expected a finite mean and a positive finite std")
    return mean, std


def _reference(name: str, ref: Any, shape: tuple) -> tuple[np.ndarray, np.ndarray]:
    """(mean, std) of shape ``shape`` from a Samples, an array of draws (n, *shape) or a (mean, std) tuple."""
    if isinstance(ref, Samples):
        ref = np.asarray(ref.L).reshape(-1, *ref.L.shape[2:])
    if isinstance(ref, tuple):
        return _mean_std(name, ref, shape)
    if isinstance(ref, list) and len(ref) == 2:  # [mean, std] and two draws look alike: say which is meant
        raise ValueError(
            f"branches[{name!r}] is a list of two: ambiguous; give a (mean, std) pair as a tuple, or draws as an "
            f"array (n, {', '.join(map(str, shape))})"
        )
    try:
        draws = np.asarray(ref)
    except (TypeError, ValueError):
        raise ValueError(
            f"branches[{name!r}]={type(ref).__name__}: expected Samples, draws (n, {shape}) or a (mean, std) tuple"
        ) from None
    # Dataset.from_arrays' check: complex draws were cut to their real part and a text array parsed as numbers
    draws = np.asarray(check_real_dtype(f"branches[{name!r}]", draws), np.float64)
    if draws.ndim != len(shape) + 1 or draws.shape[1:] != shape or draws.shape[0] < 2:
        raise ValueError(
            f"branches[{name!r}] has shape {draws.shape}: expected draws (n >= 2, "
            f"{', '.join(map(str, shape))}), Samples or a (mean, std) tuple"
        )
    if not np.all(np.isfinite(draws)):
        raise ValueError(f"branches[{name!r}] contains NaN or inf draws")
    return draws.mean(axis=0), np.maximum(draws.std(axis=0), MIN_STD)


def _log_q(mean, std):
    def log_q(x):
        z = (x - mean) / std
        return -0.5 * jnp.sum(z**2 + 2 * jnp.log(std) + jnp.log(2 * jnp.pi))

    return log_q


def branch_evidences(
    logdensity_fn,
    key: jax.Array,
    branches: dict,
    *,
    runs: int = 4,
    num_particles: int = 256,
    num_mcmc_steps: int = 50,
    target_ess: float = 0.9,
    num_integration_steps: int = 8,
    initial_step_size: float = 0.1,
    max_steps: int = 500,
    observable_fn=None,
) -> ModeWeights:
    """Log evidence and weight of each branch of an unnormalised density ``logdensity_fn`` (jax-traceable, of
    one position). branches: {name: (mean, std)} of diagonal Gaussian references (a tuple of two arrays of the
    position's shape, std > 0). ``runs`` independent SMC runs of ``num_particles`` each per branch (key: a PRNG
    key). observable_fn: optional map position -> scalar, whose range over each branch's final particles is
    reported.
    """
    check_key("key", key)
    runs = check_int("runs", runs, minimum=1)
    num_particles = check_int("num_particles", num_particles, minimum=2)
    check_callable("logdensity_fn", logdensity_fn, "a function of one position")
    check_callable("observable_fn", observable_fn, "a function of one position", optional=True)
    if not isinstance(branches, dict) or len(branches) < 2:
        raise ValueError(f"branches={brief(branches)}: expected a dict of at least two named references")
    names = list(branches)
    shape = _mean_std(names[0], branches[names[0]], None)[0].shape  # the first reference's, which all must share
    refs = {name: _mean_std(name, ref, shape) for name, ref in branches.items()}
    for name, (mean, _) in refs.items():  # a density that is not finite where a branch is centred gives NaN weights
        at = float(logdensity_fn(jnp.asarray(mean, jnp.float64)))
        if not math.isfinite(at):
            raise ValueError(f"logdensity_fn is {at} at the mean of branch {name!r}: expected a finite log density")

    @jax.jit
    def one(k, mean, std):  # one compilation for every branch and run (the reference is an argument)
        log_q = _log_q(mean, std)
        k0, k1 = jax.random.split(k)
        x0 = mean + std * jax.random.normal(k0, (num_particles, *mean.shape), jnp.float64)
        res = tempered_smc(
            log_q,
            lambda x: logdensity_fn(x) - log_q(x),
            k1,
            x0,
            target_ess=target_ess,
            num_mcmc_steps=num_mcmc_steps,
            num_integration_steps=num_integration_steps,
            initial_step_size=initial_step_size,
            max_steps=max_steps,
        )
        obs = jax.vmap(observable_fn)(res["particles"]) if observable_fn is not None else jnp.zeros(num_particles)
        return res["log_evidence"], res["tempering_param"], jnp.min(obs), jnp.max(obs)

    out = {"runs": {}, "range": {}}
    for j, name in enumerate(names):
        mean, std = (jnp.asarray(x, jnp.float64) for x in refs[name])
        rows = [one(k, mean, std) for k in jax.random.split(jax.random.fold_in(key, j), runs)]
        if any(float(r[1]) < 1.0 for r in rows):
            raise RuntimeError(f"branch {name!r}: SMC stopped before reaching the target (max_steps={max_steps})")
        if not all(math.isfinite(float(r[0])) for r in rows):
            raise RuntimeError(
                f"branch {name!r}: the log evidence is not finite in a run ({[float(r[0]) for r in rows]}): "
                "logdensity_fn gives NaN or inf on some of the branch's particles"
            )
        out["runs"][name] = np.array([float(r[0]) for r in rows])
        out["range"][name] = (min(float(r[2]) for r in rows), max(float(r[3]) for r in rows))
    lz_runs = out["runs"]
    lz = {b: float(logsumexp(v) - math.log(v.size)) for b, v in lz_runs.items()}
    # delta method: se(log Zhat) = sd(Z_runs) / (sqrt(runs) mean(Z_runs)), computed relative to the max run
    se = {}
    for b, v in lz_runs.items():
        z = np.exp(v - v.max())
        se[b] = float(np.std(z, ddof=1) / (math.sqrt(v.size) * z.mean())) if v.size > 1 else math.nan
    vals = np.array([lz[b] for b in names])
    w = np.exp(vals - logsumexp(vals))
    # d w_b / d log Z_c = w_b (delta_bc - w_c): independent branch estimates
    se_vec = np.array([se[b] for b in names])
    jac = np.diag(w) - np.outer(w, w)
    w_se = np.sqrt((jac**2) @ (se_vec**2))
    return ModeWeights(
        names=names,
        log_evidence=lz,
        log_evidence_se=se,
        log_evidence_runs={b: v.tolist() for b, v in lz_runs.items()},
        weights={b: float(x) for b, x in zip(names, w)},
        weights_se={b: float(x) for b, x in zip(names, w_se)},
        log_odds={b: lz[b] - lz[names[0]] for b in names},
        observable_range=out["range"] if observable_fn is not None else {},
        config={
            "runs": runs,
            "num_particles": num_particles,
            "num_mcmc_steps": num_mcmc_steps,
            "target_ess": target_ess,
            "num_integration_steps": num_integration_steps,
            "initial_step_size": initial_step_size,
            "max_steps": max_steps,
            "key": key_data(key),
        },
    )


def mode_weights(
    posterior: Posterior,
    key: jax.Array,
    branches: dict,
    *,
    runs: int = 4,
    num_particles: int = 256,
    num_mcmc_steps: int = 50,
    target_ess: float = 0.9,
    **smc_options,
) -> ModeWeights:
    """Weight of each branch of the posterior over L (e.g. the uniform and the copy branch inside a coexistence
    window): ``branch_evidences`` on ``posterior.log_density``.

    branches: {name: reference}, each a :class:`Samples` on that branch, draws (n, *L_shape) or a (mean, std)
    tuple of L_shape arrays; a diagonal Gaussian is fitted to draws. The branches must be told apart by the
    attention's order parameter (m for softmax, u for linear): overlapping references raise ValueError, and the
    order parameter's range over each branch's final particles is reported (``observable_range``) so that a run
    that crossed the barrier shows.

    >>> # s_low = ba.sample(post, k1, init="cold"); s_high = ba.sample(post, k2, init="hot")
    >>> # mw = ba.mode_weights(post, k3, {"uniform": s_low, "copy": s_high}); mw.weights["copy"]
    """
    # the options are branch_evidences', but an unknown one is named here (observable_fn is mode_weights' own)
    check_keywords("mode_weights", smc_options, [k for k in keyword_only(branch_evidences) if k != "observable_fn"])
    check_key("key", key)
    check_posterior(posterior)
    check_between("target_ess", target_ess, 0, 1)
    if not isinstance(branches, dict) or len(branches) < 2:
        raise ValueError(f"branches={brief(branches)}: expected a dict of at least two named references")
    shape = posterior.L_shape
    refs = {name: _reference(name, ref, shape) for name, ref in branches.items()}
    by = posterior.attention_kind.order_parameter
    # overlap: the 5-95% ranges of the order parameter under each fitted reference must be disjoint
    rng = np.random.default_rng(0)
    span = {}
    for name, (mean, std) in refs.items():
        x = mean + std * rng.standard_normal((512, *shape))
        obs = draw_observables(posterior, x)
        if by not in obs:
            raise ValueError(
                f"the task {type(posterior.task).__name__} declares no {by!r}: mode weights need an "
                "order parameter that tells the branches apart"
            )
        span[name] = np.quantile(obs[by], [0.05, 0.95])
    names = list(refs)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            if span[a][0] <= span[b][1] and span[b][0] <= span[a][1]:
                raise ValueError(
                    f"branches {a!r} and {b!r} overlap: {by} in [{span[a][0]:.4g}, {span[a][1]:.4g}] and "
                    f"[{span[b][0]:.4g}, {span[b][1]:.4g}] under their references; expected references "
                    "fitted to distinct branches"
                )
    order_parameter = declared(posterior.task, posterior.model)[by]
    obs_fn = lambda L: order_parameter(posterior.model.weights(L, posterior.task.key_mask))  # noqa: E731
    mw = branch_evidences(
        posterior.log_density,
        key,
        refs,
        runs=runs,
        num_particles=num_particles,
        num_mcmc_steps=num_mcmc_steps,
        target_ess=target_ess,
        observable_fn=obs_fn,
        **smc_options,
    )
    mw.config.update({"by": by, "reference_range": {k: v.tolist() for k, v in span.items()}})
    return mw
