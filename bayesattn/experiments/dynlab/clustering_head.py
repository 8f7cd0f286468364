"""Clustering heads on sparse modular addition (Odonnat, Bouaziz, Cabannes, arXiv 2410.24050; docs/results/dynlab.md).

Data: x uniform in {0..p-1}^L (L = 12), y = (x_1 + ... + x_k) mod p (k = 5). Model (as the paper's code builds
it): token embedding (n_emb x 2, N(0, 1)) plus learned positional embedding (L x 2, N(0, 1)); RMSNorm without
gain (x / (rms(x) + 1e-5)); one learned query q, keys = the normalised inputs, values W_V (2 x 2), scores
q.k / sqrt(2), pooled output z; residual GELU MLP z + W2 gelu(W1 rms(z) + b1) + b2 (2 -> 32 -> 2, biases);
logits z' E^T tied to the token embedding E. Adam (lr 3e-3), batch 32, shuffled epochs, cross-entropy.

Many seeds train at once: the models are built with ``eqx.filter_vmap`` over keys and the whole epoch loop
(``lax.scan``) is vmapped over seeds. Every epoch records the train / test loss and accuracy, the attention
mass on the first k positions, the separation (between / within scatter) of the pooled embeddings z by class
and by the sum of the first k tokens, and of the MLP outputs by class, and the norms of the pre-normalisation
vectors (the pooled z, input of the second RMSNorm, near whose origin the paper locates the spikes' curvature).
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import optax

from ..._batching import seed_blocks
from ...diagnostics.dynamics import detect_spikes, first_nonfinite, lanczos_top_eig
from .config import ClusterConfig

EPS = 1e-5  # the RMSNorm epsilon of the paper's code (added to the rms)


# ------------------------------------------------------------------------------------------------- data
def modular_data(key, n: int, p: int, k: int, L: int) -> tuple[jax.Array, jax.Array]:
    """(X, y): X (n, L) uniform in {0..p-1}, y = sum of the first k tokens mod p."""
    if p < 2:
        raise ValueError(f"p={p}: expected p >= 2")
    if not 1 <= k <= L:
        raise ValueError(f"k={k}: expected 1 <= k <= sequence length {L}")
    X = jax.random.randint(key, (n, L), 0, p)
    return X, jnp.sum(X[:, :k], axis=1) % p


# ------------------------------------------------------------------------------------------------ model
def rms_norm(x):
    return x / (jnp.sqrt(jnp.mean(x**2, axis=-1, keepdims=True)) + EPS)


class ClusterNet(eqx.Module):
    tok: jax.Array  # (n_emb, d), also the output layer
    pos: jax.Array  # (L, d)
    query: jax.Array  # (d,)
    W_V: jax.Array  # (d, d)
    W1: jax.Array  # (ffn, d)
    b1: jax.Array
    W2: jax.Array  # (d, ffn)
    b2: jax.Array

    def __init__(self, key, n_emb: int, L: int, d: int, ffn: int):
        ks = jax.random.split(key, 8)
        u = lambda k, shape, fan: jax.random.uniform(k, shape, minval=-1.0, maxval=1.0) / np.sqrt(fan)
        self.tok = jax.random.normal(ks[0], (n_emb, d))  # torch nn.Embedding: N(0, 1)
        self.pos = jax.random.normal(ks[1], (L, d))
        self.query = u(ks[2], (d,), d)  # torch nn.Linear default bounds 1/sqrt(fan_in)
        self.W_V = u(ks[3], (d, d), d)
        self.W1, self.b1 = u(ks[4], (ffn, d), d), u(ks[5], (ffn,), d)
        self.W2, self.b2 = u(ks[6], (d, ffn), ffn), u(ks[7], (d,), ffn)

    def parts(self, x):
        """x: (L,) int -> dict of h (pre-norm inputs, (L, d)), attn (L,), z (pooled, pre-norm2, (d,)),
        out (after the MLP, (d,)), logits (n_emb,)."""
        h = self.tok[x] + self.pos
        n = rms_norm(h)
        attn = jax.nn.softmax(n @ self.query / np.sqrt(h.shape[-1]))
        z = attn @ (n @ self.W_V.T)
        out = z + self.W2 @ jax.nn.gelu(self.W1 @ rms_norm(z) + self.b1, approximate=False) + self.b2
        return {"h": h, "attn": attn, "z": z, "out": out, "logits": self.tok @ out}

    def __call__(self, x):
        return self.parts(x)["logits"]


def loss_fn(model: ClusterNet, X, y):
    logits = jax.vmap(model)(X)
    return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, y))


def class_separation(z, y, p: int):
    """tr(between-class scatter) / tr(within-class scatter) of embeddings z (n, d) with labels y."""
    onehot = jax.nn.one_hot(y, p)
    cnt = jnp.maximum(onehot.sum(0), 1.0)
    mu = (onehot.T @ z) / cnt[:, None]
    glob = z.mean(0)
    between = jnp.sum(cnt[:, None] * (mu - glob) ** 2)
    within = jnp.sum((z - mu[y]) ** 2)
    return between / jnp.maximum(within, 1e-300)


def epoch_metrics(model: ClusterNet, Xtr, ytr, Xte, yte, k: int, p: int) -> dict:
    parts = jax.vmap(model.parts)(Xtr)
    logits_te = jax.vmap(model)(Xte)
    ce = optax.softmax_cross_entropy_with_integer_labels
    znorm = jnp.linalg.norm(parts["z"], axis=-1)
    pre1 = jnp.linalg.norm(model.tok[:, None, :] + model.pos[None], axis=-1)  # every (token, position) input
    return {
        "loss": jnp.mean(ce(parts["logits"], ytr)),
        "acc": jnp.mean(jnp.argmax(parts["logits"], -1) == ytr),
        "test_loss": jnp.mean(ce(logits_te, yte)),
        "test_acc": jnp.mean(jnp.argmax(logits_te, -1) == yte),
        "mass_first_k": jnp.mean(jnp.sum(parts["attn"][:, :k], -1)),
        "separation": class_separation(parts["z"], ytr, p),
        # the clustering head: z clusters by the sum of the first k tokens (the count that the MLP maps to y)
        "separation_sum": class_separation(parts["z"], jnp.sum(Xtr[:, :k], 1), k * (p - 1) + 1),
        "separation_out": class_separation(parts["out"], ytr, p),
        "z_norm_min": jnp.min(znorm),
        "z_norm_q05": jnp.quantile(znorm, 0.05),
        "h_norm_min": jnp.min(pre1[:p]),
    }


# --------------------------------------------------------------------------------------------- training
@functools.lru_cache(maxsize=8)
def make_trainer(cfg: ClusterConfig):
    """(init, train_block): init(key) -> state of one seed; train_block(state, epochs) -> (state, records) runs
    ``epochs`` epochs of Adam (jit + vmap over the leading seed axis of ``state``). Records per epoch: the
    metrics of :func:`epoch_metrics` and the flat parameter vector "w". Built once per config, so that the blocks
    of one setting share one compilation."""
    opt = optax.adam(cfg.lr)
    nb = cfg.n_train // cfg.batch_size

    def init(key):
        k_data, k_test, k_model, k_shuf = jax.random.split(key, 4)
        Xtr, ytr = modular_data(k_data, cfg.n_train, cfg.p, cfg.k, cfg.seq_len)
        Xte, yte = modular_data(k_test, cfg.n_test, cfg.p, cfg.k, cfg.seq_len)
        model = ClusterNet(k_model, cfg.num_emb, cfg.seq_len, cfg.emb_dim, cfg.ffn_dim)
        return {
            "model": model,
            "opt": opt.init(eqx.filter(model, eqx.is_array)),
            "key": k_shuf,
            "data": (Xtr, ytr, Xte, yte),
        }

    def one_epoch(state, _):
        Xtr, ytr, Xte, yte = state["data"]
        key, sub = jax.random.split(state["key"])
        perm = jax.random.permutation(sub, cfg.n_train)[: nb * cfg.batch_size].reshape(nb, cfg.batch_size)

        def step(carry, idx):
            model, ost = carry
            g = jax.grad(loss_fn)(model, Xtr[idx], ytr[idx])
            upd, ost = opt.update(g, ost, model)
            return (eqx.apply_updates(model, upd), ost), None

        (model, ost), _ = jax.lax.scan(step, (state["model"], state["opt"]), perm)
        rec = epoch_metrics(model, Xtr, ytr, Xte, yte, cfg.k, cfg.p)
        rec["w"] = jax.flatten_util.ravel_pytree(model)[0]
        return {**state, "model": model, "opt": ost, "key": key}, rec

    @eqx.filter_jit
    def train_block(state, epochs: int):
        return jax.vmap(lambda s: jax.lax.scan(one_epoch, s, None, length=epochs))(state)

    return init, train_block


def init_states(cfg: ClusterConfig, seeds):
    init, _ = make_trainer(cfg)
    keys = jnp.stack([jax.random.key_data(jax.random.key(int(s))) for s in seeds])
    return eqx.filter_vmap(lambda kd: init(jax.random.wrap_key_data(kd)))(keys)


FINETUNE_STREAM = 1  # fold_in(key(seed), 1): the fine-tuning stage's data, test data and shuffles


def finetune_states(cfg: ClusterConfig, state, seeds):
    """The fine-tuning stage's start (the paper's finetune.py): each seed's trained model, a fresh Adam, and new
    training and test data of ``cfg.finetune_p`` classes drawn from fold_in(key(seed), FINETUNE_STREAM)."""
    ft = cfg.finetune_config()
    opt = optax.adam(ft.lr)

    def one(kd, model):
        k = jax.random.fold_in(jax.random.wrap_key_data(kd), FINETUNE_STREAM)
        k_data, k_test, k_shuf = jax.random.split(k, 3)
        Xtr, ytr = modular_data(k_data, ft.n_train, ft.p, ft.k, ft.seq_len)
        Xte, yte = modular_data(k_test, ft.n_test, ft.p, ft.k, ft.seq_len)
        return {
            "model": model,
            "opt": opt.init(eqx.filter(model, eqx.is_array)),
            "key": k_shuf,
            "data": (Xtr, ytr, Xte, yte),
        }

    keys = jnp.stack([jax.random.key_data(jax.random.key(int(s))) for s in seeds])
    return eqx.filter_vmap(one)(keys, state["model"])


def flat_loss(cfg: ClusterConfig, state_one):
    """(loss of a flat parameter vector on the training set of one seed, unravel)."""
    w0, unravel = jax.flatten_util.ravel_pytree(state_one["model"])
    Xtr, ytr = state_one["data"][0], state_one["data"][1]
    return (lambda w: loss_fn(unravel(w), Xtr, ytr)), unravel


def config_dict(cfg: ClusterConfig) -> dict:
    return cfg.model_dump()


# ----------------------------------------------------------------------------------------------- a point
@functools.lru_cache(maxsize=8)
def _tools(cfg: ClusterConfig, num_iter: int, n_seq: int):
    """Jitted (top eigenvalue of the training-loss Hessian at flat w, sandbox embeddings at flat w), compiled
    once per config and given each seed's data as arguments."""
    _, unravel = flat_loss(cfg, jax.tree_util.tree_map(lambda x: x[0], init_states(cfg, [0])))

    @jax.jit
    def top(w, X, y, key):
        return lanczos_top_eig(lambda v: loss_fn(unravel(v), X, y), w, key, num_iter)

    @jax.jit
    def emb(w, X):
        m = unravel(w)
        parts = jax.vmap(m.parts)(X[:n_seq])
        return m.tok, parts["z"], parts["out"], parts["attn"].mean(0)

    return top, emb


def _sandbox(emb, state_one, W: np.ndarray, frames: list[int], n_seq: int) -> dict:
    """Token embeddings and pooled / MLP-output sequence embeddings of ``n_seq`` test sequences at each frame."""
    Xte, yte = state_one["data"][2], state_one["data"][3][:n_seq]
    out = {"epochs": frames, "labels": np.asarray(yte).tolist(), "tok": [], "z": [], "out": [], "attn": []}
    for e in frames:
        t, z, o, a = emb(jnp.asarray(W[e]), Xte)
        for name, v in (("tok", t), ("z", z), ("out", o), ("attn", a)):
            out[name].append(np.asarray(v).tolist())
    return out


def _train_stage(cfg: ClusterConfig, state, seeds, block: int, progress: bool):
    """Train ``state`` (all seeds at once) for ``cfg.epochs`` epochs in compiled blocks of ``block``; (final state,
    records {name: (S, E, ...)})."""
    _, train_block = make_trainer(cfg)
    recs, bar = [], None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=cfg.epochs, desc=f"p={cfg.p} seeds {seeds[0]}..{seeds[-1]}", unit="ep", leave=False)
    done = 0
    while done < cfg.epochs:
        n = min(block, cfg.epochs - done)
        state, r = train_block(state, n)
        recs.append(jax.tree_util.tree_map(np.asarray, r))
        done += n
        if bar:
            bar.update(n)
    if bar:
        bar.close()
    return state, {k: np.concatenate([r[k] for r in recs], axis=1) for k in recs[0]}


def run_block(points: list[dict], progress: bool = False) -> list[dict]:
    """The seeds of ``points`` (one config, one aligned block of ``seeds_per_program`` seeds): the whole block
    trains at once (vmap), whichever of its seeds are asked for, so that a seed's result depends on its seed and
    config alone; then, per asked-for seed, spike detection, the largest Hessian eigenvalue near the spikes and,
    where the point asks for it (``sandbox``), the sandbox frames."""
    p0 = points[0]
    cfg = ClusterConfig.from_point(p0["config"])
    ((seeds, _),) = seed_blocks([p["seed"] for p in points], p0["seeds_per_program"])
    block = int(p0.get("block", 50))
    state, rec = _train_stage(cfg, init_states(cfg, seeds), seeds, block, progress)
    pretrain = None
    if cfg.finetune_p is not None:  # the run's curves, spikes and curvature are the fine-tuning stage's
        pretrain = {k: rec[k] for k in ("loss", "test_acc")}
        state, rec = _train_stage(cfg.finetune_config(), finetune_states(cfg, state, seeds), seeds, block, progress)
        cfg = cfg.finetune_config()
    W = rec.pop("w")
    curv_every = int(p0.get("curv_every", 50))
    key = jax.random.key(int(p0.get("curv_seed", 0)))
    n_seq = min(int(p0.get("sandbox_seqs", 256)), cfg.n_test)
    top, emb = _tools(cfg, int(p0.get("lanczos_iter", 20)), n_seq)
    frames = sorted(set(np.linspace(0, cfg.epochs - 1, int(p0.get("frames", 40))).astype(int).tolist()))
    out = []
    for p in points:
        s = p["seed"]
        i = seeds.index(s)
        st = jax.tree_util.tree_map(lambda x: x[i], state)
        loss = rec["loss"][i]
        div = first_nonfinite(loss)
        spikes = detect_spikes(loss) if div is None else detect_spikes(loss[:div])
        grid = list(range(0, cfg.epochs, curv_every)) + [cfg.epochs - 1]
        window = int(p0.get("curv_window", 2))
        near = sorted({e for t in spikes for e in range(t - window, t + 1) if 0 <= e < cfg.epochs})
        curv_epochs = sorted(set(grid) | set(near)) if div is None else []
        kk = jax.random.fold_in(key, s)
        curv = [
            float(top(jnp.asarray(W[i][e]), st["data"][0], st["data"][1], jax.random.fold_in(kk, e)))
            for e in curv_epochs
        ]
        lam = dict(zip(curv_epochs, curv))
        run = {
            "seed": s,
            "diverged_at": div,
            "curves": {k: [float(x) for x in v[i]] for k, v in rec.items()},
            "spikes": [
                {
                    "epoch": t,
                    "loss_before": float(loss[max(t - 1, 0)]),
                    "loss": float(loss[t]),
                    "z_norm_min": float(rec["z_norm_min"][i][t]),
                    "z_norm_min_before": float(rec["z_norm_min"][i][max(t - 1, 0)]),
                    "lambda_max_before": lam.get(t - 1),
                    "lambda_max": lam.get(t),
                }
                for t in spikes
            ],
            "curvature": {"epoch": curv_epochs, "lambda_max": curv},
            "final_test_acc": float(rec["test_acc"][i][-1]),
            "pretrain": None
            if pretrain is None
            else {"final_loss": float(pretrain["loss"][i][-1]), "final_test_acc": float(pretrain["test_acc"][i][-1])},
            "success": bool(div is None and rec["test_acc"][i][-1] > cfg.success_acc),
        }
        run["sandbox"] = _sandbox(emb, st, W[i], frames, n_seq) if p.get("sandbox") and div is None else None
        out.append(run)
    return out
