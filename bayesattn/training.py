"""Adam and Langevin training of the attention network (THEORY.md section 1), vectorised over seeds and P.

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
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, NamedTuple

import blackjax
import jax
import jax.numpy as jnp
import numpy as np
import optax

from ._batching import default_batch, map_batched
from ._validate import check_array, check_choice, check_int, check_positive
from .attention import ATTENTIONS, ORDER_PARAMETER, AttentionKind, attention_weights, order_parameters
from ._json import to_plain
from .posterior import Posterior, Prior
from .tasks import Dataset, Task

__all__ = [
    "TrainResult", "SweepResult", "train", "train_sweep", "training_objective", "emergence",
    "final_vs_P", "training_curves", "emergence_vs_P", "OPTIMIZERS", "INITS",
]

OptimizerKind = Literal["adam", "langevin"]
InitKind = Literal["small", "hot"]
OPTIMIZERS = ("adam", "langevin")
INITS = ("small", "hot")
DIVERGENCE_BOUND = 1e8  # |parameter| beyond this counts as a divergence, like a NaN


# ----------------------------------------------------------------------------------------------------------
# The objective
# ----------------------------------------------------------------------------------------------------------

def _sq_error(post: Posterior, L, V):
    """sum over query rows of |y - V z|^2 from the statistics: |Y|^2 - 2 tr(V C) + tr(V G V^T)."""
    G, C = post._gram(L)
    return post.yy - 2.0 * jnp.sum(V * C.T) + jnp.sum((V @ G) * V)


def _decay(prior: Prior, d: int, n, L, V):
    """The prior as weight decay, in the per-row normalisation of J."""
    s2 = prior.sigma2
    return 0.5 * s2 / n * (jnp.sum(L**2) / prior.sigma_A2 + d * jnp.sum(V**2) / prior.sigma_V2)


def _objective(post: Posterior, L, V):
    return 0.5 * _sq_error(post, L, V) / post.n + _decay(post.prior, post.d, post.n, L, V)


def _batch_sq_error(task: Task, attention: str, L, V, Xb, Yb):
    alpha = attention_weights(L, attention, task.key_mask)
    F = jnp.einsum("ts,bsi,ki->btk", alpha, Xb, V)
    qm = jnp.asarray(task.query_mask, F.dtype)[None, :, None]
    return jnp.sum(((Yb - F) * qm) ** 2)


def training_objective(L: jax.Array, V: jax.Array, posterior: Posterior) -> jax.Array:
    """The full-batch training objective J(L, V) (module docstring) for L: (T, T), V: (d_out, d).

    J = -(sigma2 / n) log p(L, V, D) + const, so ``training_objective`` and ``ba.joint_log_density`` have
    the same minimisers and gradients up to the factor -sigma2 / n.
    """
    if not isinstance(posterior, Posterior):
        raise ValueError(f"posterior={type(posterior).__name__}: expected a bayesattn Posterior")
    L = jnp.asarray(check_array("L", L, (posterior.T, posterior.T)), jnp.float64)
    V = jnp.asarray(check_array("V", V, (posterior.d_out, posterior.d)), jnp.float64)
    return _objective(posterior, L, V)


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
    init_scale: float


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
        L = cfg.init_scale * jnp.asarray(post.task.target_pattern)
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

def _thin_L(L: np.ndarray, max_records: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices and L matrices of at most max_records evenly spaced records (first and last kept)."""
    idx = np.unique(np.linspace(0, L.shape[0] - 1, min(max_records, L.shape[0])).round().astype(int))
    return idx, L[idx]


@dataclass
class TrainResult:
    """One training run.

    history: numpy arrays over the recorded steps: "step", "loss" (train squared error per output coordinate),
    "test_loss" (the same on fresh sequences), "objective" (J, with the decay), "m", "q", "u" and "L"
    (records, T, T). final_params: (L (T, T), V (d_out, d)). failure: None or a message naming seed, P, step.
    """

    history: dict
    final_order_parameters: dict
    final_params: tuple
    config: dict
    failure: str | None = None
    failed_at: int | None = None

    def emergence(self, key: str = "m") -> dict:
        return emergence(self.history, key=key)

    def to_dict(self, max_L_records: int = 11) -> dict:
        """JSON-serialisable summary; the L history is thinned to at most ``max_L_records`` records."""
        hist = {k: v for k, v in self.history.items() if k != "L"}
        idx, Ls = _thin_L(self.history["L"], max_L_records)
        hist["L_steps"] = self.history["step"][idx]
        hist["L"] = Ls
        key = "m"
        return to_plain({
            "config": self.config, "history": hist, "final_order_parameters": self.final_order_parameters,
            "final_L": self.final_params[0], "final_V": self.final_params[1],
            "emergence": self.emergence(key), "emergence_key": key,
            "failure": self.failure, "failed_at": self.failed_at,
        }, nonfinite="none")


@dataclass
class SweepResult:
    """A grid of runs: axis 0 over ``P_values``, axis 1 over ``seeds``.

    history: numpy arrays (nP, nS, records, ...) with the keys of :class:`TrainResult`; final_order_parameters:
    dict of (nP, nS) arrays; final_L: (nP, nS, T, T); final_V: (nP, nS, d_out, d); failures: list of dicts
    {"seed", "P", "step", "message"} of runs that hit a NaN / divergence and were frozen there.
    """

    P_values: np.ndarray
    seeds: np.ndarray
    history: dict
    final_order_parameters: dict
    final_L: np.ndarray
    final_V: np.ndarray
    failures: list = field(default_factory=list)
    config: dict = field(default_factory=dict)

    def run(self, i_P: int, i_seed: int) -> TrainResult:
        """The (P_values[i_P], seeds[i_seed]) run as a :class:`TrainResult`."""
        P, s = int(self.P_values[i_P]), int(self.seeds[i_seed])
        fail = [f for f in self.failures if f["P"] == P and f["seed"] == s]
        return TrainResult(
            history={k: v[i_P, i_seed] for k, v in self.history.items()},
            final_order_parameters={k: float(v[i_P, i_seed]) for k, v in self.final_order_parameters.items()},
            final_params=(self.final_L[i_P, i_seed], self.final_V[i_P, i_seed]),
            config={**self.config, "P": P, "seed": s},
            failure=fail[0]["message"] if fail else None, failed_at=fail[0]["step"] if fail else None,
        )

    def emergence(self, key: str = "m") -> dict:
        """Emergence step and sharpness of every run: dict of (nP, nS) arrays (NaN where none).

        The default is m for both attentions: for a trained (point-estimate) linear attention u is the cosine
        of a matrix that starts near zero, so it jumps to ~1 within the first steps whatever P is, while m
        rises with |L| (the copy weight actually learnt)."""
        out = {"step": np.full(self.final_L.shape[:2], np.nan), "sharpness": np.full(self.final_L.shape[:2], np.nan),
               "rise": np.zeros(self.final_L.shape[:2])}
        for i in range(len(self.P_values)):
            for j in range(len(self.seeds)):
                e = emergence({"step": self.history["step"][i, j], key: self.history[key][i, j]}, key=key)
                out["rise"][i, j] = e["rise"]
                if e["emerged"]:
                    out["step"][i, j], out["sharpness"][i, j] = e["step"], e["sharpness"]
        return out

    def to_dict(self, max_L_records: int = 0) -> dict:
        """JSON-serialisable; the L history is omitted unless ``max_L_records`` > 0 (then thinned)."""
        hist = {k: v for k, v in self.history.items() if k != "L"}
        if max_L_records > 0:
            idx, Ls = _thin_L(np.moveaxis(self.history["L"], 2, 0), max_L_records)
            hist["L_steps"] = self.history["step"][0, 0][idx]
            hist["L"] = np.moveaxis(Ls, 0, 2)
        return to_plain({
            "config": self.config, "P_values": self.P_values, "seeds": self.seeds, "history": hist,
            "final_order_parameters": self.final_order_parameters, "final_L": self.final_L,
            "emergence": self.emergence(), "failures": self.failures,
        }, nonfinite="none")


# ----------------------------------------------------------------------------------------------------------
# Public entry points
# ----------------------------------------------------------------------------------------------------------

def _default_lr(optimizer: str) -> float:
    # langevin: at T = 16, P = 1000 (canonical prior) lr = 3e-2 mixes 4x faster than 1e-2 and matches NUTS
    return 1e-2 if optimizer == "adam" else 3e-2


def _default_init_scale(init: str, attention: str, T: int) -> float:
    if init == "hot":  # a source logit that already copies: alpha_source ~ 0.9 (softmax), alpha = pattern (linear)
        return float(np.log(9.0 * (T - 1))) if attention == "softmax" else float(np.sqrt(T))
    return 1e-2


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
        init_kind = check_choice("init", init, INITS)
    else:
        init_kind = "array"
    scale = _default_init_scale(init_kind, attention, T) if init_scale is None else check_positive("init_scale", init_scale)
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

def _crossing(steps: np.ndarray, frac: np.ndarray, level: float) -> float:
    """First step where frac reaches level, linearly interpolated between records."""
    above = np.flatnonzero(frac >= level)
    if above.size == 0:
        return float("nan")
    i = int(above[0])
    if i == 0:
        return float(steps[0])
    f0, f1 = frac[i - 1], frac[i]
    return float(steps[i - 1] + (level - f0) / (f1 - f0) * (steps[i] - steps[i - 1]))


def emergence(history: dict, key: str = "m", min_rise: float = 0.05) -> dict:
    """When the order parameter ``key`` rises: step where it crosses half-way between its initial and final
    values, and the sharpness = steps from 10% to 90% of the rise (linear interpolation between records).

    Returns {"emerged", "step", "sharpness", "step_10", "step_90", "initial", "final", "rise"}; "emerged" is
    False (and the steps NaN) when |final - initial| < min_rise.
    """
    steps = np.asarray(history["step"], dtype=float)
    x = np.asarray(history[key], dtype=float)
    if steps.ndim != 1 or x.shape != steps.shape or steps.size < 2:
        raise ValueError(f"history: expected 1-D 'step' and '{key}' of equal length >= 2, got {steps.shape}, {x.shape}")
    x0, x1 = float(x[0]), float(x[-1])
    rise = x1 - x0
    out = {"initial": x0, "final": x1, "rise": rise, "emerged": bool(abs(rise) >= min_rise)}
    if not out["emerged"]:
        return {**out, "step": float("nan"), "sharpness": float("nan"), "step_10": float("nan"),
                "step_90": float("nan")}
    frac = (x - x0) / rise
    s10, s50, s90 = (_crossing(steps, frac, lv) for lv in (0.1, 0.5, 0.9))
    return {**out, "step": s50, "sharpness": s90 - s10, "step_10": s10, "step_90": s90}


def _phase_curve_dict(phase_curve) -> dict:
    if phase_curve is None:
        return {}
    if isinstance(phase_curve, dict):
        return phase_curve
    if hasattr(phase_curve, "to_dict"):
        return phase_curve.to_dict()
    return {"branches": getattr(phase_curve, "branches", None), "transition": getattr(phase_curve, "transition", None)}


def final_vs_P(sweep_small: SweepResult, sweep_hot: SweepResult | None = None, phase_curve=None, *,
               key: str | None = None, threshold: float | None = None, min_q: float | None = None) -> dict:
    """Final order parameter vs P for Adam from small (and hot) init, next to the theory's phase curve.

    key: "m" (softmax default) or "u" (linear default). threshold: the order parameter above which a run
    "has found the copy head" (default: 2/T for m, 0.5 for u). min_q: a run also needs q > min_q (default
    1e-4 for linear, 0 for softmax): a collapsed linear attention (L -> 0, the trivial minimum of J below
    its instability) has an arbitrary cosine u. phase_curve: a ``ba.theory.PhaseCurve`` or
    its dict (``branches``, ``transition`` {"order", "P_c", "spinodals"}) or None. The theory's reference
    points are reported as "binodal" (first order) or "P_c" (second order; ``P_c_exact`` if P_c is off the
    grid) and "spinodal_lower" / "spinodal_upper".

    Returns plain data: P, per-seed finals, mean / std / min / max across seeds, ``onset_small`` (smallest P at
    which every seed from small init is above threshold; ``onset_small_any``: at least one seed),
    ``onset_hot`` (smallest P at which every hot seed stays above threshold), the theory's P_c and spinodals,
    and, if the theory has them, which of binodal / spinodals the small-init onset is closest to (in log P).
    """
    attention = sweep_small.config.get("attention", "softmax")
    key = key or ORDER_PARAMETER[attention]
    T = sweep_small.config["task"]["T"]
    threshold = (2.0 / T if key == "m" else 0.5) if threshold is None else threshold
    min_q = (1e-4 if attention == "linear" else 0.0) if min_q is None else min_q

    def summary(sw):
        x = sw.final_order_parameters[key]
        above = (x > threshold) & (sw.final_order_parameters["q"] > min_q)
        P = sw.P_values
        all_idx = np.flatnonzero(above.all(axis=1))
        any_idx = np.flatnonzero(above.any(axis=1))
        return {"P": P, "final": x, "mean": x.mean(1), "std": x.std(1), "min": x.min(1), "max": x.max(1),
                "final_m": sw.final_order_parameters["m"], "final_q": sw.final_order_parameters["q"],
                "frac_above": above.mean(1),
                "onset_all": float(P[all_idx[0]]) if all_idx.size else None,
                "onset_any": float(P[any_idx[0]]) if any_idx.size else None,
                "failures": sw.failures}

    out = {"key": key, "threshold": threshold, "min_q": min_q, "attention": attention, "small": summary(sweep_small)}
    out["onset_small"] = out["small"]["onset_all"]
    out["onset_small_any"] = out["small"]["onset_any"]
    if sweep_hot is not None:
        out["hot"] = summary(sweep_hot)
        hot = (sweep_hot.final_order_parameters[key] > threshold) & (sweep_hot.final_order_parameters["q"] > min_q)
        # hot runs stay copying down to the lower stability edge: smallest P above which all hot seeds copy
        stays = np.flatnonzero(np.array([hot[i:].all() for i in range(hot.shape[0])]))
        out["onset_hot"] = float(sweep_hot.P_values[stays[0]]) if stays.size else None
    pc = _phase_curve_dict(phase_curve)
    out["theory"] = pc
    trans = pc.get("transition") or {}
    refs = {}
    Pc = trans.get("P_c") if trans.get("P_c") is not None else trans.get("P_c_exact")
    if Pc is not None:
        refs["binodal" if trans.get("order") == "first" else "P_c"] = float(Pc)
    spin = [s for s in (trans.get("spinodals") or []) if s is not None and np.isfinite(s)]
    for name, s in zip(("spinodal_lower", "spinodal_upper"), sorted(spin)):
        refs[name] = float(s)  # lower: the copy branch appears; upper: the uniform branch disappears
    out["theory_P"] = refs
    if refs and out["onset_small"] is not None:
        dist = {k: abs(np.log(out["onset_small"] / v)) for k, v in refs.items()}
        out["onset_small_closest"] = min(dist, key=dist.get)
        out["onset_small_log_distance"] = dist
    return out


def training_curves(task: Task, prior: Prior, attention: AttentionKind, P_values, key: jax.Array, *,
                    seeds=(0,), **train_kwargs) -> dict:
    """Training curves at a few P (e.g. below, near and above the transition): for each P and seed the
    history of step, loss, test_loss, objective, m, q, u and the emergence of m."""
    sw = train_sweep(task, prior, attention, P_values, seeds, key, **train_kwargs)
    em = sw.emergence()
    curves = {k: v for k, v in sw.history.items() if k != "L"}
    return {"P": sw.P_values, "seeds": sw.seeds, "curves": curves, "emergence_step": em["step"],
            "sharpness": em["sharpness"], "rise": em["rise"], "failures": sw.failures, "config": sw.config}


def emergence_vs_P(sweep: SweepResult, key: str = "m") -> dict:
    """Emergence step and sharpness against P: per-seed arrays (nP, nS) and the median over seeds that rose."""
    em = sweep.emergence(key)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: no seed rose at that P
        med_step = np.nanmedian(em["step"], axis=1)
        med_sharp = np.nanmedian(em["sharpness"], axis=1)
    return {"P": sweep.P_values, "step": em["step"], "sharpness": em["sharpness"], "rise": em["rise"],
            "median_step": med_step, "median_sharpness": med_sharp,
            "frac_emerged": np.mean(np.isfinite(em["step"]), axis=1)}
