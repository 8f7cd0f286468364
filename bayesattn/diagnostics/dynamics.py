"""Diagnostics of training dynamics (docs/results/dynlab.md): effective rank, loss-spike and entropy-stage detectors,
Hessian-vector products and the largest Hessian eigenvalue by Lanczos.

The detectors work on recorded curves (numpy arrays over training time) and return plain Python lists, so
that they run on saved results. The curvature functions take any scalar loss of a flat parameter vector.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np


# ---------------------------------------------------------------------------------------------- rank
def effective_rank(M) -> jax.Array:
    """exp of the Shannon entropy of the normalised singular values of M (Roy and Vetterli): 1 for a rank-one
    matrix, min(M.shape) for one with equal singular values. M: (..., m, n) -> (...)."""
    s = jnp.linalg.svd(jnp.asarray(M), compute_uv=False)
    p = s / jnp.maximum(jnp.sum(s, axis=-1, keepdims=True), 1e-300)
    return jnp.exp(-jnp.sum(jnp.where(p > 0, p * jnp.log(jnp.where(p > 0, p, 1.0)), 0.0), axis=-1))


# --------------------------------------------------------------------------------------------- spikes
def detect_spikes(loss, *, window: int = 10, rel: float = 1.0, abs_tol: float = 0.02, gap: int = 5) -> list[int]:
    """Indices t where ``loss`` spikes: loss[t] exceeds the minimum of the preceding ``window`` values by more
    than ``rel`` times that minimum plus ``abs_tol``, and is the largest value within ``gap`` of t (one index
    per spike). Non-finite values are ignored (a diverging run is reported separately)."""
    x = np.asarray(loss, dtype=float)
    out: list[int] = []
    for t in range(1, len(x)):
        if not np.isfinite(x[t]):
            continue
        prev = x[max(0, t - window) : t]
        prev = prev[np.isfinite(prev)]
        if prev.size == 0:
            continue
        base = prev.min()
        if x[t] - base <= rel * abs(base) + abs_tol:
            continue
        lo, hi = max(0, t - gap), min(len(x), t + gap + 1)
        seg = np.where(np.isfinite(x[lo:hi]), x[lo:hi], -np.inf)
        if int(np.argmax(seg)) + lo != t:
            continue
        if out and t - out[-1] <= gap:
            continue
        out.append(t)
    return out


def first_nonfinite(x) -> int | None:
    """Index of the first non-finite entry of ``x`` (None if all are finite): the step where a run diverged."""
    bad = ~np.isfinite(np.asarray(x, dtype=float))
    return int(np.argmax(bad)) if bad.any() else None


# --------------------------------------------------------------------------------------------- stages
def _smooth(x: np.ndarray, w: int) -> np.ndarray:
    if w <= 1:
        return x
    k = np.ones(w) / w
    pad = np.pad(x, (w // 2, w - 1 - w // 2), mode="edge")
    return np.convolve(pad, k, mode="valid")


def entropy_phases(entropy, *, min_drop: float = 0.05, smooth: int = 1, flat: float = 0.02) -> list[dict]:
    """Monotone phases of an attention-entropy curve: alternating "focus" (entropy falls) and "dilution"
    (entropy rises) intervals whose total change is at least ``min_drop`` (nats); smaller wiggles are merged.
    A phase starts where the curve first leaves its starting level and ends where it first reaches its final
    level (by more / less than ``flat`` times the change), so flat shoulders are not counted. Returns [{"stage", "start", "end", "change"}] (indices into the curve, end inclusive)."""
    x = _smooth(np.asarray(entropy, dtype=float), smooth)
    n = len(x)
    if n < 2:
        return []
    # turning points with hysteresis min_drop (zig-zag filter)
    lo = hi = 0  # running argmin / argmax before the first trend
    piv: list[int] = []
    trend, ext = 0, 0  # +1 rising, -1 falling; ext: running extreme since the last pivot
    for t in range(1, n):
        if trend == 0:
            lo = t if x[t] < x[lo] else lo
            hi = t if x[t] > x[hi] else hi
            if x[t] - x[lo] >= min_drop:
                piv, trend, ext = [lo], 1, t
            elif x[hi] - x[t] >= min_drop:
                piv, trend, ext = [hi], -1, t
        elif trend == 1:
            if x[t] > x[ext]:
                ext = t
            elif x[ext] - x[t] >= min_drop:
                piv.append(ext)
                trend, ext = -1, t
        else:
            if x[t] < x[ext]:
                ext = t
            elif x[t] - x[ext] >= min_drop:
                piv.append(ext)
                trend, ext = 1, t
    if trend != 0:
        piv.append(ext)
    phases = []
    for a, b in zip(piv[:-1], piv[1:]):
        ch = float(x[b] - x[a])
        if abs(ch) >= min_drop:
            # trim flat shoulders: the phase runs from the last time the curve is still at its starting level to
            # the first time it reaches its final level (within a fraction ``flat`` of the change)
            seg = x[a : b + 1]
            tol = flat * abs(ch)
            near_a = np.nonzero(np.abs(seg - x[a]) > tol)[0]
            start = a + int(near_a[0]) - 1 if near_a.size else a
            near_b = np.nonzero(np.abs(seg - x[b]) <= tol)[0]
            end = a + int(near_b[0]) if near_b.size else b
            phases.append(
                {"stage": "focus" if ch < 0 else "dilution", "start": int(max(start, a)), "end": int(end), "change": ch}
            )
    return phases


def detect_stages(entropy, rank, *, rank_one: float = 1.3, min_drop: float = 0.05, smooth: int = 1) -> dict:
    """Stages of focus-dilution cycles from an attention-entropy curve and the effective rank of the embedding.

    - "condensation": the first interval (before any entropy phase) where ``rank`` is below ``rank_one``
      while the entropy has not yet moved by ``min_drop``;
    - "focus" / "dilution": :func:`entropy_phases`;
    - "restart": a focus phase that follows a dilution phase (a new cycle).
    A cycle is a focus phase followed by a dilution phase. Returns {"phases", "condensation": [start, end] or
    None, "restarts": [index], "cycles": int, "cycle_starts": [index]}."""
    ent = np.asarray(entropy, dtype=float)
    rk = np.asarray(rank, dtype=float)
    phases = entropy_phases(ent, min_drop=min_drop, smooth=smooth)
    first = phases[0]["start"] if phases else len(ent) - 1
    low = np.nonzero(rk[: first + 1] < rank_one)[0]
    cond = [int(low[0]), int(first)] if low.size else None
    restarts = [
        p["start"] for q, p in zip(phases[:-1], phases[1:]) if q["stage"] == "dilution" and p["stage"] == "focus"
    ]
    cycle_starts = [
        p["start"] for p, q in zip(phases[:-1], phases[1:]) if p["stage"] == "focus" and q["stage"] == "dilution"
    ]
    return {
        "phases": phases,
        "condensation": cond,
        "restarts": restarts,
        "cycles": len(cycle_starts),
        "cycle_starts": cycle_starts,
    }


# ------------------------------------------------------------------------------------------ curvature
def hvp(loss: Callable[[jax.Array], jax.Array], w: jax.Array, v: jax.Array) -> jax.Array:
    """Hessian-vector product H(w) v of a scalar ``loss`` of a flat vector, forward-over-reverse
    (jax.jvp of jax.grad)."""
    return jax.jvp(jax.grad(loss), (w,), (v,))[1]


def lanczos_top_eig(loss: Callable[[jax.Array], jax.Array], w: jax.Array, key, num_iter: int = 20) -> jax.Array:
    """Largest (algebraic) eigenvalue of the Hessian of ``loss`` at ``w`` by ``num_iter`` steps of Lanczos with
    full reorthogonalisation, from Hessian-vector products only. Jittable; exact once num_iter >= w.size."""
    n = w.shape[0]
    m = min(int(num_iter), n)
    v0 = jax.random.normal(key, (n,), w.dtype)
    v0 = v0 / jnp.linalg.norm(v0)
    Q = jnp.zeros((m + 1, n), w.dtype).at[0].set(v0)

    def body(j, carry):
        Q, alpha, beta = carry
        z = hvp(loss, w, Q[j])
        a = jnp.dot(Q[j], z)
        mask = (jnp.arange(m + 1) <= j)[:, None]
        Qm = jnp.where(mask, Q, 0.0)
        z = z - Qm.T @ (Qm @ z)
        z = z - Qm.T @ (Qm @ z)  # twice is enough
        b = jnp.linalg.norm(z)
        q = jnp.where(b > 1e-12, z / jnp.where(b > 1e-12, b, 1.0), 0.0)
        return Q.at[j + 1].set(q), alpha.at[j].set(a), beta.at[j].set(b)

    _, alpha, beta = jax.lax.fori_loop(0, m, body, (Q, jnp.zeros(m, w.dtype), jnp.zeros(m, w.dtype)))
    Tm = jnp.diag(alpha) + jnp.diag(beta[:-1], 1) + jnp.diag(beta[:-1], -1)
    return jnp.linalg.eigvalsh(Tm)[-1]
