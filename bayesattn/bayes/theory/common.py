"""Input checks, P-scaling and the reduced action shared by both attentions (docs/model.md section 4)."""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from ..._validate import brief, check_bool, check_positive, check_real_dtype, is_traced
from ...models.attention import AttentionModel, AttentionName, attention_kind
from ...tasks import CopyTask
from ..posterior import Prior

Attention = AttentionName  # the attention kinds' names, as the theory's functions take them

# ----------------------------------------------------------------------------------------------------
# input checks
# ----------------------------------------------------------------------------------------------------

COVERED = (
    "the reduced theory covers CopyTask with tokens='gaussian' (softmax with boundary='cyclic'; linear with "
    "boundary='cyclic' or 'causal') and tokens='onehot' with boundary='cyclic' (softmax and linear) in "
    "phase_curve, phase_diagram and loss_curve, and softmax with boundary='causal' (tokens 'gaussian' or "
    "'onehot') in phase_curve, phase_diagram and loss_curve; one head (H heads on the single lags of a "
    "MultiLagCopyTask, Gaussian tokens, cyclic: theory.heads_curve)"
)


class Coverage(NamedTuple):
    """What the reduced theory of one attention kind derives beyond the cyclic boundary.

    causal_as_cyclic: Gaussian tokens with the causal boundary need nothing new (linear: the cosine's law depends
    on the mask only through the number of free logits); causal_by_row_types: the causal boundary, Gaussian or
    one-hot tokens, is covered by per-key-count row tables when the caller handles them (softmax,
    docs/theory.md section 10)."""

    causal_as_cyclic: bool
    causal_by_row_types: bool


COVERAGE = {"softmax": Coverage(False, True), "linear": Coverage(True, False)}


def covered(task, attention, *, onehot: bool = False, causal: bool = False) -> str:
    """Raise ValueError unless the reduced theory is derived for this task and attention (a kind's name, an
    AttentionKind or an AttentionModel); return the attention kind's name. ``onehot``: the caller handles one-hot
    tokens (softmax: docs/theory.md section 8); ``causal``: the caller handles softmax with the causal mask
    (section 10)."""
    onehot, causal = check_bool("onehot", onehot), check_bool("causal", causal)
    if isinstance(attention, AttentionModel):
        if attention.heads != 1 or attention.mask != "task":
            raise ValueError(f"attention={attention!r}: not covered; {COVERED}")
        attention = attention.kind
    attention = attention_kind(attention).name
    cover = COVERAGE[attention]
    if not isinstance(task, CopyTask):
        raise ValueError(f"task={brief(task)}: not covered; {COVERED}")
    if task.tokens == "onehot":
        if task.d < 2:
            raise ValueError(f"task.d={task.d}: one-hot tokens need d >= 2 (a single token leaves nothing to copy)")
        if not (onehot and (task.boundary == "cyclic" or (causal and cover.causal_by_row_types))):
            raise ValueError(
                f"task.tokens='onehot' with attention={attention!r}, boundary={task.boundary!r}: not "
                f"covered here; {COVERED}"
            )
    elif task.tokens != "gaussian":
        raise ValueError(f"task.tokens={task.tokens!r}: not covered (G and C are not isotropic); {COVERED}")
    if not cover.causal_as_cyclic and task.boundary != "cyclic" and not (causal and task.boundary == "causal"):
        raise ValueError(f"task.boundary={task.boundary!r} with attention={attention!r}: not covered here; {COVERED}")
    return attention


def covers(task, attention, *, onehot: bool = False, causal: bool = False) -> bool:
    """Whether :func:`covered` accepts this task and attention (with the same flags, checked: not a reason for False)."""
    onehot, causal = check_bool("onehot", onehot), check_bool("causal", causal)
    try:
        covered(task, attention, onehot=onehot, causal=causal)
    except ValueError:
        return False
    return True


def check_prior(prior):
    """``prior`` if it is a :class:`~bayesattn.Prior`; ValueError otherwise."""
    if not isinstance(prior, Prior):
        raise ValueError(f"prior={prior!r}: expected a bayesattn Prior")
    return prior


def first_crossing(P, y, level: float) -> float | None:
    """The P where y (over increasing P) first reaches ``level``, interpolated linearly in log P between the two
    grid points around it; P[0] if y starts at or above it; None if it never reaches it."""
    P, y = np.asarray(P, float), np.asarray(y, float)
    above = np.flatnonzero(y >= level)
    if above.size == 0:
        return None
    i = int(above[0])
    if i == 0:
        return float(P[0])
    x0, x1 = np.log(P[i - 1]), np.log(P[i])
    return float(np.exp(x0 + (level - y[i - 1]) * (x1 - x0) / (y[i] - y[i - 1])))


def check_grid(name: str, values, *, integer: bool = False) -> np.ndarray:
    """A non-empty, strictly increasing, positive, finite 1-D grid of numbers (a bool or a text is refused, not read
    as 1 or parsed)."""
    bad = [v for v in np.ravel(np.asarray(values, dtype=object)) if isinstance(v, (bool, np.bool_, str, bytes))]
    if bad:
        raise ValueError(f"{name} item={bad[0]!r}: expected a positive number (not a bool or a text)")
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name}={values!r}: expected a 1-D sequence of positive numbers") from None
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name}={values!r}: expected a non-empty 1-D sequence of positive numbers")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{name}={values!r}: expected finite positive values")
    if np.any(np.diff(arr) <= 0):
        raise ValueError(f"{name}={values!r}: expected strictly increasing values (sorted, no repeats)")
    if integer and np.any(arr != np.round(arr)):
        raise ValueError(f"{name}={values!r}: expected integers")
    return arr


MAX_BETA = 1e11  # far beyond, the numerics break down (m = 17 at beta = 2.5e17); the means were checked to 2.5e11


def scales(task, prior, P):
    """beta = P d / (2 sigma2) and eps = lam / n as arrays over P; T_q = number of query rows.

    One-hot tokens (docs/theory.md section 8): the d - 1 directions orthogonal to the all-ones vector carry
    tokens of variance 1/d, so beta = P (d - 1) / (2 sigma2 d) and eps = d lam / n."""
    Tq = int(np.sum(task.query_mask))
    P = np.asarray(P, dtype=np.float64)
    if getattr(task, "tokens", "gaussian") == "onehot":
        d = task.d
        beta, eps = P * (d - 1) / (2.0 * prior.sigma2 * d), d * prior.lam(d) / (P * Tq)
    else:
        beta, eps = P * task.d_out / (2.0 * prior.sigma2), prior.lam(task.d) / (P * Tq)
    if np.any(beta > MAX_BETA):
        raise ValueError(
            f"P={brief(P.tolist())} with sigma2={prior.sigma2:g}: beta = P d / (2 sigma2) reaches {np.max(beta):.3g}; "
            f"expected beta <= {MAX_BETA:g}, where the theory's numerics hold (a smaller P or a larger sigma2)"
        )
    return beta, eps, Tq


def occam_d(task) -> float:
    """The d with d^2 = the Occam term's weight: d_out x d (Gaussian tokens); d (d - 1) for one-hot tokens
    (d outputs, d - 1 centred feature directions; the all-ones direction does not depend on L)."""
    if getattr(task, "tokens", "gaussian") == "onehot":
        return float(np.sqrt(task.d * (task.d - 1)))
    return task.d_out


# ----------------------------------------------------------------------------------------------------
# the reduced action (energy part) -- shared by both attentions
# ----------------------------------------------------------------------------------------------------


def action(m, q, entropy, *, beta, eps, d: int, T_q: int, noise_fit_coef=0.0):
    """The reduced per-row action Phi(m, q) = E(m, q) / T_q + entropy (vectorised in JAX, broadcasting).

    m, q: order parameters; entropy: the entropy term at (m, q) (the rate function I(m, q) for softmax,
    -(1/T_q) log of the prior density of the order parameters for linear); beta = P d / (2 sigma2);
    eps = lam / n; d: output dimension; T_q: query rows; noise_fit_coef = d^2 / (2 sigma2 T_q) switches on
    the O(d^2/sigma^2) noise-fit term. The log density of (m, q) is -T_q * Phi.
    """
    for name, value in (("beta", beta), ("eps", eps), ("d", d), ("T_q", T_q)):
        if not is_traced(value) and np.ndim(value) == 0:  # the scales as numbers; arrays of them are the caller's
            check_positive(name, value)
    m, q = jnp.asarray(check_real_dtype("m", m)), jnp.asarray(check_real_dtype("q", q))
    entropy = check_real_dtype("entropy", entropy)
    if not is_traced(q) and np.any(np.asarray(q) < 0):  # a self-overlap: log1p(q / eps) is NaN below -eps
        raise ValueError(f"q={brief(np.asarray(q))}: expected q >= 0 (a mean of squares)")
    be = beta - noise_fit_coef
    return be * (1.0 - m**2 / (q + eps)) + d**2 / (2.0 * T_q) * jnp.log1p(q / eps) + entropy


def energy_grads(m, q, beta, eps, d, Tq, nf):
    """Gradient (dE/dm, dE/dq) of the per-row energy part of :func:`action` (broadcasting), with the noise-fit
    coefficient ``nf`` subtracted from beta."""
    be = beta - nf
    dm = -2.0 * be * m / (q + eps)
    dq = be * m**2 / (q + eps) ** 2 + d**2 / (2.0 * Tq) / (q + eps)
    return dm, dq


def prediction_error(m, q, eps):
    """The test error of an attention matrix with order parameters (m, q), as the fraction of the target's variance
    that the readout's posterior mean leaves unexplained, per query row and output coordinate, to leading order in
    n (docs/theory.md section 9): 1 - m^2 (q + 2 eps) / (q + eps)^2. The training error is the same at this order
    (their O(d/n) difference is the generalisation gap of a d x d least-squares readout). For one-hot tokens it
    is the fraction of the centred target's variance, with eps the one-hot eps' of ``scales``."""
    return 1.0 - m**2 * (q + 2.0 * eps) / (q + eps) ** 2
