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

``objective="marginal"`` trains L alone on J_marg(L) = -(sigma2 / n) log p(L, D) + const with V integrated
out (:func:`bayesattn.training.objective.marginal_objective`, = min_V J + the Occam term
(sigma2 d_out / 2n) log det(I + G / lam)): its stationary points are the modes of the marginal p(L | D). The
readout is then not a parameter: records and the final V are its conditional posterior mean given L.

``optimizer="gd"`` is plain gradient descent on the same objective, theta <- theta - lr grad J: gradient flow on J
in time lr x steps (Euler). ``optimizer="langevin"`` is SGLD (:func:`bayesattn.training.core.sgld`, an optax transformation) on the same
energy at temperature sigma2: theta <- theta - lr grad J + sqrt(2 lr sigma2 / n) xi, whose stationary law (as
lr -> 0) is exp(-n J / sigma2) = p(L, V | D), the posterior itself; ``lr`` has the same meaning (a step on J)
for both optimizers. ``temperature=tau`` runs it at tau sigma2 / n, whose stationary law is p(L, V | D)^(1/tau):
exactly the posterior of the same model with the prior (tau sigma_A2, tau sigma_V2, tau sigma2) (J is unchanged by
that rescaling, lam = d sigma2 / sigma_V2 included), so the theory at temperature tau is the theory of that prior;
tau -> 0 gives the joint mode (Adam's target), tau = 1 the posterior. With ``objective="marginal"`` the law is
p(L | D)^(1/tau).

The network is :class:`bayesattn.models.SingleLayer` and every run goes through the one training loop
(:func:`bayesattn.training.core.run_loop`), as :func:`bayesattn.training.fitting.fit` does for every network;
what is specific here is the loss from the posterior's statistics and the records (L and the losses).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from .._batching import default_batch, map_batched
from .._validate import brief, check_distinct, check_int, check_int_items, check_key, check_seeds
from ..bayes.posterior import Posterior, Prior
from ..diagnostics.observables import declared, evaluate
from ..models.attention import AttentionName, hot_logits
from ..models.networks import SingleLayer, SingleLayerConfig
from ..tasks import Dataset, Task, check_dataset
from .core import history_numpy, run_loop, sgld
from .objective import joint_loss, marginal_loss, minibatch_loss, sq_error
from .results import SweepResult, TrainResult, can_sample
from .run_config import (
    InitKind,
    ObjectiveKind,
    OptimizerKind,
    TrainConfig,
    check_prior_attention,
    final_records,
    init_arrays,
    make_train_config,
    train_config_dict,
    train_failure_message,
)

# ----------------------------------------------------------------------------------------------------------
# One run: the single layer through the one loop (core.run_loop), vmapped over seeds and P by train_sweep
# ----------------------------------------------------------------------------------------------------------


class _RunData(NamedTuple):
    post: Posterior  # training statistics (full batch), n = P * (query rows)
    test: Any  # Posterior of the test sequences, or None (no test set)
    X: Any  # (Pmax, T, d) raw sequences for minibatches (None when full batch)
    Y: Any
    P: Any  # number of valid sequences in X (the rest is padding)


def _init_net(cfg: TrainConfig, post: Posterior, key, L0, V0) -> SingleLayer:
    net_cfg = SingleLayerConfig.for_task(
        post.task, post.attention, heads=post.heads, init_scale=cfg.init_scale if cfg.init == "small" else 1e-2
    )
    if cfg.init == "small":
        return SingleLayer(net_cfg, key)
    if cfg.init == "hot":
        L0 = jnp.broadcast_to(
            jnp.asarray(hot_logits(post.task.target_pattern, post.task.key_mask, post.attention, cfg.init_scale)),
            post.L_shape,
        )
    if V0 is None:  # start the readout at its conditional mode given the attention
        V0 = post.readout_posterior(L0)[0]
    return SingleLayer(net_cfg, key, L0, V0)


def _loss_fn(cfg: TrainConfig, data: _RunData):
    """(net, key) -> J (full batch, from the statistics) or its minibatch estimate; J_marg(L) for the marginal
    objective (full batch only)."""
    post = data.post
    if cfg.objective == "marginal":
        return lambda net, key: marginal_loss(post, net.L)
    if cfg.batch_size is None:
        return lambda net, key: joint_loss(post, net.L, net.V)
    B = cfg.batch_size

    def f(net, key):
        idx = jax.random.randint(key, (B,), 0, data.P)
        return minibatch_loss(post, net.L, net.V, data.X[idx], data.Y[idx], data.P)

    return f


def _with_readout_mode(net: SingleLayer, post: Posterior) -> SingleLayer:
    """The network with V at its conditional posterior mean given L (the marginal objective's readout)."""
    return eqx.tree_at(lambda n: n.V, net, post.readout_posterior(net.L)[0])


def _record_fn(cfg: TrainConfig, data: _RunData):
    post, test = data.post, data.test
    obs = declared(post.task, post.model)
    marginal = cfg.objective == "marginal"

    def record(net):
        if marginal:
            net = _with_readout_mode(net, post)
        L, V = net.L, net.V
        alpha = post.model.weights(L, post.task.key_mask)
        rec = {"loss": sq_error(post, L, V) / (post.n * post.d_out)}
        if test is not None:
            rec["test_loss"] = sq_error(test, L, V) / (test.n * test.d_out)
        J = marginal_loss(post, L) if marginal else joint_loss(post, L, V)
        return {**rec, "objective": J, **evaluate(obs, alpha), "L": L}

    return record


def _freeze_readout(opt) -> optax.GradientTransformationExtraArgs:
    """``opt`` on L with V's updates set to zero (the marginal objective does not depend on V; without this SGLD's
    noise would move it)."""
    opt = optax.with_extra_args_support(opt)

    def update(updates, state, params=None, **extra):
        new, state = opt.update(updates, state, params, **extra)
        return eqx.tree_at(lambda n: n.V, new, jnp.zeros_like(new.V)), state

    return optax.GradientTransformationExtraArgs(opt.init, update)


def _optimizer(cfg: TrainConfig, post: Posterior):
    if cfg.optimizer == "adam":
        opt = optax.adam(cfg.lr)
    elif cfg.optimizer == "gd":
        opt = optax.sgd(cfg.lr)  # theta - lr grad J: the Euler discretisation of gradient flow on J in time lr * step
    else:
        # SGLD on J at temperature tau sigma2 / n: theta - lr grad J + sqrt(2 lr tau sigma2 / n) xi, whose
        # stationary law exp(-n J / (tau sigma2)) is p(L, V | D)^(1/tau) (tau = 1: the joint posterior)
        opt = sgld(cfg.lr, cfg.temperature * post.prior.sigma2 / post.n)
    return _freeze_readout(opt) if cfg.objective == "marginal" else opt


def _run(cfg: TrainConfig, data: _RunData, key, L0=None, V0=None):
    """Train one network; returns (final LoopState, records). Pure function of key."""
    init_key, noise_key = jax.random.split(key)
    net = _init_net(cfg, data.post, init_key, L0, V0)
    state, recs, _ = run_loop(
        net, _loss_fn(cfg, data), _optimizer(cfg, data.post), cfg.plan, _record_fn(cfg, data), noise_key
    )
    if cfg.objective == "marginal":
        state = state._replace(params=_with_readout_mode(state.params, data.post))
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
# Public entry points
# ----------------------------------------------------------------------------------------------------------


def train(
    dataset: Dataset,
    prior: Prior,
    attention: AttentionName,
    key: jax.Array,
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
    test: Dataset | None = None,
    log_records: int = 0,
    heads: int | None = None,
    objective: ObjectiveKind = "joint",
    temperature: float = 1.0,
) -> TrainResult:
    """Train L: (T, T) and V: (d_out, d) on ``dataset`` by Adam or Langevin (SGLD) on J (module docstring);
    with ``heads=H`` (or an AttentionModel as ``attention``), L: (H, T, T) and V: (d_out, H d).

    attention: "softmax" or "linear" (or an AttentionModel); key: one JAX PRNG key, required (split into init /
    noise / test-set keys; the same key gives the same run).
    lr: step on J; default 1e-2 (adam), 3e-2 (langevin); for adam an optax schedule is accepted.
    init: "small" (L, V ~ init_scale N(0, 1), default scale 1e-2), "hot" (L = init_scale * target pattern in
    every head, default: source weight 0.9 for softmax, the exact pattern for linear; V at its conditional
    mode), an array L of L's shape (V at its conditional mode) or a pair (L, V).
    batch_size: None = full batch (exact, via sufficient statistics); else sequences per minibatch.
    record_every: steps between records (step 0 and the last step are always recorded).
    log_records: also record at this many log-spaced steps (resolves fast early changes; default none).
    test_size: fresh sequences for the test loss, drawn from ``dataset.task`` when no ``test`` is given.
    test: a user test Dataset (same T, d, d_out as ``dataset``); None and a task that cannot sample (user
    data): no test loss, the history has no "test_loss" and ``config["test"]`` says why.
    seed: only used to label the run in messages and the config.
    objective: "joint" (J(L, V), default: the modes of p(L, V | D)) or "marginal" (J_marg(L) with the readout
    integrated out: the modes of p(L | D); full batch only; V in records and results is E[V | L, D]).
    temperature: tau, langevin only: SGLD at tau sigma2 / n (stationary law p(L, V | D)^(1/tau)); default 1.

    The history records step, loss, test_loss, objective, L and every observable the task declares for this
    attention (``diagnostics.observables.declared``: m, q, u and entropy for the copy task);
    ``final_order_parameters`` holds their last values.

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
    dataset = check_dataset("dataset", dataset)
    attention = check_prior_attention(prior, attention, heads)
    check_key("key", key)
    seed = None if seed is None else check_int("seed", seed)  # a label, written into the config as it is
    task = dataset.task
    if dataset.P < 1:
        raise ValueError(f"dataset.P={dataset.P}: expected at least one sequence")
    test_size = check_int("test_size", test_size, minimum=1)
    if test is not None:
        test = check_dataset("test", test, like=task)
        if test.P < 1:
            raise ValueError(f"test.P={test.P}: expected at least one sequence")
    cfg = make_train_config(
        optimizer, lr, steps, init, init_scale, batch_size, record_every, dataset.P, log_records, objective, temperature
    )
    L0 = V0 = None
    if cfg.init == "array":
        L0, V0 = init_arrays(init, attention.logit_shape(task.T), task.d_out, attention.heads * task.d)

    data, run_key, test_note = _prepare(dataset, prior, attention, key, test_size, cfg.batch_size is not None, test)
    state, recs = _run_one(cfg, data, run_key, L0, V0)
    history = history_numpy(recs)
    L, V = np.asarray(state.params.L), np.asarray(state.params.V)
    failed_at = int(state.failed_at)
    failure = None
    if failed_at >= 0:
        failure = train_failure_message(seed, dataset.P, failed_at, cfg.optimizer)
        warnings.warn(failure, RuntimeWarning, stacklevel=2)
    final = {k: float(v) for k, v in final_records(history).items()}
    return TrainResult(
        history,
        final,
        (L, V),
        train_config_dict(cfg, attention, prior, task, P=dataset.P, seed=seed, test_size=test_size, test=test_note),
        failure,
        failed_at if failure else None,
    )


def _test_posterior(task, prior, attention, key, test_size):
    """Split key into (test, run) keys; the test statistics come from fresh sequences of the test key."""
    test_key, run_key = jax.random.split(key)
    return Posterior(task.sample(test_key, test_size), attention, prior), run_key


def _prepare(dataset: Dataset, prior, attention, key, test_size, minibatch, test=None):
    """The statistics of one run, its run key and a note on where its test set came from.

    The key is split into (test, run) keys whatever the test set, so a run's init and noise do not depend on
    whether its test set was drawn or given."""
    test_key, run_key = jax.random.split(key)
    if test is not None:
        test_post, note = Posterior(test, attention, prior), f"user test set ({test.P} sequences)"
    elif can_sample(dataset.task):
        test_post = Posterior(dataset.task.sample(test_key, test_size), attention, prior)
        note = f"{test_size} fresh sequences of the task"
    else:
        test_post = None
        note = f"none: {type(dataset.task).__name__} cannot sample and no test set was given"
    data = _RunData(
        Posterior(dataset, attention, prior),
        test_post,
        dataset.X if minibatch else None,
        dataset.Y if minibatch else None,
        jnp.asarray(dataset.P),
    )
    return data, run_key, note


def train_sweep(
    task: Task,
    prior: Prior,
    attention: AttentionName,
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
    log_records: int = 0,
    heads: int | None = None,
    objective: ObjectiveKind = "joint",
    temperature: float = 1.0,
) -> SweepResult:
    """Train one network per (P, seed), all in one jit program.

    runs_per_batch: runs advanced together by ``vmap``; batches of runs are looped by ``lax.map`` in the same
    program. None: 1 on CPU (XLA:CPU's batched small matmuls made a 128-run sweep ~3x slower per
    run than a sequential map: 69 s vs 21 s on 2 cores), all runs at once on GPU / TPU.

    For seed s: k = fold_in(key, s); data_key, run_key = split(k); the seed's sequences are
    ``task.sample(data_key, max(P_values))`` and the run at P uses the first P of them (nested datasets),
    with ``run_key`` as the key of :func:`train` (init, noise and test set are shared across P within a seed).
    So ``train(Dataset(X[:P], Y[:P], task), prior, attention, run_key, ...)`` reproduces run (P, s).
    A run that diverges is frozen and listed in ``failures`` (with a warning); the others continue.
    Other arguments as in :func:`train` (init must be "small" or "hot" here).
    """
    if not isinstance(task, Task):
        raise ValueError(f"task={brief(task)}: expected a bayesattn Task")
    if not can_sample(task):
        raise ValueError(
            f"task={brief(task)}: expected a task that draws sequences (a plain Task only describes user data)"
        )
    attention = check_prior_attention(prior, attention, heads)
    P_values = check_int_items("P_values", P_values, minimum=1)
    seeds = check_seeds(seeds)
    if not P_values or not seeds:
        raise ValueError("P_values and seeds must be non-empty")
    check_distinct("P_values", P_values)  # a repeated P or seed would train the same run twice
    check_distinct("seeds", seeds)
    if not isinstance(init, str):
        raise ValueError(f"init={init!r}: train_sweep takes 'small' or 'hot'")
    test_size = check_int("test_size", test_size, minimum=1)
    check_key("key", key)
    if runs_per_batch is not None:  # before any data is drawn
        runs_per_batch = check_int("runs_per_batch", runs_per_batch, minimum=1)
    Pmax = max(P_values)
    cfg = make_train_config(
        optimizer,
        lr,
        steps,
        init,
        init_scale,
        batch_size,
        record_every,
        min(P_values),
        log_records,
        objective,
        temperature,
    )
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
    data = _RunData(
        stack([p for sd in seed_data for p in sd[0]]),
        stack([sd[1] for sd in seed_data]),
        stack([sd[2] for sd in seed_data]) if minibatch else None,
        stack([sd[3] for sd in seed_data]) if minibatch else None,
        jnp.asarray(P_values * len(seeds)),
    )
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
    L, V = (np.swapaxes(np.asarray(p), 0, 1) for p in (state.params.L, state.params.V))
    failed_at = np.swapaxes(np.asarray(state.failed_at), 0, 1)
    failures = []
    for i, P in enumerate(P_values):
        for j, s in enumerate(seeds):
            if failed_at[i, j] >= 0:
                msg = train_failure_message(s, P, int(failed_at[i, j]), cfg.optimizer)
                failures.append({"seed": s, "P": P, "step": int(failed_at[i, j]), "message": msg})
                warnings.warn(msg, RuntimeWarning, stacklevel=2)
    final = final_records(history)
    return SweepResult(
        np.asarray(P_values),
        np.asarray(seeds),
        history,
        final,
        L,
        V,
        failures,
        train_config_dict(cfg, attention, prior, task, test_size=test_size),
    )


# ----------------------------------------------------------------------------------------------------------
# Emergence and comparisons (plain data; the plots module draws them)
# ----------------------------------------------------------------------------------------------------------
