"""Focus-dilution cycles of a one-layer transformer on Markov data (Chen, Lin, Xu, Luo, arXiv 2605.01199;
docs/results/dynlab.md).

Data: first-order Markov chains over V tokens with transition matrix P = lambda I + (1 - lambda) 1 pi^T
(stay with probability lambda, else draw from pi; pi is the stationary law), started from pi.
Model: one layer, one head, no LayerNorm, no positional encoding, no residual stream: token embedding
E (V x d), causal softmax attention with W_Q, W_K (d x d) and scale 1/sqrt(d), value W_V (d x d), output
projection W_O (d x V); logits_t = W_O^T W_V sum_{s<=t} a_ts E[x_s]; next-token cross-entropy. Small
Gaussian initialisation (std ``init_scale``). Full-batch gradient descent with a small step (a stand-in for
gradient flow), or Adam as a contrast; seeds vmapped.

Recorded every ``record_every`` steps: loss; attention entropy over positions, overall and for queries whose
token is the most frequent one vs the rest; attention mass on each token value and its entropy
("value_entropy", the stage detector's default signal); Frobenius norms and effective ranks of E,
W_O and W_Q W_K^T; the embedding E itself (for PCA paths).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..._batching import seed_blocks
from ..._validate import check_between, check_int
from ...diagnostics.dynamics import detect_stages, effective_rank, first_nonfinite
from ...files import checksum
from ...training.checkpoints import RunClock, save_loop_state
from .config import FDConfig, geometric_pi  # noqa: F401 (geometric_pi: part of this module's interface)


# ------------------------------------------------------------------------------------------------- data
def check_markov(pi, lam: float) -> np.ndarray:
    """pi as a float array; ValueError unless pi is a probability vector (>= 0, sums to 1) with >= 2 entries
    and 0 <= lambda < 1."""
    pi = np.asarray(pi, dtype=float)
    if pi.ndim != 1 or pi.size < 2:
        raise ValueError(f"pi={pi.tolist()}: expected a vector of at least 2 probabilities")
    if np.any(~np.isfinite(pi)) or np.any(pi < 0):
        raise ValueError(f"pi={pi.tolist()}: expected non-negative entries (a stationary law)")
    if abs(pi.sum() - 1.0) > 1e-6:
        raise ValueError(f"pi={pi.tolist()}: entries sum to {pi.sum():.6g}, expected 1")
    check_between("lam", lam, 0, 1, closed="low")
    return pi


def transition_matrix(pi, lam: float) -> np.ndarray:
    """P = lambda I + (1 - lambda) 1 pi^T (rows: current token, columns: next token)."""
    pi = check_markov(pi, lam)
    return lam * np.eye(pi.size) + (1.0 - lam) * np.outer(np.ones(pi.size), pi)


def markov_sequences(key, pi, lam: float, n: int, T: int) -> jax.Array:
    """(n, T) int sequences of the chain, x_0 ~ pi."""
    pi = check_markov(pi, lam)
    check_int("n", n, minimum=1)
    check_int("T", T, minimum=2)
    logp = jnp.log(jnp.asarray(pi))
    k0, k1, k2 = jax.random.split(key, 3)
    x0 = jax.random.categorical(k0, logp, shape=(n,))
    stay = jax.random.bernoulli(k1, lam, (T - 1, n))
    fresh = jax.random.categorical(k2, logp, shape=(T - 1, n))

    def step(x, sf):
        s, f = sf
        nxt = jnp.where(s, x, f)
        return nxt, nxt

    _, rest = jax.lax.scan(step, x0, (stay, fresh))
    return jnp.concatenate([x0[None], rest], axis=0).T


# ------------------------------------------------------------------------------------------------ model
def init_params(key, V: int, d: int, scale: float) -> dict:
    ks = jax.random.split(key, 5)
    shapes = {"E": (V, d), "W_Q": (d, d), "W_K": (d, d), "W_V": (d, d), "W_O": (d, V)}
    return {n: scale * jax.random.normal(k, s) for k, (n, s) in zip(ks, shapes.items())}


def forward(params: dict, X):
    """X: (n, T) -> (logits (n, T, V), attention (n, T, T), causal)."""
    h = params["E"][X]
    d = h.shape[-1]
    q, k = h @ params["W_Q"], h @ params["W_K"]  # (n, T, d) each: queries E W_Q, keys E W_K
    s = q @ jnp.swapaxes(k, -1, -2) / np.sqrt(d)
    T = X.shape[1]
    causal = np.tril(np.ones((T, T), bool))
    a = jax.nn.softmax(jnp.where(causal, s, -jnp.inf), axis=-1)
    o = (a @ h) @ params["W_V"].T
    return o @ params["W_O"], a


def loss_fn(params, X):
    logits, _ = forward(params, X)
    return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits[:, :-1], X[:, 1:]))


def observe(params, X, V: int) -> dict:
    """Diagnostics at one step (queries t >= 1: row 0 attends to itself only)."""
    logits, a = forward(params, X)
    loss = jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits[:, :-1], X[:, 1:]))
    ent = -jnp.sum(jnp.where(a > 0, a * jnp.log(jnp.where(a > 0, a, 1.0)), 0.0), axis=-1)[:, 1:]  # (n, T-1)
    q = X[:, 1:]
    freq = (q == 0).astype(ent.dtype)
    onehot = jax.nn.one_hot(X, V)  # (n, T, V)
    mass = jnp.einsum("nts,nsv->v", a[:, 1:], onehot) / (X.shape[0] * (X.shape[1] - 1))
    QK = params["W_Q"] @ params["W_K"].T
    value_entropy = -jnp.sum(jnp.where(mass > 0, mass * jnp.log(jnp.where(mass > 0, mass, 1.0)), 0.0))
    return {
        "loss": loss,
        "entropy": ent.mean(),
        "value_entropy": value_entropy,
        "entropy_frequent": jnp.sum(ent * freq) / jnp.maximum(freq.sum(), 1.0),
        "entropy_rare": jnp.sum(ent * (1 - freq)) / jnp.maximum((1 - freq).sum(), 1.0),
        "mass": mass,
        "norm_E": jnp.linalg.norm(params["E"]),
        "norm_W_O": jnp.linalg.norm(params["W_O"]),
        "norm_QK": jnp.linalg.norm(QK),
        "norm_W_V": jnp.linalg.norm(params["W_V"]),
        "rank_E": effective_rank(params["E"]),
        "rank_W_O": effective_rank(params["W_O"]),
        "rank_QK": effective_rank(QK),
        "E": params["E"],
    }


# --------------------------------------------------------------------------------------------- config
@functools.lru_cache(maxsize=16)
def _programs(cfg_json: str):
    """(init, first, run_block) of one config, built once so that repeated calls reuse the compiled programs."""
    cfg = FDConfig.load(json.loads(cfg_json))
    opt = optax.sgd(cfg.lr) if cfg.optimizer == "gd" else optax.adam(cfg.lr)
    V = cfg.V

    def init(key):
        kd, km = jax.random.split(key)
        X = markov_sequences(kd, cfg.pi, cfg.lam, cfg.n, cfg.T)
        params = init_params(km, V, cfg.d, cfg.init_scale)
        return {"params": params, "opt": opt.init(params), "X": X}

    def one_record(state, _):
        def step(st, _):
            g = jax.grad(loss_fn)(st["params"], st["X"])
            upd, ost = opt.update(g, st["opt"], st["params"])
            return {**st, "params": optax.apply_updates(st["params"], upd), "opt": ost}, None

        state, _ = jax.lax.scan(step, state, None, length=cfg.record_every)
        return state, observe(state["params"], state["X"], V)

    @eqx.filter_jit
    def run_block(state, length: int):
        return jax.vmap(lambda s: jax.lax.scan(one_record, s, None, length=length))(state)

    @jax.jit
    def start(keys):
        state = jax.vmap(lambda kd: init(jax.random.wrap_key_data(kd)))(keys)
        return state, jax.vmap(lambda s: observe(s["params"], s["X"], V))(state)

    return start, run_block


def train(cfg: FDConfig, seeds, progress: bool = False, block: int = 20, resume: Path | None = None) -> dict:
    """Train ``len(seeds)`` seeds at once (vmap). Returns numpy records (S, R, ...) and the record steps.

    ``resume``: a file that holds the run's state and records after its last finished block of ``block`` records
    (saved after every block but the last, removed when the run ends); a run killed in between goes on from there
    and returns what it returns uninterrupted. ``wall_s``: the seconds spent on the run over all the processes that
    ran it (carried in the saved state), None when it went on from a state saved without that time."""
    clock = RunClock()
    start, run_block = _programs(json.dumps(cfg.model_dump(), sort_keys=True))
    V = cfg.V
    keys = jnp.stack([jax.random.key_data(jax.random.key(int(s))) for s in seeds])
    state, first = start(keys)
    recs = [jax.tree_util.tree_map(lambda x: np.asarray(x)[:, None], first)]
    n_rec = cfg.steps // cfg.record_every
    done = 0
    fingerprint = json.dumps(
        {"config": cfg.model_dump(), "seeds": [int(s) for s in seeds], "block": block}, default=str
    )
    if resume is not None:
        got = clock.load(resume, state, fingerprint)
        if got is not None:
            state, saved = got
            recs = [dict(saved)]
            done = recs[0]["loss"].shape[1] - 1  # records after the initial one

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=n_rec * cfg.record_every, desc=f"V={V} {cfg.optimizer}", unit="step", leave=False)
        bar.update(done * cfg.record_every)
    while done < n_rec:
        n = min(block, n_rec - done)
        state, r = run_block(state, n)
        recs.append(jax.tree_util.tree_map(np.asarray, r))
        done += n
        if bar:
            bar.update(n * cfg.record_every)
        if resume is not None and done < n_rec:
            recs = [{k: np.concatenate([r[k] for r in recs], axis=1) for k in recs[0]}]
            save_loop_state(
                resume, state, recs[0], fingerprint, meta=clock.meta(steps=cfg.steps), step=done * cfg.record_every
            )
    if bar:
        bar.close()
    if resume is not None:
        resume.unlink(missing_ok=True)
    out = {k: np.concatenate([r[k] for r in recs], axis=1) for k in recs[0]}
    out["step"] = np.arange(out["loss"].shape[1]) * cfg.record_every
    out["wall_s"] = clock.seconds()
    return out


def pca_paths(E: np.ndarray, k: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """E: (R, V, d) embeddings over training -> (R, V, k) coordinates on the top-k principal axes of all rows
    (centred over every step and token), and the explained variance ratios."""
    flat = E.reshape(-1, E.shape[-1])
    mu = flat.mean(0)
    _, s, vt = np.linalg.svd(flat - mu, full_matrices=False)
    return (E - mu) @ vt[:k].T, (s[:k] ** 2 / max(np.sum(s**2), 1e-300))


def run_block(points: list[dict], progress: bool = False, artifacts=None) -> list[dict]:
    """The seeds of ``points`` (one config, one aligned block of ``seeds_per_program`` seeds, trained at once
    whichever of them are asked for); per asked-for seed its curves, stages and PCA path. ``artifacts``: a folder
    where the block keeps its state while it trains (``focus-<checksum>.npz``), so that a killed run goes on from
    its last save. ``train_wall_s``: each seed's share of its block's training time (the block's seconds over all
    the processes that ran it, divided by its number of seeds); None when a resumed block's earlier time is not
    known (a state saved without it)."""
    cfg = FDConfig.load(points[0]["config"], source="point")
    ((block, _),) = seed_blocks([p["seed"] for p in points], points[0]["seeds_per_program"])
    resume = None
    if artifacts is not None:
        resume = Path(artifacts) / f"focus-{checksum({'config': points[0]['config'], 'seeds': block})[:12]}.npz"
    rec = train(cfg, block, progress=progress, resume=resume)
    E = rec.pop("E")
    step = rec.pop("step")
    wall = rec.pop("wall_s")
    runs = []
    for s in [p["seed"] for p in points]:
        i = block.index(s)
        div = first_nonfinite(rec["loss"][i])
        end = len(step) if div is None else div
        stages = detect_stages(
            rec[cfg.stage_signal][i][:end], rec["rank_E"][i][:end], rank_one=cfg.rank_one, min_drop=cfg.min_drop
        )
        coords, evr = pca_paths(np.asarray(E[i][:end]))
        runs.append(
            {
                "step": step.tolist(),
                "pi": cfg.pi,
                "V": cfg.V,
                "seed": s,
                "diverged_at_step": None if div is None else int(step[div]),
                "curves": {k: np.asarray(v[i]).tolist() for k, v in rec.items()},
                "stages": stages,
                "cycles": stages["cycles"],
                "stage_steps": {
                    "phases": [
                        {**p, "start": int(step[p["start"]]), "end": int(step[p["end"]])} for p in stages["phases"]
                    ],
                    "condensation": None
                    if stages["condensation"] is None
                    else [int(step[j]) for j in stages["condensation"]],
                    "restarts": [int(step[j]) for j in stages["restarts"]],
                },
                "pca": {"coords": coords.tolist(), "explained": evr.tolist()},
                "train_wall_s": None if wall is None else wall / len(block),
            }
        )
    return runs


def config_dict(cfg: FDConfig) -> dict:
    return cfg.model_dump()
