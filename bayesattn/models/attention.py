"""Attention maps a(L), the attention kinds and the attention model that the posterior and the samplers see
(docs/model.md section 1).

L is the matrix of positional logits: (T, T) for one head, (H, T, T) for H heads. Both maps accept any leading
batch shape: L: (..., T, T).

An attention *kind* (:class:`AttentionKind`, registered in :data:`ATTENTION_KINDS`) is the map together with
what follows from it (its order parameter, whether its rows are normalised, its symmetries) and its plot
choices; code that needs per-kind behaviour asks the kind instead of comparing names. Public functions accept
a kind's name ("softmax", "linear") or the kind itself (:func:`attention_kind`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from .._fused import fused
from .._validate import check_choice, check_int, check_real_dtype

AttentionName = Literal["softmax", "linear"]
MASKS = ("task", "causal", "full")


def _logits_and_mask(L, key_mask) -> tuple[jax.Array, np.ndarray]:
    """L as a real array of shape (..., T, T) and key_mask as a bool array whose last two axes are (T, T);
    ValueError naming the one that is not (a mask of one axis, or of another T, would broadcast into wrong weights;
    complex logits would give complex weights)."""
    L = check_real_dtype("L", L)  # an array as it is; a list or a number as a NumPy array
    mask = key_mask if hasattr(key_mask, "shape") and hasattr(key_mask, "dtype") else np.asarray(key_mask)
    if L.ndim < 2 or L.shape[-1] != L.shape[-2]:
        raise ValueError(f"L of shape {tuple(L.shape)}: expected (..., T, T) logits")
    if mask.dtype != bool or mask.ndim < 2 or tuple(mask.shape[-2:]) != tuple(L.shape[-2:]):
        raise ValueError(
            f"key_mask of shape {tuple(mask.shape)} and dtype {mask.dtype}: expected a bool mask of shape "
            f"{tuple(L.shape[-2:])}, as the logits' last two axes"
        )
    return L, mask


def softmax_attention(L: jax.Array, key_mask: np.ndarray) -> jax.Array:
    """Row softmax over the allowed keys. L: (..., T, T) -> alpha: (..., T, T), zero where masked.

    Parameters
    ----------
    L : jax.Array
        (..., T, T) logits, any leading batch shape.
    key_mask : numpy.ndarray
        (T, T) bool: key_mask[t, s] is True when query t may attend to key s.

    Returns
    -------
    jax.Array
        alpha: (..., T, T); every row with an allowed key sums to 1.

    Examples
    --------
    >>> import numpy as np, jax.numpy as jnp, bayesattn as ba
    >>> alpha = ba.softmax_attention(jnp.zeros((3, 3)), np.tril(np.ones((3, 3), bool)))
    >>> np.round(np.asarray(alpha), 2).tolist()
    [[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.33, 0.33, 0.33]]
    """
    return _softmax_rows(*_logits_and_mask(L, key_mask))


@fused
def _softmax_rows(L, key_mask):
    logits = jnp.where(key_mask, L, -jnp.inf)
    return jax.nn.softmax(logits, axis=-1, where=key_mask) * key_mask


def linear_attention(L: jax.Array, key_mask: np.ndarray) -> jax.Array:
    """Unnormalised linear attention alpha = L / sqrt(T) on the allowed keys. L: (..., T, T).

    Parameters
    ----------
    L : jax.Array
        (..., T, T) logits, any leading batch shape.
    key_mask : numpy.ndarray
        (T, T) bool: the keys each query may attend to; alpha is zero elsewhere.

    Returns
    -------
    jax.Array
        alpha: (..., T, T).

    Examples
    --------
    >>> import numpy as np, jax.numpy as jnp, bayesattn as ba
    >>> alpha = ba.linear_attention(jnp.ones((4, 4)), np.eye(4, dtype=bool))
    >>> np.asarray(alpha)[0].tolist()
    [0.5, 0.0, 0.0, 0.0]
    """
    return _linear_rows(*_logits_and_mask(L, key_mask))


@fused
def _linear_rows(L, key_mask):
    return jnp.where(key_mask, L, 0.0) / jnp.sqrt(L.shape[-1])


@dataclass(frozen=True)
class AttentionKind:
    """One attention map and what follows from it (a registry entry of :data:`ATTENTION_KINDS`).

    name: "softmax" | "linear" (what configs and results record); attention_map: ``(L, key_mask) -> alpha``,
    L: (..., T, T); order_parameter: the observable that characterises its transition (docs/model.md section 3),
    "m" (the copy weight) for softmax, "u" (the squared cosine with the pattern) for linear; normalised: every row
    of alpha sums to 1 (softmax), so the weights are a distribution over keys (an entropy exists, uniform rows
    are the cold start); sign_symmetric: the posterior is symmetric under L -> -L (linear: the readout absorbs the
    sign), and more generally under orthogonal mixings of the heads' logits (the readout mixed alike), so its
    order parameters are defined up to that symmetry. Plot choices, plain data: label (display name), color (a
    matplotlib colour name), marker (a matplotlib marker), cmap (the colour map of its attention maps: sequential
    for weights in [0, 1], diverging for signed ones).

    >>> k = attention_kind("linear")
    >>> k.order_parameter, k.normalised, k.sign_symmetric
    ('u', False, True)
    >>> float(k.weights(jnp.ones((4, 4)), np.ones((4, 4), bool))[0, 0])
    0.5
    """

    name: str
    attention_map: Callable[[jax.Array, np.ndarray], jax.Array]
    order_parameter: str
    normalised: bool
    sign_symmetric: bool
    label: str
    color: str
    marker: str
    cmap: str

    def weights(self, L: jax.Array, key_mask: np.ndarray) -> jax.Array:
        """alpha = a(L): L: (..., T, T) -> (..., T, T), zero where ``key_mask`` (T, T) is False."""
        return self.attention_map(L, key_mask)

    def copy_threshold(self, T: int) -> float:
        """The value of the order parameter above which a draw counts as a copy head: 3 / T for normalised rows
        (m, three times the uniform row's 1 / T), 0.5 for unnormalised ones (u, half the way to the pattern)."""
        return 3.0 / T if self.normalised else 0.5

    def __repr__(self):
        return f"AttentionKind({self.name!r})"


SOFTMAX = AttentionKind("softmax", softmax_attention, "m", True, False, "softmax", "tab:blue", "o", "viridis")
LINEAR = AttentionKind("linear", linear_attention, "u", False, True, "linear", "tab:orange", "s", "RdBu_r")
ATTENTION_KINDS = {k.name: k for k in (SOFTMAX, LINEAR)}
ATTENTIONS = tuple(ATTENTION_KINDS)
# the order parameter that characterises each attention's transition (docs/model.md section 3)
ORDER_PARAMETER = {name: k.order_parameter for name, k in ATTENTION_KINDS.items()}


def attention_kind(attention: str | AttentionKind) -> AttentionKind:
    """The :class:`AttentionKind` of a name in :data:`ATTENTIONS` or of a kind (returned as it is); ValueError
    naming ``attention`` otherwise."""
    if isinstance(attention, AttentionKind):
        return attention
    return ATTENTION_KINDS[check_choice("attention", attention, ATTENTIONS)]


def attention_weights(L: jax.Array, attention: AttentionName | AttentionKind, key_mask: np.ndarray) -> jax.Array:
    """alpha = a(L) for ``attention`` in {"softmax", "linear"} (or an :class:`AttentionKind`). L: (..., T, T).

    Parameters
    ----------
    L : jax.Array
        (..., T, T) logits.
    attention : {"softmax", "linear"} or AttentionKind
        The attention map (:func:`softmax_attention` or :func:`linear_attention`).
    key_mask : numpy.ndarray
        (T, T) bool: the keys each query may attend to.

    Returns
    -------
    jax.Array
        alpha: (..., T, T), zero where ``key_mask`` is False.

    Raises
    ------
    ValueError
        If ``attention`` is neither a kind's name nor an AttentionKind.

    Examples
    --------
    >>> import numpy as np, jax.numpy as jnp, bayesattn as ba
    >>> L = jnp.zeros((2, 4, 4))  # a batch of two
    >>> alpha = ba.attention_weights(L, "softmax", np.ones((4, 4), bool))
    >>> alpha.shape, float(alpha[0, 0, 0])
    ((2, 4, 4), 0.25)
    """
    return attention_kind(attention).weights(L, key_mask)


@dataclass(frozen=True)
class AttentionModel:
    """The attention layer whose logits the posterior is over: its map, its number of heads and its mask.

    The logits have shape :meth:`logit_shape`: (T, T) for one head, so that one head keeps today's arrays, and
    (H, T, T) for H > 1.

    Parameters
    ----------
    kind : {"softmax", "linear"} or AttentionKind, default "softmax"
        The attention map; an :class:`AttentionKind` is accepted and stored by its name (the kind object is
        :attr:`attention_kind`).
    heads : int, default 1
        H >= 1; the readout acts on the concatenated head outputs, dimension H d.
    mask : {"task", "causal", "full"}, default "task"
        "task" (the task's key mask), "causal" (the task's mask and s <= t) or "full" (every key; only where
        the task allows it).

    Attributes
    ----------
    attention_kind : AttentionKind
        The kind of :attr:`kind`: its map, order parameter and symmetries.

    Raises
    ------
    ValueError
        If kind is not a known attention, heads is not an integer >= 1, or mask is not one of the choices.

    Examples
    --------
    >>> import numpy as np, jax.numpy as jnp
    >>> m = AttentionModel("softmax", heads=2)
    >>> m.logit_shape(4)
    (2, 4, 4)
    >>> int(AttentionModel(mask="causal").key_mask(np.ones((3, 3), bool)).sum())
    6
    >>> m.weights(jnp.zeros((2, 4, 4)), np.ones((4, 4), bool)).shape
    (2, 4, 4)
    """

    kind: AttentionName = "softmax"
    heads: int = 1
    mask: Literal["task", "causal", "full"] = "task"

    def __post_init__(self):
        object.__setattr__(self, "kind", attention_kind(self.kind).name)
        object.__setattr__(self, "heads", check_int("heads", self.heads, minimum=1))
        check_choice("mask", self.mask, MASKS)

    @property
    def attention_kind(self) -> AttentionKind:
        """The :class:`AttentionKind` of :attr:`kind`."""
        return ATTENTION_KINDS[self.kind]

    @classmethod
    def coerce(cls, attention, heads: int | None = None) -> AttentionModel:
        """An AttentionModel from a kind (a name or an :class:`AttentionKind`, with ``heads``, default 1) or a
        model (``heads`` must agree)."""
        if isinstance(attention, cls):
            if heads is not None and check_int("heads", heads, minimum=1) != attention.heads:
                raise ValueError(f"heads={heads}: the attention model already has heads={attention.heads}")
            return attention
        if isinstance(attention, AttentionKind):
            attention = attention.name
        if not isinstance(attention, str):
            raise ValueError(
                f"attention={attention!r}: expected one of {', '.join(map(repr, ATTENTIONS))} "
                "or a bayesattn AttentionModel"
            )
        return cls(attention, 1 if heads is None else heads)

    def key_mask(self, task_mask: np.ndarray) -> np.ndarray:
        """(T, T) bool: the keys each query may attend to, given the task's own mask."""
        task_mask = np.asarray(task_mask, dtype=bool)
        if self.mask == "causal":
            return task_mask & np.tril(np.ones_like(task_mask))
        return task_mask  # "full" cannot open keys the task's statement forbids

    def logit_shape(self, T: int) -> tuple[int, ...]:
        """The shape of L for sequences of length T: (T, T) for one head, (H, T, T) for H heads."""
        T = check_int("T", T, minimum=1)
        return (T, T) if self.heads == 1 else (self.heads, T, T)

    def weights(self, L: jax.Array, task_mask: np.ndarray) -> jax.Array:
        """alpha = a(L) per head: L: (..., *logit_shape) -> the same shape. A static check (the same under jit): L's
        shape must end in :meth:`logit_shape` of the mask's T (one head's (T, T) was taken for two heads)."""
        mask = np.asarray(task_mask)
        if mask.ndim == 2:  # another mask is refused by the attention map, naming it
            want, shape = self.logit_shape(mask.shape[-1]), tuple(np.shape(L))
            if shape[-len(want) :] != want:
                raise ValueError(
                    f"L has shape {shape}: expected (..., {', '.join(map(str, want))}) for heads={self.heads} and "
                    f"T={mask.shape[-1]}"
                )
        return self.attention_kind.weights(L, self.key_mask(mask))

    def replace(self, **changes) -> AttentionModel:
        """The same model with some fields changed (checked again)."""
        return dataclasses.replace(self, **changes)

    def config(self) -> dict:
        """Plain data: {"kind", "heads", "mask"}."""
        return dataclasses.asdict(self)


def hot_logits(
    target_pattern: np.ndarray,
    key_mask: np.ndarray,
    attention: AttentionName | AttentionKind,
    scale: float | None = None,
) -> np.ndarray:
    """A strong copy pattern of logits L: (T, T), the one "hot" start of the samplers and of training.

    scale None: normalised rows (softmax) put 0.9 on the source in every query row, with c_t = log(9 (k_t - 1))
    for the k_t keys row t may attend to (so causal rows with few keys get the same source weight); linear gives
    alpha = pattern (L = sqrt(T) pattern, m = 1). scale given: scale * pattern.
    """
    kind = attention_kind(attention)
    pat = np.asarray(target_pattern, np.float64)
    if scale is not None:
        return float(scale) * pat
    if kind.normalised:
        k = np.asarray(key_mask, bool).sum(axis=1)
        return pat * np.log(9.0 * np.maximum(k - 1, 1))[:, None]
    return np.sqrt(pat.shape[-1]) * pat
