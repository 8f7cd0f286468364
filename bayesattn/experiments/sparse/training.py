"""Training on the sparse-pattern tasks (docs/results/sparse.md section 2): many seeds of a one-layer transformer or a
causal MLP-Mixer at once (``jax.vmap`` over stacked Equinox models), AdamW with a linear warmup (optax), fresh
batches every step, cross-entropy on the second half only, and the emergence metrics.

Metrics (all from the saved histories, so they can be recomputed):

- t*: the first step k (1-based optimizer step) at which the mean of the training accuracy of steps k-9..k
  exceeds 0.95 (:func:`t_star`); None when it never does. A seed is *solved* when t* exists. The accuracy is that
  of the last state: the second half of the map's sequence, the automaton's last state x_k (its first states
  cannot be predicted until the sequence has shown which table of the pool it follows; the loss counts them all).
- IoU: for every query row, the top-s keys of its attention (the first layer's, mean over heads, over a fixed
  probe batch; for the Mixer |M|) against the row's true support, |top & supp| / |top | supp|, averaged over rows
  (:func:`support_iou`).
- attention entropy: mean over heads and query rows of -sum alpha log alpha (Mixer: of |M| normalised per row).
- plateau: the median loss over the middle half of the steps before t* (unsolved: the last half of training),
  against ln 2 for the binary task.

Early stopping and the map A are per seed (:func:`train_seeds`, :func:`seed_tasks`), so a seed's result is a
function of its seed, the key and the config only.
"""

from __future__ import annotations

import functools
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..._validate import check_int
from ...models.transformer import CausalMixer, Transformer
from .config import SparseTrainConfig


# ------------------------------------------------------------------------------------------------- metrics
def t_star(acc, window: int = 10, threshold: float = 0.95) -> int | None:
    """First 1-based step k >= window with mean(acc[k-window:k]) > threshold (acc[i]: accuracy at step i+1)."""
    acc = np.asarray(acc, dtype=np.float64)
    if acc.size < window:
        return None
    trailing = np.convolve(acc, np.ones(window) / window, mode="valid")  # trailing[j]: steps j+1..j+window
    hit = np.flatnonzero(trailing > threshold)
    return int(hit[0] + window) if hit.size else None


def support_iou(weights, supports, rows) -> float:
    """Mean over ``rows`` of IoU(top-s keys of weights[t], support of t), s = |support of t|.
    weights: (T, T) non-negative scores; supports: (T, T) 0/1."""
    w, sup = np.asarray(weights), np.asarray(supports).astype(bool)
    out = []
    for t in rows:
        s = int(sup[t].sum())
        top = np.argsort(-w[t], kind="stable")[:s]
        inter = int(sup[t, top].sum())
        out.append(inter / (2 * s - inter))
    return float(np.mean(out))


def plateau_loss(loss, ts: int | None) -> float:
    """Median loss over steps (ts/4, 3ts/4] before emergence; unsolved: over the last half of training."""
    loss = np.asarray(loss)
    if ts is None:
        return float(np.median(loss[loss.size // 2 :]))
    lo, hi = ts // 4, max(3 * ts // 4, ts // 4 + 1)
    return float(np.median(loss[lo:hi]))


def _row_entropy(w, rows):
    p = w[..., rows, :]
    p = p / np.maximum(p.sum(-1, keepdims=True), 1e-300)
    return float(-np.mean(np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0), axis=-1)))


# ------------------------------------------------------------------------------------------------ training
def _init_models(cfg: SparseTrainConfig, keys):
    ncfg = cfg.network_config()
    cls = Transformer if cfg.model == "transformer" else CausalMixer
    dt = jnp.float32 if cfg.dtype == "float32" else jnp.float64
    models = eqx.filter_vmap(lambda k: cls(ncfg, k))(keys)
    return jax.tree.map(lambda x: x.astype(dt) if eqx.is_inexact_array(x) else x, models)


def optimizer(cfg: SparseTrainConfig) -> optax.GradientTransformation:
    """AdamW; the learning rate rises linearly from 0 over ``warmup`` steps, then stays at ``lr``."""
    sched = optax.warmup_constant_schedule(0.0, cfg.lr, max(cfg.warmup, 1))
    return optax.adamw(sched, weight_decay=cfg.weight_decay)


TASK_STREAM = (
    0x5EED  # seed i's per-seed task: fold_in(fold_in(key, i), TASK_STREAM) (init / data: split of fold_in(key, i))
)


def seed_tasks(cfg: SparseTrainConfig, key: jax.Array, seeds) -> tuple[np.ndarray, np.ndarray]:
    """(arrays, row_supports) per seed: the map A ((n, S, S), linear map) or the pool of rule tables ((n, n_rules,
    4, 4, 4), automaton), and each seed's (T, T) row supports. ``cfg.A == "per_seed"``: seed i's from
    fold_in(fold_in(key, i), TASK_STREAM); "fixed": the task's own (``task_seed``) for every seed."""
    task = cfg.make_task()
    out = []
    for i in seeds:
        if cfg.A == "fixed":
            out.append(task.support if cfg.task == "linear_map" else task.rule_tables)
            continue
        k = jax.random.fold_in(jax.random.fold_in(key, i), TASK_STREAM)
        if cfg.task == "linear_map":
            from ...tasks.sparse import sparse_support

            out.append(sparse_support(k, cfg.S, cfg.s))
        else:
            out.append(task.draw_rule_tables(k))
    arrays = np.stack(out).astype(np.int32)
    if cfg.task == "linear_map":
        sup = np.zeros((len(out), task.T, task.T), dtype=np.int64)
        sup[:, task.query_rows, : cfg.S] = arrays
    else:  # the neighbourhood does not depend on the tables
        sup = np.broadcast_to(task.row_supports, (len(out), task.T, task.T)).copy()
    return arrays, sup


def _programs(cfg: SparseTrainConfig):
    """(chunk, probe): jitted functions of one seed's (params, opt_state) and its task array (map A or pool of
    rule tables), to be vmapped or looped."""
    from ...tasks.sparse import ca_tokens, linear_map_tokens

    task = cfg.make_task()
    rows = jnp.asarray(task.query_rows)
    opt = optimizer(cfg)
    B = cfg.batch
    # the query rows of one predicted state: the map's x1 (every query row), one of the automaton's x_1 .. x_k (its
    # 16 cells). The accuracy (and so t*) is the last state's: a trajectory's earlier states cannot all be predicted
    # before its table is inferred
    state_rows = task.cells if cfg.task == "cellular_automaton" else len(task.query_rows)

    def sample(key, arr, n):
        if cfg.task == "linear_map":
            return linear_map_tokens(key, n, arr)
        return ca_tokens(key, n, arr, task.cells, task.k)

    def row_loss(logits, tokens):
        """(negative log-likelihood, hit) of every query row's next token: (B, rows) each."""
        logp = jax.nn.log_softmax(logits[:, rows].astype(jnp.float32), axis=-1)
        tgt = tokens[:, rows + 1]
        return -jnp.take_along_axis(logp, tgt[..., None], axis=-1)[..., 0], jnp.argmax(logp, -1) == tgt

    def loss_acc(params, static, tokens):
        net = eqx.combine(params, static)
        logits, _ = jax.vmap(net)(tokens)  # (B, T, vocab)
        nll, hit = row_loss(logits, tokens)
        return jnp.mean(nll), jnp.mean(hit[:, -state_rows:])

    def step(static, arr, carry, key):
        params, state = carry
        tokens = sample(key, arr, B)
        (loss, acc), g = jax.value_and_grad(loss_acc, has_aux=True)(params, static, tokens)
        upd, state = opt.update(g, state, params)
        return (optax.apply_updates(params, upd), state), (loss, acc)

    def chunk(static, params, state, keys, arr):
        (params, state), (loss, acc) = jax.lax.scan(lambda c, k: step(static, arr, c, k), (params, state), keys)
        return params, state, loss, acc

    def probe(static, params, key, arr, n):
        """The first layer's attention (H, T, T), mean over n probe sequences, and their loss per predicted state
        (states,): the automaton's x_1 .. x_k (the fall from the first to the last is what the sequence teaches
        about its table), the map's x1."""
        net = eqx.combine(params, static)
        tokens = sample(key, arr, n)
        logits, attn = jax.vmap(net)(tokens)  # (P, T, vocab), (P, layers, H, T, T)
        w = jnp.abs(attn[:, 0]) if cfg.model == "mixer" else attn[:, 0]
        nll, _ = row_loss(logits, tokens)
        return jnp.mean(w, axis=0), jnp.mean(nll.reshape(n, -1, state_rows), axis=(0, 2))

    return chunk, probe, opt


@functools.lru_cache(maxsize=32)
def _jitted(cfg: SparseTrainConfig):
    """Compiled per-seed and vmapped (over seeds) chunk and probe functions, cached per config so that
    repeated calls (benchmark warm-ups, points of a sweep with the same shapes) reuse the compilation."""
    chunk, probe, _ = _programs(cfg)
    return (
        eqx.filter_jit(chunk),
        eqx.filter_jit(probe),
        eqx.filter_jit(eqx.filter_vmap(chunk, in_axes=(None, 0, 0, 0, 0))),
        eqx.filter_jit(eqx.filter_vmap(probe, in_axes=(None, 0, None, 0, None))),
    )


def train_seeds(
    cfg: SparseTrainConfig,
    seeds,
    key: jax.Array | None = None,
    *,
    vmap: bool = True,
    progress=None,
    record_attention: bool = True,
) -> dict:
    """Train one model per seed (seed i: init key fold_in(key, i) split into init / data keys; its map A from
    :func:`seed_tasks`). ``vmap``: all seeds in one vmapped program (default; on the idle 2-core CPU 1.3x faster
    per seed-step than looping, but 2.6x slower when the machine was overloaded: ``benchmarks/bench_sparse.py``);
    False: the same per-seed program, one seed after another. ``progress``: a tqdm-like bar updated by steps, or
    None.

    Early stop per seed: seed i stops at the first record step >= t*_i + ``stop_after_solved`` ("stop_step");
    the program runs until every seed has stopped or ``steps`` are done, and each seed's t*, final attention and
    records are those of its own stop step, so they do not depend on the other seeds of the program.

    Returns per seed: "loss", "acc" (per step, the whole program's steps: cut them at "stop_step"), "t_star",
    "plateau", "stop_step", records every ``record_every`` steps ("record_step", "iou", "entropy"), the
    attention at the seed's stop step ("attention", (T, T) head mean; "attention_heads") and the probe's loss per
    predicted state there ("state_loss": the automaton's x_1 .. x_k, the map's x1), "row_supports",
    "steps_run" (the program's)."""
    seeds = [check_int("seed", s, minimum=0) for s in seeds]
    key = jax.random.key(0) if key is None else key
    task = cfg.make_task()
    rows = task.query_rows
    arrays, sups = seed_tasks(cfg, key, seeds)
    arrays_j = jnp.asarray(arrays)
    ks = jnp.stack([jax.random.split(jax.random.fold_in(key, s)) for s in seeds])  # (n, 2)
    models = _init_models(cfg, ks[:, 0])
    params, static = eqx.partition(models, eqx.is_array)
    opt = optimizer(cfg)
    state = eqx.filter_vmap(opt.init)(params)
    probe_key = jax.random.fold_in(key, 2**31 - 1)  # the same probe inputs x0 for every seed, its own map

    # steps, records and probe size do not change the programs: one compilation serves them all
    chunk1, probe1, chunk_v, probe_v = _jitted(cfg.replace(steps=10, record_every=1, probe=1, stop_after_solved=0))
    if vmap:

        def chunk_fn(p, s, k):
            return chunk_v(static, p, s, k, arrays_j)

        def probe_fn(p):
            return probe_v(static, p, probe_key, arrays_j, cfg.probe)
    else:
        take = lambda tree, i: jax.tree.map(lambda x: x[i], tree)  # noqa: E731
        stack = lambda trees: jax.tree.map(lambda *xs: jnp.stack(xs), *trees)  # noqa: E731

        def chunk_fn(p, s, k):
            outs = [chunk1(static, take(p, i), take(s, i), k[i], arrays_j[i]) for i in range(len(seeds))]
            return tuple(stack([o[j] for o in outs]) for j in range(4))

        def probe_fn(p):
            outs = [probe1(static, take(p, i), probe_key, arrays_j[i], cfg.probe) for i in range(len(seeds))]
            return tuple(stack([o[j] for o in outs]) for j in range(2))

    n, R = len(seeds), cfg.record_every
    loss, acc, rec_step, iou, ent = [], [], [], [], []
    attn = state_loss = None
    stop: list[int | None] = [None] * n
    snap: list = [None] * n  # each seed's (attention (H, T, T), loss per state) at its stop step
    done, t0 = 0, time.perf_counter()
    while done < cfg.steps and not all(x is not None for x in stop):
        m = min(R, cfg.steps - done)
        keys = jax.vmap(lambda k: jax.random.split(jax.random.fold_in(k, done), m))(ks[:, 1])
        params, state, l, a = chunk_fn(params, state, keys)
        loss.append(np.asarray(l, np.float64))
        acc.append(np.asarray(a, np.float64))
        done += m
        if record_attention:
            attn, state_loss = (np.asarray(a, np.float64) for a in probe_fn(params))  # (n, H, T, T), (n, states)
            mean = attn.mean(axis=1)
            rec_step.append(done)
            iou.append([support_iou(mean[i], sups[i], rows) for i in range(n)])
            ent.append([_row_entropy(attn[i], rows) for i in range(n)])
        if progress is not None:
            progress.update(m)
        acc_all = np.concatenate(acc, axis=1)
        for i in range(n):
            if stop[i] is None and cfg.stop_after_solved:
                ts = t_star(acc_all[i])
                if ts is not None and done >= ts + cfg.stop_after_solved:
                    stop[i] = done
                    snap[i] = None if attn is None else (attn[i], state_loss[i])
    loss_all, acc_all = np.concatenate(loss, axis=1), np.concatenate(acc, axis=1)
    stop_step = [done if x is None else x for x in stop]
    ts = [t_star(acc_all[i, : stop_step[i]]) for i in range(n)]
    out = {
        "seeds": seeds,
        "steps_run": done,
        "stop_step": stop_step,
        "wall_s": time.perf_counter() - t0,
        "loss": loss_all,
        "acc": acc_all,
        "t_star": ts,
        "plateau": [plateau_loss(loss_all[i, : stop_step[i]], ts[i]) for i in range(n)],
        "row_supports": sups,
        "task_arrays": arrays,
    }
    if record_attention:
        heads = np.stack([attn[i] if snap[i] is None else snap[i][0] for i in range(n)])
        out.update(
            state_loss=np.stack([state_loss[i] if snap[i] is None else snap[i][1] for i in range(n)]),
            record_step=np.asarray(rec_step),
            iou=np.asarray(iou).T,
            entropy=np.asarray(ent).T,
            attention=heads.mean(axis=1),
            attention_heads=heads,
        )
    return out
