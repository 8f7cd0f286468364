"""The checked configuration of a single-layer run (`train`, `train_sweep`): defaults, validation, the
recorded config dict and the history's post-processing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import jax.numpy as jnp
import numpy as np

from .._validate import brief, check_choice, check_finite, check_int, check_positive, check_real_array
from ..bayes.posterior import Prior
from ..models.attention import AttentionModel
from .core import Plan, failure_message

OptimizerKind = Literal["adam", "langevin", "gd"]
InitKind = Literal["small", "hot"]
ObjectiveKind = Literal["joint", "marginal"]
OPTIMIZERS = ("adam", "langevin", "gd")  # gd: plain (full-batch) gradient descent
OBJECTIVES = ("joint", "marginal")
TRAIN_INITS = ("small", "hot")


@dataclass(frozen=True)
class TrainConfig:
    """Static (hashable) configuration of a single-layer run (``train``, ``train_sweep``), checked by
    :func:`make_train_config`; one jit compilation per distinct config and shape."""

    optimizer: str
    lr: Any  # float or an optax schedule (callable of the step)
    steps: int
    record_every: int
    batch_size: int | None
    init: str  # "small", "hot" or "array"
    init_scale: float | None  # None: the default hot pattern (hot_logits)
    log_records: int = 0
    objective: str = "joint"  # "joint": J(L, V); "marginal": J_marg(L), V integrated out
    temperature: float = 1.0  # langevin: tau, the noise temperature in units of sigma2 / n

    @property
    def plan(self) -> Plan:
        return Plan.make(self.steps, self.record_every, self.log_records)


def _default_lr(optimizer: str) -> float:
    # langevin: at T = 16, P = 1000 (canonical prior) lr = 3e-2 mixes 4x faster than 1e-2 and matches NUTS
    return 1e-2 if optimizer == "adam" else 3e-2  # gd as langevin: the same step on J, without the noise


def _default_init_scale(init: str) -> float | None:
    # hot: None lets hot_logits put 0.9 on the source in every row (softmax) or alpha = pattern (linear); an array
    # init sets L itself and has no scale
    return 1e-2 if init == "small" else None


def make_train_config(
    optimizer,
    lr,
    steps,
    init,
    init_scale,
    batch_size,
    record_every,
    P_max,
    log_records=0,
    objective="joint",
    temperature=1.0,
) -> TrainConfig:
    """The checked :class:`TrainConfig` of a run's options (ValueError naming the option otherwise), with the
    defaults filled in: lr per optimizer, init_scale per init; batch_size at most ``P_max``."""
    check_choice("optimizer", optimizer, OPTIMIZERS)
    check_choice("objective", objective, OBJECTIVES)
    temperature = check_positive("temperature", temperature)
    if optimizer != "langevin" and temperature != 1.0:
        raise ValueError(
            f"temperature={temperature!r}: only optimizer='langevin' has a temperature; "
            f"leave it at 1.0 for optimizer={optimizer!r}"
        )
    if objective == "marginal" and batch_size is not None:
        raise ValueError(
            f"batch_size={batch_size!r}: objective='marginal' is full batch (the readout is "
            "integrated out from the statistics of all sequences); expected None"
        )
    if callable(lr):
        if optimizer != "adam":
            raise ValueError(f"lr={lr!r}: a schedule is only supported for optimizer='adam'; give a positive number")
        lr_val = check_schedule("lr", lr)
    else:
        lr_val = check_positive("lr", _default_lr(optimizer) if lr is None else lr)
    steps = check_int("steps", steps, minimum=1)
    record_every = min(check_int("record_every", record_every, minimum=1), steps)
    if isinstance(init, str):
        init_kind = check_choice("init", init, TRAIN_INITS)
    else:
        init_kind = "array"
        if init_scale is not None:
            raise ValueError(
                f"init_scale={init_scale!r}: only init='small' or 'hot' has a scale; an array init sets L itself, "
                "leave init_scale None"
            )
    scale = _default_init_scale(init_kind) if init_scale is None else check_positive("init_scale", init_scale)
    if batch_size is not None:
        batch_size = check_int("batch_size", batch_size, minimum=1, maximum=P_max)
    log_records = check_int("log_records", log_records, minimum=0)
    return TrainConfig(
        optimizer, lr_val, steps, record_every, batch_size, init_kind, scale, log_records, objective, float(temperature)
    )


def check_schedule(name: str, schedule):
    """``schedule`` as it is when it maps step 0 (an int32 count, as the optimizer's) to a finite number;
    ValueError naming ``name`` otherwise (a function that is not a schedule failed deep inside jit)."""
    expected = (
        f"{name}={brief(schedule)}: expected a positive finite number or an optax schedule (a function of the step)"
    )
    try:
        value = schedule(jnp.zeros([], jnp.int32))
    except Exception as e:
        raise ValueError(f"{expected}; {name}(0) raised {type(e).__name__}: {e}") from None
    try:
        check_finite(f"{name}(0)", value if np.ndim(value) == 0 else None)
    except ValueError:
        raise ValueError(f"{expected}; {name}(0) returned {brief(value)}, expected a finite number") from None
    return schedule


def check_prior_attention(prior, attention, heads=None) -> AttentionModel:
    """The attention model of a run (a kind string with ``heads``, or an AttentionModel)."""
    if not isinstance(prior, Prior):
        raise ValueError(f"prior={prior!r}: expected a bayesattn Prior")
    return AttentionModel.coerce(attention, heads)


def init_arrays(init, shape, d_out, d):
    """(L0, V0 or None) from an init given as an array L of ``shape`` ((T, T) or (H, T, T)) or a pair (L, V), V: (d_out, d) with d = H d_in."""
    if isinstance(init, (tuple, list)):
        if len(init) != 2:
            raise ValueError(f"init: a sequence must be the pair (L, V), got {len(init)} items")
        L0 = check_real_array("init L", init[0], shape)
        V0 = check_real_array("init V", init[1], (d_out, d))
        return jnp.asarray(L0, jnp.float64), jnp.asarray(V0, jnp.float64)
    try:
        L0 = check_real_array("init", init, shape)
    except ValueError as e:  # a string, complex numbers, objects: say what an init may be
        raise ValueError(
            f"init={brief(init)}: expected 'small', 'hot', an array L of shape {shape} of real numbers or a pair "
            f"(L, V) ({e})"
        ) from None
    return jnp.asarray(L0, jnp.float64), None


def train_config_dict(cfg: TrainConfig, attention, prior, task, **extra) -> dict:
    """The config recorded with a run's result (plain data): the options, the attention model, prior, task and
    ``extra``."""
    return {
        "optimizer": cfg.optimizer,
        "lr": cfg.lr if not callable(cfg.lr) else repr(cfg.lr),
        "steps": cfg.steps,
        "record_every": cfg.record_every,
        "log_records": cfg.log_records,
        "batch_size": cfg.batch_size,
        "init": cfg.init,
        "init_scale": cfg.init_scale,
        "attention": attention.kind,
        "heads": attention.heads,
        "prior": prior.config(),
        "task": task.config(),
        "objective": (
            "J = |Y - F|^2 / 2n + prior decay = -(sigma2/n) log p(L, V, D) + const"
            if cfg.objective == "joint"
            else "J_marg = -(sigma2/n) log p(L, D) + const (V integrated out; records use V = E[V | L, D])"
        ),
        "objective_kind": cfg.objective,
        "temperature": cfg.temperature,
        **extra,
    }


def train_failure_message(seed, P, step, optimizer) -> str:
    """:func:`~bayesattn.training.core.failure_message` of a single-layer run with ``optimizer``."""
    return failure_message(seed, P, step, f"optimizer={optimizer!r}")


def final_records(history: dict, index=-1) -> dict:
    """The last record of every declared observable (history keys other than the losses, step and L)."""
    skip = {"step", "loss", "test_loss", "objective", "L"}
    return {k: v[..., index] for k, v in history.items() if k not in skip}
