"""Results of the samplers: :class:`Samples` (draws, observables, diagnostics) and how they are assembled."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.diagnostics import effective_sample_size, split_gelman_rubin

from .._json import to_plain
from .._validate import check_bool, check_int
from ..diagnostics.observables import declared, evaluate
from .posterior import Posterior

MAX_SUMMARY_DRAWS = 1000  # per chain, in Samples.summary()["draws"]


@dataclass
class Samples:
    """Draws of L and their observables, with diagnostics.

    L: (chains, draws, *L_shape) numpy (L_shape = (T, T) for one head, (H, T, T) for H heads);
    order_parameters: every observable the task and attention model declare
    (:func:`bayesattn.diagnostics.observables.declared`; for the one-head copy task "m", "q", "u", and "entropy"
    for softmax) -> (chains, draws); diagnostics: per observable {"ess_bulk", "r_hat"}, plus "num_divergent", "num_divergent_warmup",
    "acceptance_rate", "step_size" (per chain), "num_grad_evals", "wall_time_s", "compile_time_s",
    "num_nan"; method; config (everything needed to rerun, keys included); extra: method-specific results
    (SMC: "log_evidence", "mode_weights", "tempering_steps"); sample_stats: per-draw sampler statistics
    (chains, draws) where the method has them: "lp" (log density), "acceptance_rate", "diverging", "n_steps"
    (gradient evaluations), "energy" (NUTS / HMC). "ess_bulk" is the split-chain ESS of :func:`split_ess`
    (ArviZ's ``ess(method="mean")``) and "r_hat" numpyro's split R-hat (ArviZ's ``rhat(method="split")``).
    The many-chain methods (chees, meads) add per observable "nested_r_hat" (:func:`nested_r_hat`, the chains
    grouped by their starting point) and "num_superchains".
    For SMC a "chain" is one independent SMC run and its "draws" are its particles (resampled to equal
    weight), so R-hat compares runs and ESS is only indicative.
    """

    L: np.ndarray
    order_parameters: dict
    diagnostics: dict
    method: str
    config: dict
    extra: dict = field(default_factory=dict)
    sample_stats: dict = field(default_factory=dict)

    @property
    def observables(self) -> dict:
        """The same dict as :attr:`order_parameters` (every declared observable)."""
        return self.order_parameters

    @property
    def num_chains(self) -> int:
        return int(self.L.shape[0])

    @property
    def num_draws(self) -> int:
        return int(self.L.shape[1])

    def to_arviz(self, include_L: bool = True):
        """An ``arviz.InferenceData``: group ``posterior`` with every observable (chain, draw) and, with
        ``include_L``, the logits "L" (chain, draw, [head,] query, key); group ``sample_stats`` with the per-draw
        statistics of :attr:`sample_stats` and the adapted "step_size" (ArviZ's names: lp, acceptance_rate,
        diverging, n_steps, energy). Needs the ``arviz`` extra (``pip install 'bayesattn[arviz]'``).

        ``az.summary(s.to_arviz(), var_names=["m"])``, ``az.plot_trace(...)`` then work as usual.
        """
        include_L = check_bool("include_L", include_L)
        try:
            import arviz as az
        except ImportError:
            raise ImportError("Samples.to_arviz needs ArviZ: pip install 'bayesattn[arviz]'") from None
        posterior = {name: np.asarray(v) for name, v in self.order_parameters.items()}
        dims = {}
        if include_L:
            posterior["L"] = self.L
            dims["L"] = (["head"] if self.L.ndim == 5 else []) + ["query", "key"]
        stats = {k: np.asarray(v) for k, v in self.sample_stats.items()}
        step = self.diagnostics.get("step_size")
        if step is not None and stats:
            stats["step_size"] = np.broadcast_to(
                np.asarray(step, np.float64).reshape(-1, 1), (self.num_chains, self.num_draws)
            )
        return az.from_dict(
            posterior=posterior,
            sample_stats=stats or None,
            dims=dims,
            attrs={"method": self.method, "inference_library": "bayesattn"},
        )

    def summary(self) -> dict:
        """JSON-serialisable summary: per observable mean, std, se = std / sqrt(ess), ess_bulk, r_hat, the
        many-chain methods' nested_r_hat (None where undefined: one superchain), chain_means (non-finite draws
        excluded from mean/std/chain_means, and counted in "num_nan"); the diagnostics; "draws" of every observable
        thinned to at most 1000 per chain; SMC extras; method and config."""
        out: dict[str, Any] = {"method": self.method, "config": to_plain(self.config)}
        names = tuple(self.order_parameters)
        for name in names:
            x = np.asarray(self.order_parameters[name], dtype=np.float64)
            good = np.isfinite(x)
            ess = float(self.diagnostics[name]["ess_bulk"])
            std = float(np.std(x[good])) if good.any() else math.nan
            out[name] = {
                "mean": float(np.mean(x[good])) if good.any() else math.nan,
                "std": std,
                "se": std / math.sqrt(ess) if ess > 0 and math.isfinite(ess) else math.nan,
                "ess_bulk": ess,
                "r_hat": float(self.diagnostics[name]["r_hat"]),
                **(
                    {"nested_r_hat": _defined(self.diagnostics[name]["nested_r_hat"])}
                    if "nested_r_hat" in self.diagnostics[name]
                    else {}
                ),
                "chain_means": [float(np.mean(c[np.isfinite(c)])) if np.isfinite(c).any() else math.nan for c in x],
            }
        out["diagnostics"] = to_plain({k: v for k, v in self.diagnostics.items() if k not in names})
        stride = max(1, math.ceil(self.num_draws / MAX_SUMMARY_DRAWS))
        out["draws"] = {name: np.asarray(self.order_parameters[name])[:, ::stride].tolist() for name in names}
        out["draws_stride"] = stride
        out.update(to_plain(self.extra))
        return out


def key_data(key) -> list[int]:
    """The raw numbers of a PRNG key (a typed key or a legacy uint32 key array), flat, as a list of ints: what a
    config records so that the run can be repeated."""
    key = jnp.asarray(key) if not isinstance(key, jax.Array) else key
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    return np.asarray(key).ravel().tolist()


def check_counts(num_chains, num_warmup, num_samples, thin) -> tuple[int, int, int, int]:
    """The checked (num_chains, num_warmup, num_samples, thin) of a sampler call: positive ints with at least 4
    kept draws per chain (num_samples // thin >= 4, what split R-hat needs); ValueError naming the count otherwise."""
    num_chains = check_int("num_chains", num_chains, minimum=1)
    num_warmup = check_int("num_warmup", num_warmup, minimum=1)
    num_samples = check_int("num_samples", num_samples, minimum=1)
    thin = check_int("thin", thin, minimum=1)
    if num_samples // thin < 4:
        raise ValueError(
            f"num_samples={num_samples}, thin={thin}: expected num_samples // thin >= 4 "
            "(split R-hat needs 4 kept draws per chain)"
        )
    return num_chains, num_warmup, num_samples, thin


def problem_config(post: Posterior) -> dict:
    """The posterior's part of a sampler's config: task, attention kind, heads, model, prior, n, T, d (plain data)."""
    return {
        "task": post.task.config(),
        "attention": post.attention,
        "heads": post.heads,
        "model": post.model.config(),
        "prior": post.prior.config(),
        "n": int(post.n),
        "T": post.T,
        "d": post.d,
    }


def draw_observables(post: Posterior, L) -> dict:
    """Every declared observable of draws L: (..., *L_shape) -> (...) numpy arrays (NaN where L is not finite:
    no input check here, so that non-finite draws are counted rather than raised on)."""
    alpha = post.model.weights(jnp.asarray(L, jnp.float64), post.task.key_mask)
    return {k: np.asarray(v) for k, v in evaluate(declared(post.task, post.model), alpha).items()}


def split_ess(x: np.ndarray) -> float:
    """Effective sample size of draws x: (chains, draws) on split chains (each chain's first and last halves
    as two chains, as Stan and ArviZ do), by numpyro's Geyer estimator, low when a chain drifts; capped, as
    Stan and ArviZ cap it, at N log10 N for N draws in all. It is ArviZ's ``ess(method="mean")`` for positively
    correlated draws; for anticorrelated ones (short NUTS chains) the two truncate the autocorrelation sum
    slightly differently (tests/test_arviz.py). Without the cap, a few short anticorrelated chains can report
    several times their number of draws, and so a standard error far too small. Draws that are all equal (an
    observable fixed by the task, equal up to rounding) have as many effective draws as draws, as in ArviZ (the
    estimator would divide zero by zero)."""
    x = np.asarray(x)
    half = x.shape[1] // 2
    n = 2 * half * x.shape[0]
    if np.ptp(x) < np.finfo(np.float64).resolution:  # NaN compares False: non-finite draws stay NaN below
        return float(n)
    ess = float(effective_sample_size(np.concatenate([x[:, :half], x[:, x.shape[1] - half :]], axis=0)))
    return min(ess, n * math.log10(n)) if n > 1 else ess


def _defined(value) -> float | None:
    """A diagnostic that may be undefined (NaN, such as the nested R-hat of one superchain) as a float or None."""
    value = float(value)
    return value if math.isfinite(value) else None


def nested_r_hat(x: np.ndarray, superchains) -> float:
    """Nested R-hat of draws x: (chains, draws), the chains grouped into superchains by the labels
    ``superchains`` (one per chain; chains started from one point form a superchain): Margossian, Hoffman,
    Sountsov, Riou-Durand, Vehtari and Gelman (2023), "Nested R-hat: assessing the convergence of Markov chain
    Monte Carlo when running many short chains", eq. for nR-hat = sqrt(1 + B_nu / W_nu), with B_nu the variance
    (ddof 1) of the superchain means and W_nu the mean over superchains of (variance of its chain means, ddof
    1, 0 for one chain) + (mean within-chain variance, ddof 1, 0 for one draw). Superchains may differ in size
    (each enters with weight 1). NaN with fewer than two superchains. No library in the environment provides
    it (blackjax's ``diagnostics.splitR`` is the one-draw case N = 1)."""
    x = np.asarray(x, np.float64)
    labels = np.asarray(superchains)
    if x.ndim != 2 or labels.shape != (x.shape[0],):
        raise ValueError(f"x has shape {x.shape}, superchains {labels.shape}: expected (chains, draws) and (chains,)")
    groups = [x[labels == g] for g in np.unique(labels)]
    if len(groups) < 2:
        return math.nan
    n = x.shape[1]
    means = np.array([g.mean() for g in groups])
    within = [
        (np.var(g.mean(axis=1), ddof=1) if len(g) > 1 else 0.0) + (np.mean(np.var(g, axis=1, ddof=1)) if n > 1 else 0.0)
        for g in groups
    ]
    return float(np.sqrt(1.0 + np.var(means, ddof=1) / np.mean(within)))


def assemble_samples(
    post: Posterior, L, logdens, diag, method, config, extra=None, sample_stats=None, superchains=None
) -> Samples:
    """A :class:`Samples` from a sampler's draws L: (chains, draws, *L_shape) and their log densities logdens:
    (chains, draws): the declared observables of the draws, their split ESS and R-hat (and the nested R-hat over
    ``superchains``, one label per chain, when given), the count of non-finite draws, then the sampler's own
    diagnostics ``diag``; ``extra``: method-specific results; ``sample_stats``: per-draw statistics (chains, draws)."""
    L = np.asarray(L)
    ops = draw_observables(post, L)
    event = tuple(range(L.ndim - len(post.L_shape), L.ndim))
    bad = ~np.isfinite(L).all(axis=event) | ~np.isfinite(np.asarray(logdens))
    diagnostics = {
        name: {"ess_bulk": split_ess(ops[name]), "r_hat": float(split_gelman_rubin(ops[name]))} for name in ops
    }
    if superchains is not None:
        for name in ops:
            diagnostics[name]["nested_r_hat"] = nested_r_hat(ops[name], superchains)
        diagnostics["num_superchains"] = int(np.unique(np.asarray(superchains)).size)
    diagnostics["num_nan"] = int(bad.sum())
    diagnostics.update(diag)
    stats = {k: np.asarray(v) for k, v in (sample_stats or {}).items()}
    return Samples(
        L=L,
        order_parameters=ops,
        diagnostics=diagnostics,
        method=method,
        config=config,
        extra=extra or {},
        sample_stats=stats,
    )
