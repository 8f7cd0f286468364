"""Adam and Langevin training of the attention network (docs/model.md section 1), vectorised over seeds and P.

The network is the model of the posterior: alpha = a(L), f_{mu,t} = V sum_s alpha_ts x_{mu,s}, with L: (T, T)
and V: (d_out, d) trained. The objective is minus the joint log density, rescaled per query row:

    J(L, V) = (1 / 2n) sum_{mu,t} |y_{mu,t} - f_{mu,t}|^2
              + (sigma2 / (2 n sigma_A2)) |L|^2 + (d sigma2 / (2 n sigma_V2)) |V|^2
            = -(sigma2 / n) log p(L, V, D) + const,

i.e. the per-row squared loss plus the weight decay that *is* the prior. Its stationary points are the modes
of the joint posterior p(L, V | D). Note these are not the modes of the marginal p(L | D) that
``Posterior.log_density`` describes: maximising over V instead of integrating it out drops the Occam term
-(d/2) log det(I + G/lam), and a point estimate carries no entropy of L. Adam therefore probes the *energy*
landscape, the Bayesian theory the *free-energy* landscape; ``final_vs_P`` puts the two side by side.

Full-batch steps (``batch_size=None``) evaluate J exactly from the sufficient statistics G = Z^T Z and
C = Z^T Y of :class:`~bayesattn.Posterior` (sum |y - Vz|^2 = |Y|^2 - 2 tr(V C) + tr(V G V^T)), so one step
costs O(T^3 + T^2 d^2) whatever P is; minibatch steps use B sequences directly (an unbiased estimate).

``optimizer="langevin"`` is SGLD (``blackjax.sgld``) on the same energy at temperature sigma2:
theta <- theta - lr grad J + sqrt(2 lr sigma2 / n) xi, whose stationary law (as lr -> 0) is exp(-n J / sigma2)
= p(L, V | D), the posterior itself; ``lr`` has the same meaning (a step on J) for both optimizers.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Literal, NamedTuple

import blackjax
import jax
import jax.numpy as jnp
import numpy as np
import optax

from .._batching import default_batch, map_batched
from .._validate import check_array, check_choice, check_int, check_positive
from ..models.attention import hot_logits, ATTENTIONS, AttentionKind, attention_weights
from ..diagnostics.observables import order_parameters
from ..bayes.posterior import Posterior, Prior
from ..tasks import Dataset, Task
from .objective import _batch_sq_error, _decay, _objective, _sq_error
from .results import SweepResult, TrainResult


OptimizerKind = Literal["adam", "langevin"]
InitKind = Literal["small", "hot"]
OPTIMIZERS = ("adam", "langevin")
TRAIN_INITS = ("small", "hot")
DIVERGENCE_BOUND = 1e8  # |parameter| beyond this counts as a divergence, like a NaN


# ----------------------------------------------------------------------------------------------------------
# The objective
# ----------------------------------------------------------------------------------------------------------











# ----------------------------------------------------------------------------------------------------------
# One run: a pure function of (data, key), vmapped over seeds and P by train_sweep
# ----------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Config:
    """Static (hashable) configuration of a run; one jit compilation per distinct config and shape."""

    optimizer: str
    lr: Any  # float or an optax schedule (callable of the step)
    steps: int
    record_every: int
    batch_size: int | None
    init: str  # "small", "hot" or "array"
    init_scale: float | None  # None: the default hot pattern (hot_logits)


class _RunData(NamedTuple):
    post: Posterior  # training statistics (full batch), n = P * (query rows)
    test: Posterior  # statistics of the test sequences
    X: Any  # (Pmax, T, d) raw sequences for minibatches (None when full batch)
    Y: Any
    P: Any  # number of valid sequences in X (the rest is padding)


class _State(NamedTuple):
    params: tuple  # (L, V)
    opt_state: Any
    step: jax.Array  # int
    failed_at: jax.Array  # int, -1 while the run is healthy; the step of the first non-finite value


def _init_params(cfg: _Config, post: Posterior, key, L0, V0):
    T, d, d_out = post.T, post.d, post.d_out
    kL, kV = jax.random.split(key)
    if cfg.init == "small":
        L = cfg.init_scale * jax.random.normal(kL, (T, T))
        V = cfg.init_scale * jax.random.normal(kV, (d_out, d))
        return L, V
    if cfg.init == "hot":
        L = jnp.asarray(hot_logits(post.task.target_pattern, post.task.key_mask, post.attention, cfg.init_scale))
    else:
        L = L0
    if V0 is None:  # start the readout at its conditional mode given the attention
        V0 = post.readout_posterior(L)[0]
    return L, V0


def _grad_fn(cfg: _Config, data: _RunData):
    """(params, key) -> (J or its minibatch estimate, gradient)."""
    post = data.post
    task, attention = post.task, post.attention

    if cfg.batch_size is None:
        def f(params, key):
            return _objective(post, *params)
    else:
        B = cfg.batch_size

        def f(params, key):
            L, V = params
            idx = jax.random.randint(key, (B,), 0, data.P)
            sq = _batch_sq_error(task, attention, L, V, data.X[idx], data.Y[idx]) * (data.P / B)
            return 0.5 * sq / post.n + _decay(post.prior, post.d, post.n, L, V)

    return jax.value_and_grad(f)


def _record(data: _RunData, state: _State):
    post, test = data.post, data.test
    L, V = state.params
    nd = post.n * post.d_out
    alpha = attention_weights(L, post.attention, post.task.key_mask)
    op = order_parameters(alpha, post.task.target_pattern, post.task.query_mask)
    return {
        "step": state.step,
        "loss": _sq_error(post, L, V) / nd,
        "test_loss": _sq_error(test, L, V) / (test.n * test.d_out),
        "objective": _objective(post, L, V),
        **op,
        "L": L,
    }


def _run(cfg: _Config, data: _RunData, key, L0=None, V0=None):
    """Train one network; returns (final state, history of records). Pure function of key."""
    post = data.post
    init_key, noise_key = jax.random.split(key)
    params = _init_params(cfg, post, init_key, L0, V0)
    value_and_grad = _grad_fn(cfg, data)

    if cfg.optimizer == "adam":
        opt = optax.adam(cfg.lr)

        def update(params, opt_state, grads, key):
            updates, opt_state = opt.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state

        opt_state = opt.init(params)
    else:
        # SGLD on log p(L, V, D) = -(n / sigma2) J with step lr sigma2 / n: theta - lr grad J + sqrt(2 lr s2/n) xi
        # (grad log p = -(n / sigma2) grad J; blackjax.sgld does theta + h grad log p + sqrt(2 h) xi)
        n_over_s2 = post.n / post.prior.sigma2
        h = cfg.lr / n_over_s2

        def update(params, opt_state, grads, key):
            sgld = blackjax.sgld(lambda position, batch: jax.tree.map(lambda g: -n_over_s2 * g, grads))
            return sgld.step(key, params, None, h), opt_state

        opt_state = ()

    def body(_, state: _State):
        k_batch, k_noise = jax.random.split(jax.random.fold_in(noise_key, state.step))
        value, grads = value_and_grad(state.params, k_batch)
        new_params, new_opt = update(state.params, state.opt_state, grads, k_noise)
        leaves = [value, *jax.tree.leaves(grads), *jax.tree.leaves(new_params)]
        ok = jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]))
        ok &= jnp.all(jnp.stack([jnp.max(jnp.abs(p)) < DIVERGENCE_BOUND for p in new_params]))
        healthy = state.failed_at < 0
        go = ok & healthy  # a failed run is frozen at its last finite state
        keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(go, a, b), new, old)  # noqa: E731
        failed_at = jnp.where(healthy & ~ok, state.step, state.failed_at)
        return _State(keep(new_params, state.params), keep(new_opt, state.opt_state), state.step + 1, failed_at)

    def chunk(state, length):
        state = jax.lax.fori_loop(0, length, body, state)
        return state, _record(data, state)

    state = _State(params, opt_state, jnp.asarray(0), jnp.asarray(-1))
    first = _record(data, state)
    n_full, rest = divmod(cfg.steps, cfg.record_every)
    state, recs = jax.lax.scan(lambda s, _: chunk(s, cfg.record_every), state, None, length=n_full)
    recs = jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), first, recs)
    if rest:
        state, last = chunk(state, rest)
        recs = jax.tree.map(lambda a, b: jnp.concatenate([a, b[None]]), recs, last)
    return state, recs


@functools.partial(jax.jit, static_argnums=0)
def _run_one(cfg, data, key, L0, V0):
    return _run(cfg, data, key, L0, V0)


@functools.partial(jax.jit, static_argnums=(0, 1))
def _run_grid(cfg, runs_per_batch, data, seed_index, keys):
    """All runs in one program. data: post leaves (R, ...) and P (R,) per run; test (S, ...), X/Y (S, Pmax, ...)
    or None per seed; seed_index (R,) and keys (S,). Runs are advanced ``runs_per_batch`` at a time by vmap,
    the batches looped by ``lax.map`` inside the same jit."""

    def one(args):
        post, P, si = args
        pick = lambda tree: jax.tree.map(lambda a: a[si], tree)  # noqa: E731
        return _run(cfg, _RunData(post, pick(data.test), pick(data.X), pick(data.Y), P), keys[si])

    return map_batched(one, (data.post, data.P, seed_index), runs_per_batch)


# ----------------------------------------------------------------------------------------------------------
# Results
# ----------------------------------------------------------------------------------------------------------







# ----------------------------------------------------------------------------------------------------------
# Public entry points
# ----------------------------------------------------------------------------------------------------------

def _default_lr(optimizer: str) -> float:
    # langevin: at T = 16, P = 1000 (canonical prior) lr = 3e-2 mixes 4x faster than 1e-2 and matches NUTS
    return 1e-2 if optimizer == "adam" else 3e-2


def _default_init_scale(init: str) -> float | None:
    # hot: None lets hot_logits put 0.9 on the source in every row (softmax) or alpha = pattern (linear)
    return None if init == "hot" else 1e-2


def _make_config(optimizer, lr, steps, init, init_scale, batch_size, record_every, attention, T, P_max):
    check_choice("optimizer", optimizer, OPTIMIZERS)
    if callable(lr):
        if optimizer != "adam":
            raise ValueError(f"lr={lr!r}: a schedule is only supported for optimizer='adam'; give a positive number")
        lr_val = lr
    else:
        lr_val = check_positive("lr", _default_lr(optimizer) if lr is None else lr)
    steps = check_int("steps", steps, minimum=1)
    record_every = min(check_int("record_every", record_every, minimum=1), steps)
    if isinstance(init, str):
        init_kind = check_choice("init", init, TRAIN_INITS)
    else:
        init_kind = "array"
    scale = _default_init_scale(init_kind) if init_scale is None else check_positive("init_scale", init_scale)
    if batch_size is not None:
        batch_size = check_int("batch_size", batch_size, minimum=1, maximum=P_max)
    return _Config(optimizer, lr_val, steps, record_every, batch_size, init_kind, scale)


def _check_prior_attention(prior, attention):
    if not isinstance(prior, Prior):
        raise ValueError(f"prior={prior!r}: expected a bayesattn Prior")
    check_choice("attention", attention, ATTENTIONS)


def _init_arrays(init, T, d_out, d):
    """init given as an array L: (T, T) or a pair (L, V)."""
    if isinstance(init, (tuple, list)):
        if len(init) != 2:
            raise ValueError(f"init: a sequence must be the pair (L, V), got {len(init)} items")
        L0 = check_array("init L", np.asarray(init[0], np.float64), (T, T))
        V0 = check_array("init V", np.asarray(init[1], np.float64), (d_out, d))
        return jnp.asarray(L0), jnp.asarray(V0)
    try:
        L0 = np.asarray(init, np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"init={init!r}: expected 'small', 'hot', an array L of shape ({T}, {T}) or a pair (L, V)") from None
    return jnp.asarray(check_array("init", L0, (T, T))), None


def _config_dict(cfg: _Config, attention, prior, task, **extra):
    return {
        "optimizer": cfg.optimizer, "lr": cfg.lr if not callable(cfg.lr) else repr(cfg.lr), "steps": cfg.steps,
        "record_every": cfg.record_every, "batch_size": cfg.batch_size, "init": cfg.init,
        "init_scale": cfg.init_scale, "attention": attention, "prior": prior.config(), "task": task.config(),
        "objective": "J = |Y - F|^2 / 2n + prior decay = -(sigma2/n) log p(L, V, D) + const",
        **extra,
    }


def _history_np(recs) -> dict:
    h = {k: np.asarray(v) for k, v in recs.items()}
    h["step"] = h["step"].astype(int)
    return h


def _failure_message(seed, P, step, optimizer):
    return (f"run seed={seed}, P={P} diverged at step {step} (NaN/inf or |parameter| > {DIVERGENCE_BOUND:g}) "
            f"with optimizer={optimizer!r}; frozen at its last finite state")


def train(
    dataset: Dataset,
    prior: Prior,
    attention: AttentionKind = "softmax",
    key: jax.Array | None = None,
    *,
    optimizer: OptimizerKind = "adam",
    lr: float | Callable | None = None,
    steps: int = 5000,
    init: InitKind | Any = "small",
    init_scale: float | None = None,
    batch_size: int | None = None,
    record_every: int = 50,
    test_size: int = 256,
    seed: int | None = None,
) -> TrainResult:
    """Train L: (T, T) and V: (d_out, d) on ``dataset`` by Adam or Langevin (SGLD) on J (module docstring).

    key: PRNG key (split into init / noise / test-set keys; the same key gives the same run).
    lr: step on J; default 1e-2 (adam), 3e-2 (langevin); for adam an optax schedule is accepted.
    init: "small" (L, V ~ init_scale N(0, 1), default scale 1e-2), "hot" (L = init_scale * target pattern,
    default: source weight 0.9 for softmax, the exact pattern for linear; V at its conditional mode), an
    array L: (T, T) (V at its conditional mode) or a pair (L, V).
    batch_size: None = full batch (exact, via sufficient statistics); else sequences per minibatch.
    record_every: steps between records (step 0 and the last step are always recorded).
    test_size: fresh sequences for the test loss.
    seed: only used to label the run in messages and the config.

    A NaN / inf or |parameter| > 1e8 stops the run (its state is frozen at the last finite values); the
    result then carries ``failure`` (a message naming seed, P and step) and a warning is issued.

    >>> import jax, bayesattn as ba
    >>> data = ba.CopyTask(T=8, d=4).sample(jax.random.key(0), P=200)
    >>> res = ba.train(data, ba.Prior(1.0, 100.0, 50.0), "softmax", jax.random.key(1), steps=300)
    >>> res.history["step"].tolist(), res.failure is None
    ([0, 50, 100, 150, 200, 250, 300], True)
    >>> bool(res.final_order_parameters["m"] > 0.5)  # beta = P d / (2 sigma2) = 8: the copy head is found
    True
    """
    if not isinstance(dataset, Dataset):
        raise ValueError(f"dataset={type(dataset).__name__}: expected a bayesattn Dataset (task.sample(key, P))")
    _check_prior_attention(prior, attention)
    if key is None:
        raise ValueError("key=None: expected a jax PRNG key (jax.random.key(seed))")
    task = dataset.task
    check_array("dataset.X", dataset.X, (None, task.T, task.d))
    check_array("dataset.Y", dataset.Y, (dataset.P, task.T, task.d_out))
    if dataset.P < 1:
        raise ValueError(f"dataset.P={dataset.P}: expected at least one sequence")
    test_size = check_int("test_size", test_size, minimum=1)
    cfg = _make_config(optimizer, lr, steps, init, init_scale, batch_size, record_every, attention, task.T, dataset.P)
    L0 = V0 = None
    if cfg.init == "array":
        L0, V0 = _init_arrays(init, task.T, task.d_out, task.d)

    data, run_key = _prepare(dataset, prior, attention, key, test_size, cfg.batch_size is not None)
    state, recs = _run_one(cfg, data, run_key, L0, V0)
    history = _history_np(recs)
    L, V = (np.asarray(p) for p in state.params)
    failed_at = int(state.failed_at)
    failure = None
    if failed_at >= 0:
        failure = _failure_message(seed, dataset.P, failed_at, cfg.optimizer)
        warnings.warn(failure, RuntimeWarning, stacklevel=2)
    final = {k: float(history[k][-1]) for k in ("m", "q", "u")}
    return TrainResult(history, final, (L, V), _config_dict(cfg, attention, prior, task, P=dataset.P, seed=seed,
                                                           test_size=test_size),
                       failure, failed_at if failure else None)


def _test_posterior(task, prior, attention, key, test_size):
    """Split key into (test, run) keys; the test statistics come from fresh sequences of the test key."""
    test_key, run_key = jax.random.split(key)
    return Posterior(task.sample(test_key, test_size), attention, prior), run_key


def _prepare(dataset: Dataset, prior, attention, key, test_size, minibatch):
    """The statistics of one run and its run key."""
    test, run_key = _test_posterior(dataset.task, prior, attention, key, test_size)
    data = _RunData(Posterior(dataset, attention, prior), test,
                    dataset.X if minibatch else None, dataset.Y if minibatch else None,
                    jnp.asarray(dataset.P))
    return data, run_key


def train_sweep(
    task: Task,
    prior: Prior,
    attention: AttentionKind,
    P_values,
    seeds,
    key: jax.Array,
    *,
    optimizer: OptimizerKind = "adam",
    lr: float | Callable | None = None,
    steps: int = 5000,
    init: InitKind = "small",
    init_scale: float | None = None,
    batch_size: int | None = None,
    record_every: int = 50,
    test_size: int = 256,
    runs_per_batch: int | None = None,
) -> SweepResult:
    """Train one network per (P, seed), all in one jit program.

    runs_per_batch: runs advanced together by ``vmap``; batches of runs are looped by ``lax.map`` in the same
    program. None: 1 on CPU (XLA:CPU's batched small matmuls made the issue's 128-run sweep ~3x slower per
    run than a sequential map: 69 s vs 21 s on 2 cores), all runs at once on GPU / TPU.

    For seed s: k = fold_in(key, s); data_key, run_key = split(k); the seed's sequences are
    ``task.sample(data_key, max(P_values))`` and the run at P uses the first P of them (nested datasets),
    with ``run_key`` as the key of :func:`train` (init, noise and test set are shared across P within a seed).
    So ``train(Dataset(X[:P], Y[:P], task), prior, attention, run_key, ...)`` reproduces run (P, s).
    A run that diverges is frozen and listed in ``failures`` (with a warning); the others continue.
    Other arguments as in :func:`train` (init must be "small" or "hot" here).
    """
    if not isinstance(task, Task):
        raise ValueError(f"task={task!r}: expected a bayesattn Task")
    _check_prior_attention(prior, attention)
    P_values = [check_int("P_values item", P, minimum=1) for P in np.atleast_1d(np.asarray(P_values)).tolist()]
    seeds = [check_int("seeds item", s, minimum=0) for s in np.atleast_1d(np.asarray(seeds)).tolist()]
    if not P_values or not seeds:
        raise ValueError("P_values and seeds must be non-empty")
    if not isinstance(init, str):
        raise ValueError(f"init={init!r}: train_sweep takes 'small' or 'hot'")
    test_size = check_int("test_size", test_size, minimum=1)
    Pmax = max(P_values)
    cfg = _make_config(optimizer, lr, steps, init, init_scale, batch_size, record_every, attention, task.T,
                       min(P_values))
    minibatch = cfg.batch_size is not None

    seed_data, keys = [], []
    for s in seeds:
        data_key, run_key = jax.random.split(jax.random.fold_in(key, s))
        full = task.sample(data_key, Pmax)
        test, run_key = _test_posterior(task, prior, attention, run_key, test_size)
        posts = [Posterior(Dataset(full.X[:P], full.Y[:P], task), attention, prior) for P in P_values]
        seed_data.append((posts, test, full.X if minibatch else None, full.Y if minibatch else None))
        keys.append(run_key)
    stack = lambda trees: jax.tree.map(lambda *a: jnp.stack(a), *trees)  # noqa: E731
    # runs in seed-major order: run r = (seed r // nP, P r % nP)
    data = _RunData(stack([p for sd in seed_data for p in sd[0]]), stack([sd[1] for sd in seed_data]),
                    stack([sd[2] for sd in seed_data]) if minibatch else None,
                    stack([sd[3] for sd in seed_data]) if minibatch else None,
                    jnp.asarray(P_values * len(seeds)))
    seed_index = jnp.repeat(jnp.arange(len(seeds)), len(P_values))
    n_runs = len(seeds) * len(P_values)
    if runs_per_batch is None:
        runs_per_batch = default_batch(n_runs)
    runs_per_batch = check_int("runs_per_batch", runs_per_batch, minimum=1)
    state, recs = _run_grid(cfg, min(runs_per_batch, n_runs), data, seed_index, jnp.stack(keys))
    shape = (len(seeds), len(P_values))
    state, recs = jax.tree.map(lambda a: np.asarray(a).reshape(shape + a.shape[1:]), (state, recs))
    # results are (S, nP, ...) -> (nP, S, ...)
    history = {k: np.swapaxes(np.asarray(v), 0, 1) for k, v in recs.items()}
    history["step"] = history["step"].astype(int)
    L, V = (np.swapaxes(np.asarray(p), 0, 1) for p in state.params)
    failed_at = np.swapaxes(np.asarray(state.failed_at), 0, 1)
    failures = []
    for i, P in enumerate(P_values):
        for j, s in enumerate(seeds):
            if failed_at[i, j] >= 0:
                msg = _failure_message(s, P, int(failed_at[i, j]), cfg.optimizer)
                failures.append({"seed": s, "P": P, "step": int(failed_at[i, j]), "message": msg})
                warnings.warn(msg, RuntimeWarning, stacklevel=2)
    final = {k: history[k][:, :, -1] for k in ("m", "q", "u")}
    return SweepResult(np.asarray(P_values), np.asarray(seeds), history, final, L, V, failures,
                       _config_dict(cfg, attention, prior, task, test_size=test_size))


# ----------------------------------------------------------------------------------------------------------
# Emergence and comparisons (plain data; the plots module draws them)
# ----------------------------------------------------------------------------------------------------------











