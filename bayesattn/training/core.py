"""The one training loop: a pure function of (initial parameters, loss, optimizer, record plan, key).

Every trainer goes through :func:`run_loop`: ``ba.train`` / ``ba.train_sweep`` (Adam or SGLD on the single
layer, the full-batch loss from the posterior's statistics), and :func:`bayesattn.training.fitting.fit` for every
network of the zoo. What differs between them is only the loss (full batch, minibatch, online), the optax
transformation and what a record holds; the stepping, the divergence guard, the record and checkpoint steps
are here once.

The optimizer is an optax ``GradientTransformationExtraArgs``; its ``update`` receives ``key=`` (a fresh PRNG
key each step, for :func:`sgld`'s noise) and ``value=`` (the loss, for ``optax.contrib.reduce_on_plateau``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from .._validate import (
    brief,
    check_between,
    check_bool,
    check_callable,
    check_choice,
    check_entries,
    check_int,
    check_key,
    check_nonnegative,
    check_positive,
    is_traced,
)

DIVERGENCE_BOUND = 1e8  # |parameter| beyond this counts as a divergence, like a NaN
DECAYS = ("constant", "cosine", "exponential", "plateau")


# ----------------------------------------------------------------------------------------------------------
# optimizers
# ----------------------------------------------------------------------------------------------------------


class SGLDState(NamedTuple):
    count: jax.Array


def sgld(learning_rate, temperature) -> optax.GradientTransformationExtraArgs:
    """Stochastic-gradient Langevin dynamics as an optax transformation: the update of gradient g is
    -lr g + sqrt(2 lr temperature) xi, xi ~ N(0, I) drawn from the ``key=`` extra argument.

    With the loss J and temperature tau its stationary law (lr -> 0) is exp(-J / tau). learning_rate: a number
    or an optax schedule of the step; temperature: a number or a (traced) array.
    """
    # numbers and concrete arrays are checked here (a text is refused); a schedule or a traced value is the caller's
    if not (callable(learning_rate) or is_traced(learning_rate)):
        check_entries("learning_rate", learning_rate, check_positive)
    if not is_traced(temperature):
        check_entries("temperature", temperature, check_nonnegative)

    def init(params):
        return SGLDState(jnp.zeros([], jnp.int32))

    def update(updates, state, params=None, *, key, **extra):
        lr = learning_rate(state.count) if callable(learning_rate) else learning_rate
        leaves, treedef = jax.tree.flatten(updates)
        keys = jax.random.split(key, len(leaves))
        noisy = [
            -lr * g + jnp.sqrt(2.0 * lr * temperature) * jax.random.normal(k, g.shape, g.dtype)
            for g, k in zip(leaves, keys)
        ]
        return jax.tree.unflatten(treedef, noisy), SGLDState(optax.safe_increment(state.count))

    return optax.GradientTransformationExtraArgs(init, update)


OPTAX_OPTIMIZERS = {"adam": optax.adam, "adamw": optax.adamw, "sgd": optax.sgd}


@dataclass(frozen=True)
class OptimizerConfig:
    """An optax optimizer with its schedule and clipping (hashable: a static jit argument).

    name: "adam", "adamw", "sgd" or "langevin" (:func:`sgld`; its temperature is given at build time).
    lr: peak learning rate. warmup: linear warm-up steps from 0. decay: "constant", "cosine" (to
    lr * final_factor at step ``decay_steps``, default the run's length), "exponential" (to lr * final_factor
    at decay_steps) or "plateau" (``optax.contrib.reduce_on_plateau`` on the loss: lr *= plateau_factor after
    ``plateau_patience`` steps without relative improvement ``plateau_rtol``). clip: global-norm gradient
    clipping (None: none), applied before the optimizer. A setting of another decay than the one chosen is
    refused (ValueError), as is a warm-up that reaches the decay's end, so that a recorded config runs as it reads.
    """

    name: str = "adam"
    lr: float = 1e-3
    warmup: int = 0
    decay: Literal["constant", "cosine", "exponential", "plateau"] = "constant"
    decay_steps: int | None = None
    final_factor: float = 0.0
    plateau_factor: float = 0.5
    plateau_patience: int = 100
    plateau_rtol: float = 1e-4
    clip: float | None = None
    weight_decay: float | None = None  # adamw only (None: optax's default 1e-4; torch's AdamW uses 1e-2)
    momentum: float | None = None  # sgd only: heavy-ball momentum (torch's SGD momentum); None: plain SGD

    def __post_init__(self):
        check_choice("name", self.name, (*OPTAX_OPTIMIZERS, "langevin"))
        object.__setattr__(self, "lr", check_positive("lr", self.lr))
        object.__setattr__(self, "warmup", check_int("warmup", self.warmup, minimum=0))
        check_choice("decay", self.decay, DECAYS)
        if self.decay_steps is not None:
            object.__setattr__(self, "decay_steps", check_int("decay_steps", self.decay_steps, minimum=1))
        object.__setattr__(self, "final_factor", check_between("final_factor", self.final_factor, 0, 1, closed="both"))
        object.__setattr__(self, "plateau_factor", check_between("plateau_factor", self.plateau_factor, 0, 1))
        object.__setattr__(self, "plateau_patience", check_int("plateau_patience", self.plateau_patience, minimum=1))
        object.__setattr__(self, "plateau_rtol", check_nonnegative("plateau_rtol", self.plateau_rtol))
        if self.clip is not None:
            object.__setattr__(self, "clip", check_positive("clip", self.clip))
        if self.weight_decay is not None:
            if self.name != "adamw":
                raise ValueError(
                    f"weight_decay={self.weight_decay!r} with optimizer={self.name!r}: expected None "
                    "(decoupled weight decay is adamw's)"
                )
            object.__setattr__(self, "weight_decay", check_nonnegative("weight_decay", self.weight_decay))
        if self.momentum is not None:
            if self.name != "sgd":
                raise ValueError(
                    f"momentum={self.momentum!r} with optimizer={self.name!r}: expected None "
                    "(heavy-ball momentum is sgd's)"
                )
            object.__setattr__(self, "momentum", check_between("momentum", self.momentum, 0, 1, closed="low"))
        self._check_unused()
        if self.name == "langevin" and (self.decay == "plateau" or self.clip is not None):
            raise ValueError(
                f"optimizer='langevin': decay={self.decay!r}, clip={self.clip!r}: a plateau decay or "
                "clipping would change the stationary law; expected neither"
            )

    def _check_unused(self) -> None:
        """A setting of another decay is refused (it would be recorded with the run but not used): decay_steps
        and final_factor belong to "cosine" and "exponential", the plateau_* settings to "plateau". A warm-up that
        reaches decay_steps leaves no decay."""
        defaults = {f.name: f.default for f in dataclasses.fields(self)}
        decays = {"decay_steps": ("cosine", "exponential"), "final_factor": ("cosine", "exponential")}
        for name in ("decay_steps", "final_factor", "plateau_factor", "plateau_patience", "plateau_rtol"):
            if self.decay not in decays.get(name, ("plateau",)) and getattr(self, name) != defaults[name]:
                raise ValueError(
                    f"{name}={getattr(self, name)!r} with decay={self.decay!r}: expected {defaults[name]!r} (it is "
                    "not used by this decay)"
                )
        if self.decay_steps is not None and self.warmup >= self.decay_steps:
            raise ValueError(
                f"warmup={self.warmup} with decay_steps={self.decay_steps}: expected a warm-up shorter than the decay"
            )

    def schedule(self, steps: int):
        """The learning rate as an optax schedule of the step (a constant when there is nothing to schedule)."""
        n = self.decay_steps or steps
        if self.decay == "cosine":
            main = optax.cosine_decay_schedule(self.lr, max(n - self.warmup, 1), alpha=self.final_factor)
        elif self.decay == "exponential":
            main = optax.exponential_decay(self.lr, max(n - self.warmup, 1), max(self.final_factor, 1e-12))
        else:
            main = optax.constant_schedule(self.lr)
        if self.warmup:
            return optax.join_schedules([optax.linear_schedule(0.0, self.lr, self.warmup), main], [self.warmup])
        return main if self.decay in ("cosine", "exponential") else self.lr

    def build(self, steps: int, temperature=None) -> optax.GradientTransformationExtraArgs:
        """The optax transformation for a run of ``steps`` steps (``temperature``: langevin only)."""
        steps = check_int("steps", steps, minimum=1)
        if self.decay in ("cosine", "exponential") and self.decay_steps is None and self.warmup >= steps:
            raise ValueError(
                f"warmup={self.warmup} with steps={steps} and decay={self.decay!r}: expected a warm-up shorter "
                "than the run (the decay runs to its last step)"
            )
        if self.name != "langevin" and temperature is not None:
            raise ValueError(
                f"temperature={temperature!r} with optimizer={self.name!r}: only 'langevin' has a temperature; "
                "expected None"
            )
        lr = self.schedule(steps)
        if self.name == "langevin":
            if temperature is None:
                raise ValueError("temperature=None: optimizer='langevin' needs its temperature (a number >= 0)")
            return optax.chain(sgld(lr, temperature))
        parts = [] if self.clip is None else [optax.clip_by_global_norm(self.clip)]
        extra = {} if self.weight_decay is None else {"weight_decay": self.weight_decay}
        if self.momentum:
            extra["momentum"] = self.momentum
        parts.append(OPTAX_OPTIMIZERS[self.name](lr, **extra))
        if self.decay == "plateau":
            parts.append(
                optax.contrib.reduce_on_plateau(
                    factor=self.plateau_factor, patience=self.plateau_patience, rtol=self.plateau_rtol
                )
            )
        return optax.chain(*parts)


# ----------------------------------------------------------------------------------------------------------
# when to record and checkpoint
# ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """Record steps (every ``record_every`` steps, plus ``log_records`` log-spaced steps that resolve fast
    early changes; always 0 and the last step) and checkpoint steps (log-spaced, a subset; 0 and the last
    step included when there are any)."""

    steps: int
    record_steps: tuple
    checkpoint_steps: tuple

    def __post_init__(self):
        """A plan built directly is held to what :meth:`make` builds: records from 0 to ``steps``, increasing (the
        loop runs the gaps between them), and checkpoints among the records (one elsewhere was never written)."""
        check_int("steps", self.steps, minimum=1)
        for name in ("record_steps", "checkpoint_steps"):
            values = getattr(self, name)
            if not isinstance(values, tuple):
                raise ValueError(f"{name}={brief(values)}: expected a tuple of integers")
            for i, v in enumerate(values):
                check_int(f"{name}[{i}]", v, minimum=0, maximum=self.steps)
            if any(b <= a for a, b in zip(values, values[1:])):
                raise ValueError(f"{name}={brief(values)}: expected increasing steps")
        rec = self.record_steps
        if not rec or rec[0] != 0 or rec[-1] != self.steps:
            raise ValueError(f"record_steps={brief(rec)}: expected steps from 0 to steps={self.steps}")
        missing = sorted(set(self.checkpoint_steps) - set(rec))
        if missing:
            raise ValueError(f"checkpoint_steps={brief(self.checkpoint_steps)}: {missing} not among the record_steps")

    @classmethod
    def make(cls, steps: int, record_every: int, log_records: int = 0, checkpoints: int = 0) -> Plan:
        steps = check_int("steps", steps, minimum=1)
        record_every = min(check_int("record_every", record_every, minimum=1), steps)
        log_records = check_int("log_records", log_records, minimum=0)
        checkpoints = check_int("checkpoints", checkpoints, minimum=0)
        rec = set(range(0, steps + 1, record_every)) | {steps}
        rec |= set(_log_steps(steps, log_records))
        ck = set(_log_steps(steps, checkpoints)) | ({0, steps} if checkpoints else set())
        return cls(steps, tuple(sorted(rec | ck)), tuple(sorted(ck)))


def _log_steps(steps: int, n: int) -> list:
    if n <= 0:
        return []
    return sorted(set(np.unique(np.round(np.geomspace(1, steps, n))).astype(int).tolist()))


# ----------------------------------------------------------------------------------------------------------
# the loop
# ----------------------------------------------------------------------------------------------------------


class LoopState(NamedTuple):
    params: Any
    opt_state: Any
    step: jax.Array  # int
    failed_at: jax.Array  # int, -1 while healthy; the step whose update was non-finite or out of bounds


def run_loop(
    params,
    loss_fn: Callable,
    opt,
    plan: Plan,
    record_fn: Callable,
    key: jax.Array,
    bound: float = DIVERGENCE_BOUND,
    on_record: Callable[[Any], None] | None = None,
):
    """Train ``params`` (a pytree of float arrays) for ``plan.steps`` steps.

    loss_fn(params, key) -> scalar: the loss minimised (its key draws minibatches or online data).
    record_fn(params) -> dict of arrays, evaluated at every record step.
    Step t draws (k_batch, k_noise) = split(fold_in(key, t)). A step whose loss, gradient or new parameters are
    non-finite, or whose parameters exceed ``bound`` in absolute value, freezes the run at its last good state
    and sets ``failed_at`` to t; the remaining records repeat that state.

    ``on_record``: called on the host with the step count (an integer array; batched under vmap) at every record
    step after the first, through ``jax.debug.callback`` (for a progress bar inside one compiled run; it reads
    nothing back, so the results are the same with or without it).

    Returns (final LoopState, records: dict with a leading axis over ``plan.record_steps`` (and "step"),
    checkpoints: params with a leading axis over ``plan.checkpoint_steps``, or None).
    """
    if not isinstance(plan, Plan):
        raise ValueError(f"plan={plan!r}: expected a Plan (Plan.make(steps, record_every))")
    if not (hasattr(opt, "init") and hasattr(opt, "update")):
        raise ValueError(f"opt={opt!r}: expected an optax GradientTransformation (e.g. optax.adam(1e-2))")
    check_key("key", key)
    check_callable("loss_fn", loss_fn), check_callable("record_fn", record_fn)
    check_callable("on_record", on_record, optional=True)
    leaves = jax.tree.leaves(params)
    if not leaves or not all(jnp.issubdtype(jnp.result_type(p), jnp.floating) for p in leaves):
        kinds = sorted({str(jnp.result_type(p)) for p in leaves})
        raise ValueError(f"params: {len(leaves)} arrays of {kinds}: expected a pytree of at least one float array")
    bound = check_positive("bound", bound)
    step_fns = loop_steps(loss_fn, opt, record_fn, key, bound)
    rec_steps = np.asarray(plan.record_steps)
    n_ck = len(plan.checkpoint_steps)
    slot = {s: i for i, s in enumerate(plan.checkpoint_steps)}
    slots = np.asarray([slot.get(int(s), n_ck) for s in rec_steps])  # n_ck: a scratch slot, dropped
    buf = jax.tree.map(lambda p: jnp.zeros((n_ck + 1, *p.shape), p.dtype), params) if n_ck else None
    state = step_fns.start(params)
    first = step_fns.record(state)
    buf = write_slot(buf, slots[0], params)
    (state, buf), recs = run_segments(step_fns, state, buf, np.diff(rec_steps), slots[1:], on_record)
    recs = jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), first, recs)
    ckpts = None if buf is None else jax.tree.map(lambda b: b[:n_ck], buf)
    return state, recs, ckpts


class LoopSteps(NamedTuple):
    """The pieces of :func:`run_loop`: ``start(params) -> LoopState``, ``body(i, state) -> state`` (one step) and
    ``record(state) -> dict`` (with "step")."""

    start: Callable
    body: Callable
    record: Callable


def loop_steps(loss_fn: Callable, opt, record_fn: Callable, key: jax.Array, bound: float = DIVERGENCE_BOUND):
    """:class:`LoopSteps` of a run (arguments as :func:`run_loop`'s): every step's keys come from its step count
    alone, so a run cut into parts computes what it computes in one piece."""
    value_and_grad = jax.value_and_grad(loss_fn)
    opt = optax.with_extra_args_support(opt)

    def body(_, state: LoopState):
        k_batch, k_noise = jax.random.split(jax.random.fold_in(key, state.step))
        value, grads = value_and_grad(state.params, k_batch)
        updates, new_opt = opt.update(grads, state.opt_state, state.params, key=k_noise, value=value)
        new_params = optax.apply_updates(state.params, updates)
        leaves = [value, *jax.tree.leaves(grads), *jax.tree.leaves(new_params)]
        ok = jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]))
        ok &= jnp.all(jnp.stack([jnp.max(jnp.abs(p)) < bound for p in jax.tree.leaves(new_params)]))
        healthy = state.failed_at < 0
        go = ok & healthy  # a failed run is frozen at its last good state
        keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(go, a, b), new, old)  # noqa: E731
        failed_at = jnp.where(healthy & ~ok, state.step, state.failed_at)
        return LoopState(keep(new_params, state.params), keep(new_opt, state.opt_state), state.step + 1, failed_at)

    def start(params):
        return LoopState(params, opt.init(params), jnp.asarray(0), jnp.asarray(-1))

    def record(state):
        return {"step": state.step, **record_fn(state.params)}

    return LoopSteps(start, body, record)


def write_slot(buf, i, params):
    """``buf`` (a stack of parameter pytrees, or None) with ``params`` written at index ``i``."""
    return None if buf is None else jax.tree.map(lambda b, p: b.at[i].set(p), buf, params)


def run_segments(step_fns: LoopSteps, state, buf, lengths, slots, on_record=None):
    """Advance ``state`` by ``lengths[j]`` steps for each record j (a ``lax.scan`` over the records), recording
    after each and writing the parameters into ``buf`` at ``slots[j]``; returns ((state, buf), records)."""
    lengths = np.asarray(lengths)
    # equal segments (no log-spaced records): a static trip count; a count read from xs made a train_sweep
    # 1.47x slower than the loop this one replaced, the static count 1.17x (benchmarks/bench_training.py --loop)
    static_length = int(lengths[0]) if np.all(lengths == lengths[0]) else None

    def segment(carry, xs):
        state, buf = carry
        length, i = xs
        # the trip count comes from xs, not from the (possibly vmapped) state: the loop stays unbatched
        state = jax.lax.fori_loop(0, length if static_length is None else static_length, step_fns.body, state)
        if on_record is not None:
            jax.debug.callback(on_record, state.step)
        return (state, write_slot(buf, i, state.params)), step_fns.record(state)

    return jax.lax.scan(segment, (state, buf), (jnp.asarray(lengths), jnp.asarray(slots)))


def part_bounds(record_steps, part_steps: int) -> list[int]:
    """Indices into ``record_steps`` where :func:`run_loop_in_parts` cuts a run: the first record, then each record
    at least ``part_steps`` steps after the last cut, and the last record."""
    rec = np.asarray(record_steps)
    bounds = [0]
    for i in range(1, len(rec)):
        if rec[i] - rec[bounds[-1]] >= part_steps or i == len(rec) - 1:
            bounds.append(i)
    return bounds


def run_loop_in_parts(
    params,
    loss_fn: Callable,
    opt,
    plan: Plan,
    record_fn: Callable,
    key: jax.Array,
    *,
    part_steps: int,
    save: Callable[[LoopState, dict], None] | None = None,
    resume: Callable[[LoopState], tuple[LoopState, dict] | None] | None = None,
    bound: float = DIVERGENCE_BOUND,
    on_record: Callable[[Any], None] | None = None,
):
    """:func:`run_loop` cut into parts at record steps (:func:`part_bounds`), each part one compiled call (parts of
    the same shape share one compilation), so that a long run can be saved between parts and go on from there.

    save(state, records): called after every part but the last, with the :class:`LoopState` and the records so far
    (numpy arrays, a leading axis over the records done). resume(initial state) -> (state, records) or None: a
    saved part to go on from, whose step must be one of this plan's cuts (ValueError otherwise). A run resumed from
    a saved part computes exactly what it computes uninterrupted: the same part programs run on the same states,
    and every step's keys come from its step count. Plans with checkpoint steps are not supported (ValueError).

    Returns (final LoopState, records as :func:`run_loop`'s, as numpy arrays)."""
    if plan.checkpoint_steps:
        raise ValueError("plan: run_loop_in_parts keeps no checkpoints; expected a plan without checkpoint steps")
    part_steps = check_int("part_steps", part_steps, minimum=1)
    step_fns = loop_steps(loss_fn, opt, record_fn, key, bound)
    rec = np.asarray(plan.record_steps)
    bounds = part_bounds(rec, part_steps)
    state = step_fns.start(params)
    got = None if resume is None else resume(state)
    if got is None:
        recs = jax.tree.map(lambda a: np.asarray(a)[None], jax.jit(step_fns.record)(state))
        done = 0
    else:
        state, recs = got
        step = int(state.step)
        cuts = [int(rec[b]) for b in bounds[1:-1]]
        if step not in cuts:
            raise ValueError(f"resume: a saved state at step {step}; this run is cut at steps {cuts}")
        done = cuts.index(step) + 1
    compiled: dict[tuple, Callable] = {}
    for a, b in zip(bounds[done:], bounds[done + 1 :]):
        lengths = tuple(int(x) for x in np.diff(rec[a : b + 1]))
        if lengths not in compiled:
            compiled[lengths] = jax.jit(
                lambda st, L=lengths: run_segments(step_fns, st, None, L, np.zeros(len(L), int), on_record)
            )
        (state, _), part = compiled[lengths](state)
        recs = jax.tree.map(lambda r, p: np.concatenate([r, np.asarray(p)]), recs, part)
        if save is not None and b != bounds[-1]:
            save(state, recs)
    return state, recs


class StepProgress:
    """A progress bar over the steps of one compiled run, fed by :func:`run_loop`'s ``on_record`` (a context
    manager; ``enabled=False``: no bar, and ``callback`` is None so that the program has no host call)."""

    def __init__(self, total: int, desc: str, enabled: bool = True):
        self.bar = None
        check_int("total", total, minimum=0)
        if not isinstance(desc, str):
            raise ValueError(f"desc={desc!r}: expected the bar's label, a str")
        if check_bool("enabled", enabled):
            from tqdm.auto import tqdm

            self.bar = tqdm(total=int(total), desc=desc, unit="step", leave=False)

    @property
    def callback(self) -> Callable[[Any], None] | None:
        return None if self.bar is None else self.update

    def update(self, step) -> None:
        n = int(np.max(np.asarray(step)))  # batched under vmap: the furthest run
        if self.bar is not None and n > self.bar.n:
            self.bar.update(n - self.bar.n)

    def __enter__(self) -> StepProgress:
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.close()


def failure_message(seed, P, step, what: str, bound: float = DIVERGENCE_BOUND) -> str:
    """The message of a divergent run, naming its seed, P, step and the run's divergence bound."""
    return (
        f"run seed={seed}, P={P} diverged at step {step} (NaN/inf or |parameter| > {bound:g}) "
        f"with {what}; frozen at its last finite state"
    )


def history_numpy(recs) -> dict:
    """The records of :func:`run_loop` as numpy arrays ({name: (..., records)}), "step" as ints."""
    h = {k: np.asarray(v) for k, v in recs.items()}
    h["step"] = h["step"].astype(int)
    return h
