"""The staircase in training time: the paper's minimal model on :class:`~bayesattn.HighOrderMarkovTask`
(Yueksel, Alvarez Lucendo & Flammarion, arXiv 2602.19143, code tml-epfl/hmm-attention; docs/results/staircase.md).

Model (their ``full_disection`` config): inputs [one-hot token ; one-hot position], H heads each with its own
W_Q and W_V, keys = inputs, scores / sqrt(input width), heads summed, frozen identity decoder, Xavier-uniform
init (:class:`~bayesattn.models.MultiHeadConfig` with ``init="xavier"``). Optimiser: AdamW lr 0.08, weight
decay 0.01, gradient clipping at 1, cross-entropy on the chain's tokens, minibatches of 3000 of 9000 sequences.

Their ReduceLROnPlateau(patience 10, factor 0.5) is built but never stepped (their trainer calls the scheduler
only with ``epoch_end=False``, which a plateau scheduler ignores), so their learning rate stays 0.08:
``plateau=False`` (default) is that; ``plateau=True`` steps optax's reduce_on_plateau on the minibatch loss with
torch's semantics (reduce after ``patience + 1`` steps without a relative improvement of 1e-4).

Records, every ``record_every`` steps on ``probe`` validation sequences: the validation loss, the attention mass
of every head on every span at the last query (the paper's ``span_mass_head{h}_span{k}``) and at all chain
queries, and KL(teacher restricted to its k newest spans || model) for k = 1..K (k = K: the full teacher); and
the training loss on min(probe, train) of the training sequences, so that the train / validation gap (overfitting
of a finite data set) can be read off.

Teachers: one per seed by default (``teacher = "per_seed"``: the chain's U_k drawn from the run's seed); data:
a finite set of ``train`` sequences (default) or fresh sequences every step (``data = "online"``).
"""

from __future__ import annotations

import json
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ...training.checkpoints import RunClock, save_loop_state
from ...training.core import Plan, StepProgress, run_loop_in_parts
from .config import TrainingConfig
from .models import minimal_logits


def kl_rows(logp_teacher: jax.Array, logq: jax.Array) -> jax.Array:
    """Mean over sequences and rows of KL(p || q); log-probabilities (B, T_q, V)."""
    return jnp.mean(jnp.sum(jnp.exp(logp_teacher) * (logp_teacher - logq), axis=-1))


def _observe(task, alpha):
    """alpha: (B, T_q, H, T) on the chain rows -> span masses at the last query (H, K) and averaged over the
    chain rows (H, K)."""
    q0 = task.burn_in - 1
    pats = jnp.asarray(np.stack(list(task.target_patterns.values()))[:, q0:, :], alpha.dtype)  # (K, T_q, T)
    last = jnp.einsum("bhs,ks->hk", alpha[:, -1], pats[:, -1]) / alpha.shape[0]
    rows = jnp.einsum("bths,kts->hk", alpha, pats) / (alpha.shape[0] * alpha.shape[1])
    return last, rows


def forward_fn(cfg: TrainingConfig, static):
    """forward(params, tokens (B, T) int) -> (logits (B, T_q, V), attention (B, T_q, H, T)) on the chain rows."""
    task = cfg.task()
    q0 = task.burn_in - 1
    dt = jnp.float32 if cfg.dtype == "float32" else jnp.float64
    if cfg.model == "minimal":
        scale = static.config.score_scale
        return lambda p, tok: minimal_logits(p.W_Q, p.W_V, tok, scale, q0, dt)

    def forward(p, tok):
        net = jax.tree.map(lambda a: a.astype(dt) if eqx.is_inexact_array(a) else a, eqx.combine(p, static))
        y, attn = jax.vmap(net)(tok)  # (B, T, V), (B, 1, H, T, T)
        return y[:, q0:], jnp.transpose(attn[:, 0, :, q0:, :], (0, 2, 1, 3))

    return forward


PART_STEPS = 500  # a run is compiled in parts of this many steps; with a ``resume`` file it is saved after each


def train_minimal(cfg: TrainingConfig, seed: int, progress: bool = False, resume: Path | None = None) -> dict:
    """One run (the minimal model or the transformer variant, ``cfg.model``): data, init and minibatches from
    ``seed``, the teacher from ``cfg.teacher_of(seed)`` (the run's seed by default: one teacher per seed).
    ``cfg.data = "finite"``: ``cfg.train`` sequences, minibatches of ``batch_size`` without replacement;
    "online": ``batch_size`` fresh sequences every step. Returns {"step": (R,), "val_loss": (R,), "train_loss":
    (R,) (on min(probe, train) of the training sequences; online: on probe sequences of the stream), "mass_last":
    (R, H, K), "mass_rows": (R, H, K), "kl": (R, K), "teacher_entropy": float (the floor of the validation
    loss), "teacher_seed", "failed_at": int (-1: healthy), "wall_s": float (seconds spent on the run, summed over
    every process that ran a part of it; None when it went on from a state saved without that time)}.
    ``progress``: a bar over the steps, updated at every record step from inside the compiled parts.

    The run is compiled in parts of about PART_STEPS steps (:func:`~bayesattn.training.core.run_loop_in_parts`).
    ``resume``: a file that holds the run's state after its last finished part (written after every part, removed
    when the run ends); a run killed in between goes on from there and computes what it computes uninterrupted."""
    task = cfg.task(seed)
    q0 = task.burn_in - 1
    k_data, k_val, k_init, k_run = jax.random.split(jax.random.key(seed), 4)
    n_train = cfg.batch_size if cfg.data == "online" else cfg.train
    train = task.sample(k_data, n_train)
    val = task.sample(k_val, cfg.val)
    X, Y = jnp.argmax(train.X, -1), jnp.argmax(train.Y, -1)[:, q0:]  # tokens (one-hot -> int, exact)
    pX, pY = jnp.argmax(val.X[: cfg.probe], -1), jnp.argmax(val.Y[: cfg.probe], -1)[:, q0:]
    n_fit = min(cfg.probe, X.shape[0])
    tX, tY = X[:n_fit], Y[:n_fit]  # the training loss is recorded on these
    net = cfg.network().build(k_init)
    params, static = eqx.partition(net, eqx.is_inexact_array)
    forward = forward_fn(cfg, static)
    # teachers restricted to their k newest spans, on the probe's chain rows: (K, B, T_q, V) log-probabilities
    teach = jnp.stack(
        [
            jax.nn.log_softmax(task.teacher_logits(val.X[: cfg.probe], newest=k)[:, q0:], axis=-1)
            for k in range(1, task.K + 1)
        ]
    )
    ent = float(-jnp.sum(jnp.exp(teach[-1]) * teach[-1], -1).mean())

    def xent(F, y):
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(F, -1), y[..., None], -1))

    def loss_fn(p, key):
        if cfg.data == "online":
            batch = task.sample(key, cfg.batch_size)
            return xent(forward(p, jnp.argmax(batch.X, -1))[0], jnp.argmax(batch.Y, -1)[:, q0:])
        idx = jax.random.choice(key, cfg.train, (cfg.batch_size,), replace=False)
        return xent(forward(p, X[idx])[0], Y[idx])

    def record(p):
        F, attn = forward(p, pX)
        logq = jax.nn.log_softmax(F.astype(jnp.float64), -1)
        last, rows = _observe(task, attn)
        kl = jnp.stack([kl_rows(teach[k], logq) for k in range(task.K)])
        train_loss = xent(forward(p, tX)[0].astype(jnp.float64), tY)
        return {
            "val_loss": xent(F.astype(jnp.float64), pY),
            "train_loss": train_loss,
            "mass_last": last,
            "mass_rows": rows,
            "kl": kl,
        }

    plan = Plan.make(cfg.steps, cfg.record_every)
    opt = cfg.optimizer_transform()
    fingerprint = json.dumps({"train": cfg.config(), "seed": seed}, sort_keys=True, default=str)
    clock = RunClock()
    with StepProgress(cfg.steps, f"train seed {seed}", enabled=progress) as bar:
        state, recs = run_loop_in_parts(
            params,
            loss_fn,
            opt,
            plan,
            record,
            k_run,
            part_steps=PART_STEPS,
            save=None
            if resume is None
            else lambda st, r: save_loop_state(resume, st, r, fingerprint, clock.meta(steps=cfg.steps)),
            resume=None if resume is None else lambda like: clock.load(resume, like, fingerprint),
            on_record=bar.callback,
        )
    if resume is not None:
        resume.unlink(missing_ok=True)
    out = {k: np.asarray(v, np.float64) for k, v in recs.items()}
    out["step"] = np.asarray(recs["step"], int)
    out["teacher_entropy"] = ent
    out["teacher_seed"] = task.seed
    out["failed_at"] = int(state.failed_at)
    out["wall_s"] = clock.seconds()
    return out


def stage_times(steps: np.ndarray, mass_last: np.ndarray, threshold: float = 0.5) -> list:
    """Step at which the k-th span (newest first) is first covered by some head with mass >= ``threshold`` at
    the last query while every newer span also is, for k = 1..K (None if never). mass_last: (R, H, K), spans
    ordered oldest to newest as in the task."""
    best = np.max(mass_last, axis=1)[:, ::-1]  # (R, K), newest first
    out = []
    for k in range(best.shape[1]):
        ok = np.all(best[:, : k + 1] >= threshold, axis=1)
        out.append(int(steps[np.argmax(ok)]) if ok.any() else None)
    return out
