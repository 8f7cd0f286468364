"""Training any network of the zoo with the one loop (:func:`bayesattn.training.core.run_loop`).

:func:`fit` trains one network; :func:`fit_sweep` trains one per (data size P, seed), all in one jit program
(runs batched by ``_batching.map_batched``: vmapped on an accelerator, one after another on a CPU).

Data, three ways: a :class:`~bayesattn.Dataset` with ``batch_size=None`` (full batch: every sequence at every
step), a Dataset with ``batch_size=B`` (B sequences drawn with replacement at each step), or a
:class:`~bayesattn.Task` (online: B fresh sequences from the task at each step, from that step's key).

Losses (mean over sequences and query rows; ``penalty(net)`` is added if given):
    "mse":  mean over output coordinates of (y - f)^2  (for the single layer, J = (d_out / 2) mse + decay);
    "xent": -sum_k y_k log softmax(f)_k, with y one-hot / probabilities (T, vocab), or int targets (T,).

Records, at every ``record_every`` steps and at ``log_records`` log-spaced steps: "loss" (the training data,
or a fixed probe batch online), "test_loss" (when there is a test set), "objective" (loss + penalty) and every
observable the task declares for the network's attention (``diagnostics.observables.declared``), averaged
over a probe batch of sequences; for several layers the names get "@l" (layer l). Checkpoints at
``checkpoints`` log-spaced steps (kept in the result, written by :meth:`FitResult.save`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._batching import default_batch, map_batched
from .._validate import (
    brief,
    check_bool,
    check_callable,
    check_choice,
    check_distinct,
    check_int,
    check_int_items,
    check_key,
    check_positive,
    check_seeds,
)
from ..diagnostics.observables import declared
from ..models.networks import NetworkConfig, network_config
from ..tasks import Dataset, Task, check_dataset
from .core import DIVERGENCE_BOUND, OPTAX_OPTIMIZERS, OptimizerConfig, Plan, failure_message, history_numpy, run_loop
from .losses import LOSSES, LossKind, check_xent_targets, sequence_loss
from .results import FitResult, FitSweepResult, can_sample


@dataclass(frozen=True)
class _Spec:
    """Static description of a run (hashable: one compilation per spec and shape)."""

    task: Task
    loss: str
    optimizer: OptimizerConfig
    plan: Plan
    batch_size: int | None
    online: bool
    penalty: Callable | None
    bound: float


class _Data(NamedTuple):
    X: Any  # (Pmax, T, d_in) or None online
    Y: Any
    P: Any  # valid sequences in X
    test_X: Any  # or None
    test_Y: Any
    probe_X: Any  # (B_probe, T, d_in): the sequences the observables (and the online loss) are averaged on
    probe_Y: Any


def _observable_fn(task: Task, net):
    """alpha of every layer -> {name: value}, the declared observables averaged over the probe batch."""
    obs = declared(task, net.attention_model)

    def f(attn):  # (B, layers, H, T, T)
        out = {}
        layers = attn.shape[1]
        for layer in range(layers):
            a = attn[:, layer]
            a = a[:, 0] if a.shape[1] == 1 else a
            for name, fn in obs.items():
                out[name if layers == 1 else f"{name}@{layer}"] = jnp.mean(fn(a))
        return out

    return f


def _run(spec: _Spec, data: _Data, net, key):
    """One network trained; (final LoopState, records, checkpoints). Pure function of (net, key)."""
    params, static = eqx.partition(net, eqx.is_inexact_array)
    qm = spec.task.query_mask
    observe = _observable_fn(spec.task, net)
    predict = lambda p, X: jax.vmap(eqx.combine(p, static))(X)  # noqa: E731
    penalty = (lambda p: 0.0) if spec.penalty is None else (lambda p: spec.penalty(eqx.combine(p, static)))  # noqa: E731

    if spec.online:

        def loss_fn(p, key):
            batch = spec.task.sample(key, spec.batch_size)
            return sequence_loss(spec.loss, predict(p, batch.X)[0], batch.Y, qm) + penalty(p)
    elif spec.batch_size is None:
        w = jnp.arange(data.X.shape[0]) < data.P

        def loss_fn(p, key):
            return sequence_loss(spec.loss, predict(p, data.X)[0], data.Y, qm, w) + penalty(p)
    else:

        def loss_fn(p, key):
            idx = jax.random.randint(key, (spec.batch_size,), 0, data.P)
            return sequence_loss(spec.loss, predict(p, data.X[idx])[0], data.Y[idx], qm) + penalty(p)

    def record(p):
        F_probe, attn = predict(p, data.probe_X)
        if spec.online:
            loss = sequence_loss(spec.loss, F_probe, data.probe_Y, qm)
        else:
            loss = sequence_loss(spec.loss, predict(p, data.X)[0], data.Y, qm, jnp.arange(data.X.shape[0]) < data.P)
        rec = {"loss": loss}
        if data.test_X is not None:
            rec["test_loss"] = sequence_loss(spec.loss, predict(p, data.test_X)[0], data.test_Y, qm)
        return {**rec, "objective": loss + penalty(p), **observe(attn)}

    opt = spec.optimizer.build(spec.plan.steps)
    return run_loop(params, loss_fn, opt, spec.plan, record, key, spec.bound)


@eqx.filter_jit
def _fit_one(spec, data, net, key):
    return _run(spec, data, net, key)


def _fit_grid(spec, net_config, runs_per_batch, data, seed_index, keys):
    """All (P, seed) runs in one program: data leaves (S, ...) per seed, P (R,) per run; keys (S,): each
    seed's fit key, split as :func:`fit` splits its key."""

    def one(args):
        P, si = args
        pick = lambda tree: jax.tree.map(lambda a: a[si], tree)  # noqa: E731
        init_key, _, run_key = jax.random.split(keys[si], 3)
        d = pick(data._replace(P=None))._replace(P=P)
        return _run(spec, d, net_config.build(init_key), run_key)

    return map_batched(one, (data.P, seed_index), runs_per_batch)


_fit_grid_jit = jax.jit(_fit_grid, static_argnums=(0, 1, 2))


def _optimizer(optimizer, lr) -> OptimizerConfig:
    if isinstance(optimizer, OptimizerConfig):
        if lr is not None:
            raise ValueError(f"lr={lr!r}: give the learning rate inside the OptimizerConfig")
        return optimizer
    if optimizer == "langevin":
        raise ValueError(
            "optimizer='langevin': fit has no temperature; use ba.train for SGLD on the single "
            "layer's posterior, or an optax transformation"
        )
    check_choice("optimizer", optimizer, OPTAX_OPTIMIZERS)  # named as fit's argument, not as the config's field
    return OptimizerConfig(optimizer, 1e-3 if lr is None else lr)


def _spec(
    task,
    loss,
    optimizer,
    lr,
    steps,
    batch_size,
    online,
    penalty,
    record_every,
    log_records,
    checkpoints,
    bound,
    P_min=None,
):
    check_choice("loss", loss, LOSSES)
    if batch_size is not None:
        batch_size = check_int("batch_size", batch_size, minimum=1, maximum=P_min)
    if online and batch_size is None:
        raise ValueError("batch_size=None: online training (data given as a Task) needs a batch size")
    check_callable("penalty", penalty, "a function of the network", optional=True)
    plan = Plan.make(steps, record_every, log_records, checkpoints)
    return _Spec(
        task, loss, _optimizer(optimizer, lr), plan, batch_size, online, penalty, check_positive("bound", bound)
    )


def _check_network_takes(network, task, X_or_key) -> None:
    """The network takes one of the task's sequences and predicts (T, d_out): checked by tracing it once
    (``jax.eval_shape``, no computation), so that a network built for another T or d is refused in one line and not
    deep inside the training program. ``X_or_key``: the training sequences, or (online) the key they are drawn
    with."""
    if hasattr(X_or_key, "ndim") and X_or_key.ndim == 3:
        x = jax.ShapeDtypeStruct(X_or_key.shape[1:], X_or_key.dtype)
    else:
        X = jax.eval_shape(lambda k: task.sample(k, 1).X, X_or_key)
        x = jax.ShapeDtypeStruct(X.shape[1:], X.dtype)
    want = (task.T, task.d_out)
    try:
        out = eqx.filter_eval_shape(lambda net, seq: net(seq), network, x)
        y = out[0] if isinstance(out, tuple) else out
        problem = None if tuple(y.shape) == want else f"it predicts {tuple(y.shape)}"
    except (TypeError, ValueError) as e:
        problem = f"it does not take them ({type(e).__name__})"
    if problem is not None:
        config = getattr(network, "config", None)
        raise ValueError(
            f"network ({type(network).__name__}{'' if config is None else f', {config}'}): for sequences of shape "
            f"{tuple(x.shape)} the task's predictions are {want}, but {problem}; build it for the task "
            "(e.g. SingleLayerConfig.for_task(task))"
        )


def _probe_and_test(task, key, train: Dataset | None, test, probe_size):
    """(test X, Y or None, probe X, Y, note on the test set)."""
    if isinstance(test, Dataset):
        test = check_dataset("test", test, any_d_out=True, like=task)
        if test.P < 1:
            raise ValueError(f"test: P={test.P} sequences; expected at least one, or test=None")
        tX, tY, note = test.X, test.Y, f"user test set ({test.P} sequences)"
    elif test is None:
        tX = tY = None
        note = "none (test=None)"
    elif can_sample(task):
        ds = task.sample(jax.random.fold_in(key, 0), check_int("test", test, minimum=1))
        tX, tY, note = ds.X, ds.Y, f"{test} fresh sequences of the task"
    else:  # the count is checked even where it cannot be used: a bad one is a mistake either way
        check_int("test", test, minimum=1)
        tX = tY = None
        note = f"none: {type(task).__name__} cannot sample and no test set was given"
    probe_size = check_int("probe_size", probe_size, minimum=1)
    if tX is not None:
        pX, pY = tX[:probe_size], tY[:probe_size]
    elif train is not None:
        pX, pY = train.X[:probe_size], train.Y[:probe_size]
    else:
        ds = task.sample(jax.random.fold_in(key, 1), probe_size)
        pX, pY = ds.X, ds.Y
    return tX, tY, pX, pY, note


def _check_targets(loss: str, task, Y, name: str) -> None:
    """Before training: for loss "xent", the queried rows of the targets Y (P, T, d_out) are probabilities."""
    if loss == "xent":
        check_xent_targets(name, Y, task.d_out, np.broadcast_to(np.asarray(task.query_mask, bool), Y.shape[:2]))


def fit(
    network: eqx.Module | NetworkConfig | dict,
    data: Dataset | Task,
    key: jax.Array,
    *,
    loss: LossKind = "mse",
    optimizer: OptimizerConfig | str = "adam",
    lr: float | None = None,
    steps: int = 1000,
    batch_size: int | None = None,
    penalty: Callable | None = None,
    test: Dataset | int | None = 256,
    probe_size: int = 64,
    record_every: int = 50,
    log_records: int = 20,
    checkpoints: int = 0,
    bound: float = DIVERGENCE_BOUND,
    seed: int | None = None,
) -> FitResult:
    """Train ``network`` (a module, or a config built from ``key``) on ``data`` (module docstring).

    optimizer: an :class:`OptimizerConfig` (schedules, clipping) or "adam" / "adamw" / "sgd" with ``lr``
    (default 1e-3). test: a Dataset, a number of fresh sequences of the task (when it can sample; otherwise
    no test loss and ``config["test"]`` says why) or None. A NaN / inf or |parameter| > ``bound`` freezes the
    run at its last good state; the result's ``failure`` names the seed, P and step (and a warning is issued).

    Examples
    --------
    >>> import jax, bayesattn as ba
    >>> from bayesattn.models import SingleLayerConfig
    >>> task = ba.CopyTask(T=4, d=2)
    >>> res = fit(SingleLayerConfig.for_task(task), task.sample(jax.random.key(0), 64), jax.random.key(1),
    ...           lr=0.05, steps=200, log_records=0, record_every=100)
    >>> res.history["step"].tolist(), bool(res.history["m"][-1] > 0.5)
    ([0, 100, 200], True)
    """
    online = isinstance(data, Task)
    if not online and not isinstance(data, Dataset):
        raise ValueError(f"data={type(data).__name__}: expected a bayesattn Dataset or a Task (online)")
    if not online:  # a Dataset built directly is not checked (Dataset.from_arrays is): NaN data "diverged at step 0"
        data = check_dataset("data", data, any_d_out=True)
    task = data if online else data.task
    if online and not can_sample(task):
        raise ValueError(f"data={task!r}: online training needs a task that can sample")
    check_key("key", key)
    seed = None if seed is None else check_int("seed", seed)  # a label, written into the config as it is
    init_key, data_key, run_key = jax.random.split(key, 3)
    if not isinstance(network, eqx.Module):
        network = network_config(network).build(init_key)
    if not hasattr(network, "attention_model"):
        raise ValueError(f"network={type(network).__name__}: expected a bayesattn network (with attention_model)")
    if not online and data.P < 1:
        raise ValueError(f"data: P={data.P} sequences; expected at least one to fit on")
    _check_network_takes(network, task, data_key if online else data.X)
    spec = _spec(
        task,
        loss,
        optimizer,
        lr,
        steps,
        batch_size,
        online,
        penalty,
        record_every,
        log_records,
        checkpoints,
        bound,
        None if online else data.P,
    )
    tX, tY, pX, pY, note = _probe_and_test(task, data_key, None if online else data, test, probe_size)
    _check_targets(loss, task, pY if online else data.Y, "the task's Y" if online else "data.Y")
    d = _Data(
        None if online else data.X, None if online else data.Y, None if online else jnp.asarray(data.P), tX, tY, pX, pY
    )
    state, recs, ck = _fit_one(spec, d, network, run_key)
    params, static = eqx.partition(network, eqx.is_inexact_array)
    final = eqx.combine(state.params, static)
    ck_steps = () if ck is None else spec.plan.checkpoint_steps
    ckpts = [(s, eqx.combine(jax.tree.map(lambda b: b[i], ck), static)) for i, s in enumerate(ck_steps)]
    failed_at = int(state.failed_at)
    P = "online" if online else data.P
    failure = None
    if failed_at >= 0:
        failure = failure_message(seed, P, failed_at, f"optimizer={spec.optimizer.name!r}", spec.bound)
        warnings.warn(failure, RuntimeWarning, stacklevel=2)
    config = {
        "network": network.config.config()
        if isinstance(getattr(network, "config", None), NetworkConfig)
        else type(network).__name__,
        "task": task.config(),
        "loss": loss,
        "optimizer": spec.optimizer,
        "steps": spec.plan.steps,
        "batch_size": batch_size,
        "mode": _mode(online, batch_size),
        "P": P,
        "test": note,
        "seed": seed,
        "penalty": None if penalty is None else repr(penalty),
    }
    return FitResult(history_numpy(recs), final, config, failure, failed_at if failure else None, ckpts)


def _mode(online, batch_size):
    return "online" if online else ("full batch" if batch_size is None else "minibatch")


def fit_sweep(
    network: NetworkConfig | dict,
    task: Task,
    P_values,
    seeds,
    key: jax.Array,
    *,
    loss: LossKind = "mse",
    optimizer: OptimizerConfig | str = "adam",
    lr: float | None = None,
    steps: int = 1000,
    batch_size: int | None = None,
    online: bool = False,
    penalty: Callable | None = None,
    test: int | None = 256,
    probe_size: int = 64,
    record_every: int = 50,
    log_records: int = 20,
    bound: float = DIVERGENCE_BOUND,
    runs_per_batch: int | None = None,
) -> FitSweepResult:
    """One network per (P, seed), all in one jit program (runs_per_batch as in ``ba.train_sweep``).

    For seed s: k = fold_in(key, s); data_key, fit_key = split(k); the seed's sequences are
    ``task.sample(data_key, max(P_values))`` and run (P, s) is ``fit(network, Dataset(X[:P], Y[:P], task),
    fit_key, ...)`` (init, test set and noise shared across P within a seed; with test=None the probe batch is
    the first ``probe_size`` sequences, the same for every P >= probe_size). online=True: fresh data every step,
    P_values must be None. Checkpoints are not kept in sweeps (use :func:`fit` for one run).
    """
    if not isinstance(task, Task) or not can_sample(task):
        raise ValueError(f"task={brief(task)}: expected a bayesattn Task that can sample")
    online = check_bool("online", online)
    net_cfg = network_config(network)
    seeds = check_seeds(seeds)
    if online:
        if P_values is not None:
            raise ValueError(f"P_values={P_values!r}: online training draws fresh data; expected None")
        P_list = [0]
    else:
        P_list = check_int_items("P_values", P_values, minimum=1)
    if not P_list or not seeds:
        raise ValueError("P_values and seeds must be non-empty")
    check_distinct("P_values", P_list)  # a repeated P or seed would train the same run twice
    check_distinct("seeds", seeds)
    check_key("key", key)
    if runs_per_batch is not None:  # before any data is drawn
        runs_per_batch = check_int("runs_per_batch", runs_per_batch, minimum=1)
    _check_network_takes(eqx.filter_eval_shape(net_cfg.build, key), task, key)
    spec = _spec(
        task,
        loss,
        optimizer,
        lr,
        steps,
        batch_size,
        online,
        penalty,
        record_every,
        log_records,
        0,
        bound,
        None if online else min(P_list),
    )
    Pmax = max(P_list)
    per_seed, keys = [], []
    for s in seeds:
        data_key, fit_key = jax.random.split(jax.random.fold_in(key, s))
        full = None if online else task.sample(data_key, Pmax)
        tX, tY, pX, pY, note = _probe_and_test(task, jax.random.split(fit_key, 3)[1], full, test, probe_size)
        _check_targets(loss, task, pY if online else full.Y, "the task's Y")
        per_seed.append(_Data(None if online else full.X, None if online else full.Y, None, tX, tY, pX, pY))
        keys.append(fit_key)
    data = jax.tree.map(lambda *a: jnp.stack(a), *per_seed)._replace(P=jnp.asarray(P_list * len(seeds)))
    seed_index = jnp.repeat(jnp.arange(len(seeds)), len(P_list))
    n_runs = len(seeds) * len(P_list)
    runs_per_batch = check_int(
        "runs_per_batch", default_batch(n_runs) if runs_per_batch is None else runs_per_batch, minimum=1
    )
    state, recs, _ = _fit_grid_jit(spec, net_cfg, min(runs_per_batch, n_runs), data, seed_index, jnp.stack(keys))
    shape = (len(seeds), len(P_list))
    swap = lambda a: np.swapaxes(np.asarray(a).reshape(shape + a.shape[1:]), 0, 1)  # noqa: E731  (nP, nS, ...)
    history = {k: swap(v) for k, v in recs.items()}
    history["step"] = history["step"].astype(int)
    params = jax.tree.map(swap, state.params)
    failed_at = swap(state.failed_at)
    failures = []
    for i, P in enumerate(P_list):
        for j, s in enumerate(seeds):
            if failed_at[i, j] >= 0:
                msg = failure_message(
                    s, "online" if online else P, int(failed_at[i, j]), f"optimizer={spec.optimizer.name!r}", spec.bound
                )
                failures.append({"seed": s, "P": None if online else P, "step": int(failed_at[i, j]), "message": msg})
                warnings.warn(msg, RuntimeWarning, stacklevel=2)
    config = {
        "network": net_cfg.config(),
        "task": task.config(),
        "loss": loss,
        "optimizer": spec.optimizer,
        "steps": spec.plan.steps,
        "batch_size": batch_size,
        "mode": _mode(online, batch_size),
        "test": note,
    }
    return FitSweepResult(
        np.asarray(P_list if not online else [0]), np.asarray(seeds), history, params, failures, config
    )
