"""Circuit screens on attention tensors (docs/results/screens.md): which heads are induction, previous-token,
duplicate-token, BOS (first-token), self or local heads, their spectral participation ratio, and
TransformerLens-style detection scores.

Everything here is a function of arrays; nothing knows a network. A model enters through

- ``attn``: attention rows at the batch's query positions, (N, layers, heads, Q, K) (rows sum to 1);
- ``outputs``: each head's output at the *last* query of every sequence, before the output projection,
  (N, layers, heads, d_head) (for the participation ratio);
- ``detection``: per-sequence detection scores (N, layers, heads) per kind, computed from full (T, T)
  attention by :func:`detection_score` (inside a model's forward pass when the full tensor is too big to keep).

Definitions (following Xu, "When do attention circuits form?", and its code):

- **Probe batches.** :func:`repeated_pair_batch`: N random sequences with ``A B`` planted at a random position
  in ``pair_range`` (default min(20, T/6) .. T/2 - 1) and a second ``A`` at the last position; A and B occur
  nowhere else.
  The query is the last position. :func:`repeated_sequence_batch`: a random sequence ``r`` of length n, then
  ``r`` again; the queries are every position of the second copy.
- **Selectivity** of a head for a class: the mean attention from the query to the class's target position(s)
  divided by the mean attention to ``n_other`` (50) *baseline* positions of the same query, both averaged over
  sequences and queries. Targets at query t: induction = the
  token after the earlier occurrence of the current token; duplicate = that earlier occurrence; previous_token
  = t - 1; bos = 0; self = t; local = the mean over t - 2 .. t - 5. A head *passes* a class at 30x
  (:data:`THRESHOLD`); an induction-circuit head has induction selectivity >= 50x (:data:`CIRCUIT_THRESHOLD`), a
  previous-token-circuit head previous-token selectivity >= 100x (:data:`PREV_TOKEN_CIRCUIT_THRESHOLD`).
  The baseline (``baseline=``): "paper" (default), the paper's code's rule: at query t, one fixed set of 50
  distinct positions, the same for every sequence, drawn by ``numpy.random.RandomState(0).randint(1, t)`` until
  50 are found outside {0, t, t - 1} and t - 5 .. t - 2 (so it may hold a sequence's induction or duplicate
  target); "class_free", this toolkit's option: per sequence and query, 50 random keys 1 .. t - 1 that are no
  class's target, so that a sharp induction head does not inflate its own baseline. Where fewer than 50
  positions qualify, all of them are used (repeated cyclically to fill 50 slots).
- **PR**: exp(entropy of the normalised squared singular values) of a head's N x d_head matrix of outputs at
  the query (not centred, as in the paper); between 1 (all outputs along one direction) and d_head.
- **Detection scores**, TransformerLens' ``detect_head(..., error_measure="mul")``: for each sequence,
  sum(attention x pattern) / sum(attention) over the (T, T) matrix, averaged over sequences; patterns
  "previous_token", "duplicate_token", "induction" as TransformerLens builds them from the tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._validate import check_choice, check_int

CLASSES = ("induction", "previous_token", "duplicate", "bos", "self", "local")
DETECTIONS = ("previous_token", "duplicate_token", "induction")
THRESHOLD = 30.0  # a head passes a class at this selectivity
CIRCUIT_THRESHOLD = 50.0  # induction-circuit heads
PREV_TOKEN_CIRCUIT_THRESHOLD = 100.0  # previous-token-circuit heads (the paper's stricter threshold for this class)
N_OTHER = 50
BASELINES = ("paper", "class_free")  # the baseline positions' rule (module docstring)
LOCAL_LAGS = (2, 3, 4, 5)
_EPS = 1e-8


# ---------------------------------------------------------------------------------------------- probe batches
@dataclass(frozen=True)
class ProbeBatch:
    """Probe sequences and, per sequence and query, the key positions of every class and of the baseline.

    tokens: (N, T) int; queries: (Q,) int query positions (the same in every sequence); targets: class ->
    (N, Q, m) int (m = 1, or 4 for local); others: (N, Q, n_other) int baseline positions."""

    kind: str
    tokens: np.ndarray
    queries: np.ndarray
    targets: dict
    others: np.ndarray
    config: dict = field(default_factory=dict)

    @property
    def N(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def T(self) -> int:
        return int(self.tokens.shape[1])


def _token_range(vocab, token_range):
    vocab = check_int("vocab", vocab, minimum=4)
    lo, hi = (min(100, vocab // 4), vocab) if token_range is None else (int(token_range[0]), int(token_range[1]))
    if not 0 <= lo < hi <= vocab or hi - lo < 4:
        raise ValueError(f"token_range=({lo}, {hi}): expected 0 <= lo < hi <= vocab={vocab} with hi - lo >= 4")
    return vocab, lo, hi


def _others(rng, T: int, queries: np.ndarray, targets: dict, n_other: int) -> np.ndarray:
    """(N, Q, n_other) baseline keys: for each (sequence, query t), positions 1 .. t - 1 that are no class
    target, drawn without replacement (with replacement when fewer than n_other are left)."""
    N = next(iter(targets.values())).shape[0]
    Q = len(queries)
    allowed = (np.arange(T)[None, None, :] >= 1) & (np.arange(T)[None, None, :] < queries[None, :, None])
    allowed = np.broadcast_to(allowed, (N, Q, T)).copy()
    for idx in targets.values():
        np.put_along_axis(allowed, idx, False, axis=-1)
    if not allowed.any(-1).all():
        raise ValueError(f"T={T}: some query has no key left for the baseline (sequences too short)")
    prio = np.where(allowed, rng.random((N, Q, T)), -1.0)
    order = np.argsort(-prio, axis=-1)
    count = allowed.sum(-1, keepdims=True)  # (N, Q, 1)
    j = np.arange(n_other)[None, None, :] % count  # wrap (repeat) where fewer than n_other are allowed
    return np.take_along_axis(order, j, axis=-1)


def _paper_others(N: int, queries: np.ndarray, n_other: int) -> np.ndarray:
    """(N, Q, n_other) baseline keys by the paper's rule: per query t one fixed set of distinct positions, drawn
    by RandomState(0).randint(1, t) outside {0, t, t - 1} and t - 5 .. t - 2, the same for every sequence."""
    out = np.empty((len(queries), n_other), dtype=int)
    for j, t in enumerate(int(q) for q in queries):
        avoid = {0, t, t - 1, *range(t - 1 - max(LOCAL_LAGS) + 1, t - 1)}
        allowed = [p for p in range(1, t) if p not in avoid]
        if not allowed:
            raise ValueError(f"query {t}: no key left for the paper's baseline (sequences too short)")
        if len(allowed) <= n_other:
            picks = allowed
        else:
            draw, picks = np.random.RandomState(0), []
            while len(picks) < n_other:
                p = int(draw.randint(1, t))
                if p not in avoid and p not in picks:
                    picks.append(p)
        out[j] = np.resize(np.asarray(picks), n_other)  # cyclic repetition where fewer qualify
    return np.ascontiguousarray(np.broadcast_to(out[None], (N, len(queries), n_other)))


def _baseline_keys(rng, T: int, queries: np.ndarray, targets: dict, n_other: int, baseline: str) -> np.ndarray:
    if baseline == "paper":
        return _paper_others(next(iter(targets.values())).shape[0], queries, n_other)
    return _others(rng, T, queries, targets, n_other)


def _fixed_targets(N: int, queries: np.ndarray) -> dict:
    q = queries[None, :, None]
    return {
        "previous_token": np.broadcast_to(q - 1, (N, len(queries), 1)),
        "bos": np.zeros((N, len(queries), 1), dtype=int),
        "self": np.broadcast_to(q, (N, len(queries), 1)),
        "local": np.broadcast_to(q - np.asarray(LOCAL_LAGS)[None, None, :], (N, len(queries), len(LOCAL_LAGS))),
    }


def repeated_pair_batch(
    N: int,
    T: int,
    vocab: int,
    seed: int = 0,
    *,
    token_range=None,
    pair_range=None,
    bos: int | None = None,
    n_other: int = N_OTHER,
    baseline: str = "paper",
) -> ProbeBatch:
    """N sequences of T tokens drawn uniformly from ``token_range`` (default [min(100, vocab/4), vocab)), with
    ``A B`` at positions (p, p + 1), p uniform in ``pair_range`` = [lo, hi) (default [min(20, T // 6), T // 2)),
    and A again
    at T - 1; A and B (distinct) occur nowhere else. ``bos``: a token id put at position 0. The query is T - 1.
    (The paper: N = 2000, T = 256, tokens [100, 10000).)"""
    N = check_int("N", N, minimum=1)
    T = check_int("T", T, minimum=12)
    check_choice("baseline", baseline, BASELINES)
    vocab, lo, hi = _token_range(vocab, token_range)
    plo, phi = (min(20, T // 6), T // 2) if pair_range is None else (int(pair_range[0]), int(pair_range[1]))
    first = 1 if bos is not None else 0
    if not (first <= plo < phi and phi + 1 < T - 1 - max(LOCAL_LAGS)):
        raise ValueError(
            f"pair_range=({plo}, {phi}): expected {first} <= lo < hi and the pair (hi, hi + 1) "
            f"before the local window of the last query (hi < {T - 2 - max(LOCAL_LAGS)}) for T={T}"
        )
    rng = np.random.default_rng(check_int("seed", seed, minimum=0))
    tokens = rng.integers(lo, hi, size=(N, T))
    ab = rng.integers(plo, phi, size=N)
    for i in range(N):
        a, b = rng.choice(np.arange(lo, hi), size=2, replace=False)
        row = tokens[i]
        bad = (row == a) | (row == b)
        while bad.any():  # redraw every other occurrence of A and B
            row[bad] = rng.integers(lo, hi, size=int(bad.sum()))
            bad = (row == a) | (row == b)
        row[ab[i]], row[ab[i] + 1], row[T - 1] = a, b, a
    if bos is not None:
        tokens[:, 0] = bos
    queries = np.array([T - 1])
    targets = {"induction": (ab + 1)[:, None, None], "duplicate": ab[:, None, None], **_fixed_targets(N, queries)}
    targets = {c: np.ascontiguousarray(targets[c]) for c in CLASSES}
    cfg = {
        "kind": "repeated_pair",
        "N": N,
        "T": T,
        "vocab": vocab,
        "token_range": [lo, hi],
        "pair_range": [plo, phi],
        "bos": bos,
        "n_other": n_other,
        "baseline": baseline,
        "seed": seed,
    }
    others = _baseline_keys(rng, T, queries, targets, n_other, baseline)
    return ProbeBatch("repeated_pair", tokens, queries, targets, others, cfg)


def repeated_sequence_batch(
    N: int,
    T: int,
    vocab: int,
    seed: int = 0,
    *,
    token_range=None,
    bos: int | None = None,
    n_other: int = N_OTHER,
    baseline: str = "paper",
) -> ProbeBatch:
    """N sequences [bos] r r (r: n = (T - [bos]) // 2 tokens, distinct when the range allows; an odd leftover
    position at the end gets a random token and is not queried). Queries: every position of the second copy;
    at query t the earlier occurrence of the current token is t - n (duplicate), the induction target t - n + 1."""
    N = check_int("N", N, minimum=1)
    T = check_int("T", T, minimum=12)
    check_choice("baseline", baseline, BASELINES)
    vocab, lo, hi = _token_range(vocab, token_range)
    off = 1 if bos is not None else 0
    n = (T - off) // 2
    if n < max(LOCAL_LAGS) + 2:
        raise ValueError(f"T={T}: the repeated sequence needs copies of at least {max(LOCAL_LAGS) + 2} tokens")
    rng = np.random.default_rng(check_int("seed", seed, minimum=0))
    distinct = hi - lo >= n
    r = np.stack([rng.choice(np.arange(lo, hi), size=n, replace=not distinct) for _ in range(N)])
    tokens = rng.integers(lo, hi, size=(N, T))
    tokens[:, off : off + n] = r
    tokens[:, off + n : off + 2 * n] = r
    if bos is not None:
        tokens[:, 0] = bos
    queries = off + n + np.arange(n)
    q = np.broadcast_to(queries[None, :, None], (N, n, 1))
    targets = {"induction": q - n + 1, "duplicate": q - n, **_fixed_targets(N, queries)}
    targets = {c: np.ascontiguousarray(targets[c]) for c in CLASSES}
    cfg = {
        "kind": "repeated_sequence",
        "N": N,
        "T": T,
        "vocab": vocab,
        "token_range": [lo, hi],
        "period": n,
        "distinct": bool(distinct),
        "bos": bos,
        "n_other": n_other,
        "baseline": baseline,
        "seed": seed,
    }
    others = _baseline_keys(rng, T, queries, targets, n_other, baseline)
    return ProbeBatch("repeated_sequence", tokens, queries, targets, others, cfg)


PROBES = {"repeated_pair": repeated_pair_batch, "repeated_sequence": repeated_sequence_batch}


# ------------------------------------------------------------------------------------------ scores
def participation_ratio(X) -> np.ndarray:
    """exp(entropy of the normalised squared singular values) of X: (..., N, d) -> (...)."""
    s2 = np.linalg.svd(np.asarray(X, dtype=np.float64), compute_uv=False) ** 2
    tot = s2.sum(-1, keepdims=True)
    p = np.where(tot > 0, s2 / np.where(tot > 0, tot, 1.0), 0.0)
    ent = -np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0), axis=-1)
    return np.exp(ent)


def detection_patterns(tokens) -> dict:
    """TransformerLens' detection patterns of int tokens (N, T) -> {kind: (N, T, T) float 0 / 1}, lower
    triangular: previous_token[t, t - 1] = 1; duplicate_token[t, s] = 1 for s < t with tokens[s] = tokens[t];
    induction[t, s] = duplicate_token[t, s - 1] for 1 <= s <= t."""
    tok = np.asarray(tokens)
    if tok.ndim != 2:
        raise ValueError(f"tokens has shape {tok.shape}: expected (N, T) int")
    N, T = tok.shape
    prev = np.broadcast_to(np.eye(T, k=-1), (N, T, T)).astype(float)
    dup = (tok[:, :, None] == tok[:, None, :]) & np.tril(np.ones((T, T), bool), -1)
    ind = np.zeros((N, T, T))
    ind[:, :, 1:] = dup[:, :, :-1]
    ind *= np.tril(np.ones((T, T)))
    return {"previous_token": prev, "duplicate_token": dup.astype(float), "induction": ind}


def detection_score(attn, pattern, *, exclude_bos: bool = False, exclude_current: bool = False):
    """sum(attn x pattern) / sum(attn) over the last two axes (TransformerLens' "mul" measure), with key 0
    and / or the diagonal zeroed first if asked. Works on numpy and JAX arrays; attn (..., T, T), pattern
    broadcastable to it."""
    T = attn.shape[-1]
    keep = np.ones((T, T))
    if exclude_bos:
        keep[:, 0] = 0.0
    if exclude_current:
        keep[np.arange(T), np.arange(T)] = 0.0
    a = attn * keep.astype(attn.dtype) if (exclude_bos or exclude_current) else attn
    return (a * pattern).sum(axis=(-2, -1)) / a.sum(axis=(-2, -1))


# ----------------------------------------------------------------------------------------- the screen
@dataclass
class ScreenResult:
    """Per head (layers, heads): ``attention`` (class and "other" -> mean attention), ``selectivity`` (class ->
    ratio to "other"), ``pr`` (or None), ``detection`` (kind -> mean score; may be empty)."""

    attention: dict
    selectivity: dict
    pr: np.ndarray | None
    detection: dict
    batch: dict

    @property
    def shape(self) -> tuple[int, int]:
        return self.selectivity[CLASSES[0]].shape

    def passes(self, threshold: float = THRESHOLD) -> dict:
        """class -> (layers, heads) bool: selectivity >= threshold."""
        return {c: self.selectivity[c] >= threshold for c in CLASSES}

    def best(self, threshold: float = THRESHOLD) -> np.ndarray:
        """(layers, heads) object array: the paper's classification, the class of highest selectivity when it
        reaches ``threshold``, else None."""
        stack = np.stack([self.selectivity[c] for c in CLASSES])
        idx = np.argmax(stack, axis=0)
        out = np.empty(idx.shape, dtype=object)
        for lh in np.ndindex(idx.shape):
            out[lh] = CLASSES[idx[lh]] if stack[(idx[lh], *lh)] >= threshold else None
        return out

    def heads(self, threshold: float = THRESHOLD) -> dict:
        """class -> [(layer, head), ...] passing, strongest first."""
        out = {}
        for c, ok in self.passes(threshold).items():
            lh = [tuple(map(int, x)) for x in np.argwhere(ok)]
            out[c] = sorted(lh, key=lambda x: -self.selectivity[c][x])
        return out

    def records(self, threshold: float = THRESHOLD) -> list[dict]:
        """One dict per head: layer, head, selectivity {class: x}, attention, pr, classes (passed), detection,
        induction_circuit (induction selectivity >= CIRCUIT_THRESHOLD), previous_token_circuit (previous-token
        selectivity >= PREV_TOKEN_CIRCUIT_THRESHOLD), best_class (:meth:`best`)."""
        L, H = self.shape
        best = self.best(threshold)
        recs = []
        for layer in range(L):
            for head in range(H):
                sel = {c: float(self.selectivity[c][layer, head]) for c in CLASSES}
                recs.append(
                    {
                        "layer": layer,
                        "head": head,
                        "selectivity": sel,
                        "attention": {c: float(v[layer, head]) for c, v in self.attention.items()},
                        "pr": None if self.pr is None else float(self.pr[layer, head]),
                        "classes": [c for c in CLASSES if sel[c] >= threshold],
                        "best_class": best[layer, head],
                        "induction_circuit": sel["induction"] >= CIRCUIT_THRESHOLD,
                        "previous_token_circuit": sel["previous_token"] >= PREV_TOKEN_CIRCUIT_THRESHOLD,
                        "detection": {k: float(v[layer, head]) for k, v in self.detection.items()},
                    }
                )
        return recs


class ScreenAccumulator:
    """Accumulate a screen over chunks of the batch's sequences (models too big to hold every attention row)."""

    def __init__(self, batch: ProbeBatch):
        self.batch = batch
        self._sums: dict = {}
        self._counts: dict = {}
        self._outputs: list = []
        self._det: dict = {}
        self._seen = 0

    def add(self, start: int, attn, outputs=None, detection: dict | None = None) -> None:
        """attn: (n, L, H, Q, K) rows at the batch's queries for sequences start .. start + n - 1; outputs:
        (n, L, H, d_head) at the last query; detection: kind -> (n, L, H) per-sequence scores."""
        attn = np.asarray(attn, dtype=np.float64)
        b = self.batch
        n = attn.shape[0]
        if attn.ndim != 5 or attn.shape[3] != len(b.queries) or attn.shape[4] < b.T:
            raise ValueError(f"attn has shape {attn.shape}: expected (n, layers, heads, Q={len(b.queries)}, K>={b.T})")
        if start != self._seen or start + n > b.N:
            raise ValueError(f"start={start}: chunks must come in order (next {self._seen}) within N={b.N}")
        sl = slice(start, start + n)
        for name, idx in [*((c, b.targets[c][sl]) for c in CLASSES), ("other", b.others[sl])]:
            g = np.take_along_axis(attn, idx[:, None, None, :, :], axis=-1)  # (n, L, H, Q, m)
            self._sums[name] = self._sums.get(name, 0.0) + g.sum(axis=(0, 3, 4))
            self._counts[name] = self._counts.get(name, 0) + idx.size
        if outputs is not None:
            self._outputs.append(np.asarray(outputs, dtype=np.float64))
        for k, v in (detection or {}).items():
            self._det[k] = self._det.get(k, 0.0) + np.asarray(v, dtype=np.float64).sum(0)
        self._seen += n

    def result(self) -> ScreenResult:
        if self._seen == 0:
            raise ValueError("no sequences screened")
        att = {k: self._sums[k] / self._counts[k] for k in (*CLASSES, "other")}
        sel = {c: att[c] / np.maximum(att["other"], _EPS) for c in CLASSES}
        pr = None
        if self._outputs:
            out = np.concatenate(self._outputs)  # (N, L, H, d)
            pr = participation_ratio(np.moveaxis(out, 0, 2))  # (L, H, N, d) -> (L, H)
        det = {k: v / self._seen for k, v in self._det.items()}
        return ScreenResult(att, sel, pr, det, dict(self.batch.config, screened=self._seen))


def screen(batch: ProbeBatch, attn, outputs=None, detection: dict | None = None) -> ScreenResult:
    """The screen of one batch in one go (arguments as :meth:`ScreenAccumulator.add` with start 0)."""
    acc = ScreenAccumulator(batch)
    acc.add(0, attn, outputs, detection)
    return acc.result()


def screen_full_attention(batch: ProbeBatch, attn, outputs=None) -> ScreenResult:
    """Screen from full attention (N, L, H, T, T): selectivity at the batch's queries and the detection scores
    of :func:`detection_patterns` (for small models, where the whole tensor fits)."""
    attn = np.asarray(attn, dtype=np.float64)
    if attn.ndim != 5 or attn.shape[-1] != batch.T or attn.shape[-2] != batch.T:
        raise ValueError(f"attn has shape {attn.shape}: expected (N, layers, heads, T={batch.T}, T={batch.T})")
    pats = detection_patterns(batch.tokens)
    det = {k: detection_score(attn, p[:, None, None]) for k, p in pats.items()}
    return screen(batch, attn[:, :, :, batch.queries], outputs, det)
