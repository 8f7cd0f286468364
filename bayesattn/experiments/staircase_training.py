"""The staircase in training time: the paper's minimal model on :class:`~bayesattn.HighOrderMarkovTask`
(Yueksel, Alvarez Lucendo & Flammarion, arXiv 2602.19143, code tml-epfl/hmm-attention; docs/staircase.md).

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
queries, and KL(teacher restricted to its k newest spans || model) for k = 1..K (k = K: the full teacher).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._validate import check_choice, check_int, check_positive
from ..models.networks import MultiHeadConfig
from ..tasks import HighOrderMarkovTask
from ..training.core import OptimizerConfig, Plan, run_loop


@dataclass(frozen=True)
class TrainingConfig:
    """One run of the minimal model (the paper's sizes by default)."""

    vocab: int = 50
    span_lengths: tuple = (2, 2, 2)
    m: float = 1.7
    generated: int = 20
    heads: int = 3
    train: int = 9000
    val: int = 3000
    batch_size: int = 3000
    steps: int = 2000
    optimizer: str = "adamw"  # or "sgd"
    lr: float = 0.08
    weight_decay: float = 0.01
    clip: float = 1.0
    plateau: bool = False
    patience: int = 10  # torch's meaning (reduce after patience + 1 bad steps)
    factor: float = 0.5
    record_every: int = 10
    probe: int = 500
    dtype: str = "float32"  # the forward pass; parameters and optimiser state stay float64
    teacher_seed: int = 0

    def __post_init__(self):
        object.__setattr__(self, "span_lengths", tuple(self.span_lengths))
        for f in ("vocab", "generated", "heads", "train", "val", "batch_size", "steps", "record_every", "probe"):
            check_int(f, getattr(self, f), minimum=1)
        check_int("batch_size", self.batch_size, maximum=self.train)
        check_choice("optimizer", self.optimizer, ("adamw", "sgd"))
        check_choice("dtype", self.dtype, ("float32", "float64"))
        check_positive("lr", self.lr)

    def task(self) -> HighOrderMarkovTask:
        b = sum(self.span_lengths)
        return HighOrderMarkovTask(T=b + self.generated - 1, d=self.vocab, span_lengths=self.span_lengths,
                                   m=self.m, seed=self.teacher_seed)

    def network(self) -> MultiHeadConfig:
        task = self.task()
        return MultiHeadConfig(T=task.T, d_in=task.d, heads=self.heads, positions="onehot", decoder="identity",
                               mask="causal", init="xavier", init_scale=1.0,
                               score_scale=1.0 / np.sqrt(task.d + task.T))

    def optimizer_config(self) -> OptimizerConfig:
        if self.optimizer == "sgd":
            return OptimizerConfig("sgd", self.lr, clip=self.clip,
                                   decay="plateau" if self.plateau else "constant",
                                   plateau_factor=self.factor, plateau_patience=self.patience + 1)
        return OptimizerConfig("adamw", self.lr, weight_decay=self.weight_decay, clip=self.clip,
                               decay="plateau" if self.plateau else "constant", plateau_factor=self.factor,
                               plateau_patience=self.patience + 1)

    def config(self) -> dict:
        return asdict(self)


def kl_rows(logp_teacher: jax.Array, logq: jax.Array, qm) -> jax.Array:
    """Mean over sequences and chain rows of KL(p || q); log-probabilities (B, T, V), qm (T,)."""
    kl = jnp.sum(jnp.exp(logp_teacher) * (logp_teacher - logq), axis=-1)
    w = jnp.asarray(qm, kl.dtype)
    return jnp.sum(kl * w) / (kl.shape[0] * jnp.sum(w))


def _observe(task, alpha, qm):
    """alpha: (B, H, T, T) -> span masses at the last query (H, K) and averaged over the chain rows (H, K)."""
    pats = np.stack(list(task.target_patterns.values()))  # (K, T, T)
    last = jnp.einsum("bhs,ks->hk", alpha[:, :, -1, :], jnp.asarray(pats[:, -1, :], alpha.dtype)) / alpha.shape[0]
    w = jnp.asarray(qm, alpha.dtype) / np.sum(qm)
    rows = jnp.einsum("bhts,kts,t->hk", alpha, jnp.asarray(pats, alpha.dtype), w) / alpha.shape[0]
    return last, rows


def train_minimal(cfg: TrainingConfig, seed: int) -> dict:
    """One run: data, init and minibatches from ``seed`` (the teacher from ``cfg.teacher_seed``).
    Returns {"step": (R,), "val_loss": (R,), "mass_last": (R, H, K), "mass_rows": (R, H, K), "kl": (R, K),
    "teacher_entropy": float (the floor of the validation loss), "failed_at": int (-1: healthy)}."""
    task = cfg.task()
    k_data, k_val, k_init, k_run = jax.random.split(jax.random.key(seed), 4)
    dt = jnp.float32 if cfg.dtype == "float32" else jnp.float64
    train = task.sample(k_data, cfg.train)
    val = task.sample(k_val, cfg.val)
    X, Y = train.X.astype(dt), train.Y.astype(dt)
    pX = val.X[: cfg.probe].astype(dt)
    pY = val.Y[: cfg.probe].astype(dt)
    qm = task.query_mask
    w = jnp.asarray(qm, dt)
    net = cfg.network().build(k_init)
    params, static = eqx.partition(net, eqx.is_inexact_array)
    predict = lambda p, x: jax.vmap(eqx.combine(p, static))(x)  # noqa: E731
    # teachers restricted to their k newest spans, on the probe: (K, B, T, V) log-probabilities
    teach = jnp.stack([jax.nn.log_softmax(task.teacher_logits(val.X[: cfg.probe], newest=k), axis=-1)
                       for k in range(1, task.K + 1)]).astype(dt)
    ent = float(-jnp.sum(jnp.exp(teach[-1]) * teach[-1], -1).mean(0)[qm].mean())

    def xent(F, Yb):
        return -jnp.sum(Yb * jax.nn.log_softmax(F, -1) * w[None, :, None]) / (Yb.shape[0] * jnp.sum(w))

    def loss_fn(p, key):
        idx = jax.random.choice(key, cfg.train, (cfg.batch_size,), replace=False)
        return xent(predict(p, X[idx])[0], Y[idx])

    def record(p):
        F, attn = predict(p, pX)
        logq = jax.nn.log_softmax(F, -1)
        last, rows = _observe(task, attn[:, 0], qm)
        kl = jnp.stack([kl_rows(teach[k], logq, qm) for k in range(task.K)])
        return {"val_loss": xent(F, pY), "mass_last": last, "mass_rows": rows, "kl": kl}

    plan = Plan.make(cfg.steps, cfg.record_every)
    opt = cfg.optimizer_config().build(cfg.steps)
    state, recs, _ = jax.jit(lambda p, k: run_loop(p, loss_fn, opt, plan, record, k))(params, k_run)
    out = {k: np.asarray(v, np.float64) for k, v in recs.items()}
    out["step"] = np.asarray(recs["step"], int)
    out["teacher_entropy"] = ent
    out["failed_at"] = int(state.failed_at)
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
