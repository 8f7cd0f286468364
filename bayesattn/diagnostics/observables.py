"""Observables: functions of attention weights and of the task (docs/model.md section 3).

An observable maps attention weights alpha: (..., T, T) for one head, or (..., H, T, T) for H heads, to an
array of shape (...). The task and the attention model declare theirs (:func:`declared`); the samplers, the
training loop and the sweeps record whatever is declared. Nothing here knows a network or a sampler.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from .._fused import fused
from .._validate import check_real_dtype

Observable = Callable[[jax.Array], jax.Array]


NO_PATTERN = object()  # _check_rows' default: no pattern to check (None is a pattern given, and refused)


def _check_rows(alpha, query_mask: np.ndarray, pattern=NO_PATTERN) -> tuple[jax.Array, np.ndarray, np.ndarray | None]:
    """(alpha, mask, pattern): weights alpha: (..., T, T) as a real array, the (T,) bool ``query_mask``, checked (at
    least one query row), and ``pattern``, when given, as a (T, T) real array (None when not given). ValueError
    naming the argument otherwise (an integer mask would weight rows by its values; another T would broadcast;
    complex weights gave complex order parameters)."""
    alpha = jnp.asarray(check_real_dtype("alpha", alpha))
    T = alpha.shape[-1] if alpha.ndim else 0
    if alpha.ndim < 2 or alpha.shape[-2] != T:
        raise ValueError(f"alpha of shape {tuple(alpha.shape)}: expected (..., T, T) attention weights")
    mask = np.asarray(query_mask)
    if mask.dtype != bool or mask.shape != (T,) or not mask.any():
        raise ValueError(
            f"query_mask of shape {mask.shape} and dtype {mask.dtype}: expected a bool mask of shape ({T},) with at "
            "least one query row (task.query_mask)"
        )
    if pattern is NO_PATTERN:
        return alpha, mask, None
    pattern = np.asarray(pattern)
    if pattern.shape != (T, T) or pattern.dtype.kind not in "biuf":
        raise ValueError(
            f"target_pattern of shape {pattern.shape}: expected ({T}, {T}) real numbers, as alpha's last axes"
        )
    return alpha, mask, pattern


def _row_weights(alpha: jax.Array, mask) -> jax.Array:
    """The query rows' weights: 1 / rows on each query row of the checked (T,) bool ``mask``, 0 elsewhere."""
    return jnp.asarray(mask, alpha.dtype) / jnp.sum(mask)


def order_parameters(alpha: jax.Array, target_pattern: np.ndarray, query_mask: np.ndarray) -> dict:
    """Order parameters of attention weights alpha: (..., T, T), averaged over the query rows.

    m = <sum_s alpha_ts pattern_ts>_t (copy weight), q = <sum_s alpha_ts^2>_t (self-overlap),
    u = m^2 / q (squared cosine with the target pattern; 0 where q = 0). Each has shape alpha.shape[:-2]
    (docs/model.md section 3).

    Parameters
    ----------
    alpha : jax.Array
        (..., T, T) attention weights, any leading batch shape.
    target_pattern : numpy.ndarray
        (T, T) the pattern that solves the task (``task.target_pattern``).
    query_mask : numpy.ndarray
        (T,) bool: the rows averaged over (``task.query_mask``).

    Returns
    -------
    dict
        {"m", "q", "u"}, arrays of shape alpha.shape[:-2].

    Examples
    --------
    >>> import jax.numpy as jnp, bayesattn as ba
    >>> task = ba.CopyTask(T=4, d=2)
    >>> uniform = jnp.full((4, 4), 0.25)
    >>> op = ba.order_parameters(jnp.stack([uniform, jnp.asarray(task.target_pattern)]), task.target_pattern,
    ...                          task.query_mask)
    >>> {k: v.tolist() for k, v in op.items()}
    {'m': [0.25, 1.0], 'q': [0.25, 1.0], 'u': [0.25, 1.0]}
    """
    return _order_parameters(*_check_rows(alpha, query_mask, target_pattern))


@fused
def _order_parameters(alpha, mask, target_pattern) -> dict:
    w = _row_weights(alpha, mask)
    m = jnp.einsum("...ts,ts,t->...", alpha, jnp.asarray(target_pattern, alpha.dtype), w)
    q = jnp.einsum("...ts,...ts,t->...", alpha, alpha, w)
    safe_q = jnp.where(q > 0, q, 1.0)
    u = jnp.where(q > 0, m**2 / safe_q, jnp.where(jnp.isnan(q), q, 0.0))  # a NaN stays a NaN
    return {"m": m, "q": q, "u": u}


def pattern_mass(alpha: jax.Array, pattern: np.ndarray, query_mask: np.ndarray) -> jax.Array:
    """<sum_s alpha_ts pattern_ts>_t over the query rows: the attention mass on a (lag or span) pattern."""
    return _pattern_mass(*_check_rows(alpha, query_mask, pattern))


@fused
def _pattern_mass(alpha, mask, pattern) -> jax.Array:
    return jnp.einsum("...ts,ts,t->...", alpha, jnp.asarray(pattern, alpha.dtype), _row_weights(alpha, mask))


def attention_entropy(alpha: jax.Array, query_mask: np.ndarray) -> jax.Array:
    """Mean over query rows of -sum_s alpha_ts log alpha_ts (nats; rows of a softmax sum to 1)."""
    alpha, mask, _ = _check_rows(alpha, query_mask)
    return _attention_entropy(alpha, mask)


@fused
def _attention_entropy(alpha, mask) -> jax.Array:
    w = _row_weights(alpha, mask)
    safe = jnp.where(alpha > 0, alpha, 1.0)
    return -jnp.einsum("...ts,t->...", jnp.where(alpha > 0, alpha * jnp.log(safe), 0.0), w)


def head_overlap(alpha: jax.Array, query_mask: np.ndarray) -> jax.Array:
    """Mean over head pairs h < h' of the cosine between the heads' (query-row) attention maps. alpha:
    (..., H, T, T) with H >= 2 -> (...). 1: the heads attend alike; 0: disjoint."""
    a = alpha * jnp.asarray(query_mask, alpha.dtype)[:, None]
    flat = a.reshape(*a.shape[:-2], -1)
    norm = jnp.sqrt(jnp.sum(flat**2, axis=-1))
    unit = flat / jnp.where(norm > 0, norm, 1.0)[..., None]
    gram = jnp.einsum("...hi,...gi->...hg", unit, unit)
    H = alpha.shape[-3]
    iu = np.triu_indices(H, 1)
    return jnp.mean(gram[..., iu[0], iu[1]], axis=-1)


def pattern_capture(alpha: jax.Array, pattern: np.ndarray, query_mask: np.ndarray) -> jax.Array:
    """The fraction of a pattern that lies in the span of the H heads' (query-row) attention maps, p^T Pi p / |p|^2
    with Pi the projector onto span{alpha_h}: in [0, 1], 1 when some combination of the heads is the pattern.
    alpha: (..., H, T, T) -> (...). It is unchanged by any invertible mixing of the heads, the symmetry that linear
    attention's posterior has (an orthogonal mixing of the heads' logits, with the readout mixed alike, leaves the
    prior and the likelihood unchanged), so it is the label-free lag order parameter there; with one head it is
    u = cos^2(alpha, pattern)."""
    qm = jnp.asarray(query_mask, alpha.dtype)[:, None]
    A = (alpha * qm).reshape(*alpha.shape[:-2], -1)  # (..., H, D)
    p = (jnp.asarray(pattern, alpha.dtype) * qm).reshape(-1)
    Ap = A @ p  # (..., H)
    gram = jnp.einsum("...hi,...gi->...hg", A, A)
    return jnp.einsum("...h,...h->...", Ap, jnp.linalg.solve(gram, Ap[..., None])[..., 0]) / jnp.sum(p**2)


def declared(task, model) -> dict[str, Observable]:
    """The observables of ``task`` under the attention ``model`` (a :class:`bayesattn.models.AttentionModel`).

    One head, a task with one target pattern (the copy task): "m", "q", "u", and "entropy" for softmax.
    H heads, one pattern: per head "m_h0", ..., "u_h0", ...; and, independent of the head labels (the posterior
    is symmetric under permuting heads), "m" and "u" of the best head (largest m), "q" the mean over heads,
    "overlap" (:func:`head_overlap`) and "entropy" (softmax, mean over heads).
    Several named patterns p (one per lag or span): "mass:p" for one head; for H heads "mass_h0:p", ... and
    "mass_max:p" (the best head's mass on p), and for linear attention "capture:p" (:func:`pattern_capture`, the
    label-free lag order parameter under linear attention's rotation symmetry of the heads). Every function maps
    alpha: (..., *logit shape) to (...).
    """
    pats = task.target_patterns
    qm = task.query_mask
    H = model.heads
    kind = model.attention_kind
    out: dict[str, Observable] = {}
    if len(pats) == 1:
        pat = next(iter(pats.values()))
        if H == 1:
            for name in ("m", "q", "u"):
                out[name] = lambda a, name=name: order_parameters(a, pat, qm)[name]
        else:

            def best(a, name):
                op = order_parameters(a, pat, qm)
                i = jnp.argmax(op["m"], axis=-1)[..., None]
                return jnp.take_along_axis(op[name], i, axis=-1)[..., 0]

            out["m"] = lambda a: best(a, "m")
            out["q"] = lambda a: jnp.mean(order_parameters(a, pat, qm)["q"], axis=-1)
            out["u"] = lambda a: best(a, "u")
            for h in range(H):
                for name in ("m", "q", "u"):
                    out[f"{name}_h{h}"] = lambda a, h=h, name=name: order_parameters(a[..., h, :, :], pat, qm)[name]
    elif pats:
        for p, pat in pats.items():
            if H == 1:
                out[f"mass:{p}"] = lambda a, pat=pat: pattern_mass(a, pat, qm)
            else:
                out[f"mass_max:{p}"] = lambda a, pat=pat: jnp.max(pattern_mass(a, pat, qm), axis=-1)
                for h in range(H):
                    out[f"mass_h{h}:{p}"] = lambda a, h=h, pat=pat: pattern_mass(a[..., h, :, :], pat, qm)
                if kind.sign_symmetric:  # the heads' rotation symmetry: only the span of the heads is labelled
                    out[f"capture:{p}"] = lambda a, pat=pat: pattern_capture(a, pat, qm)
    if H > 1:
        out["overlap"] = lambda a: head_overlap(a, qm)
    if kind.normalised:  # rows are distributions over keys
        out["entropy"] = (
            (lambda a: attention_entropy(a, qm)) if H == 1 else (lambda a: jnp.mean(attention_entropy(a, qm), axis=-1))
        )
    return out


def evaluate(observables: dict[str, Observable], alpha: jax.Array) -> dict[str, jax.Array]:
    """{name: f(alpha)} for every declared observable."""
    return {name: f(alpha) for name, f in observables.items()}
