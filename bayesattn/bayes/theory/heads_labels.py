"""The H-head theory's order parameters seen without head labels (:mod:`.heads`): label-free summaries, and the
images, orbits and invariants of a point x = (m, Q) under relabelling, sign flips (linear heads) and rotations of
the heads (linear heads: an exact O(H) symmetry)."""

from __future__ import annotations

import itertools

import numpy as np

from .heads_rowlaw import pack, unpack


def label_free(m, Q, signs: bool = True) -> dict:
    """Label-free summaries of m (..., H, K), Q (..., H, H) (numpy): each head's sign fixed so that its largest
    |m_hk| is positive (linear heads; V absorbs the sign, a no-op for softmax), then the heads relabelled greedily
    (head 0 the one with the largest mass on lag 1, head 1 the largest on lag 2 among the rest, ...).
    Returns "mass_max" (..., K) (the best head's mass per lag), "m_canon" (..., H, K), "Q_canon" (..., H, H), and
    "m_sv" (..., min(H, K)): the singular values of m, invariant under any rotation of the heads (linear heads have
    that symmetry, so for them the per-head view depends on the point of the orbit; module docstring), and
    "capture" (..., K): m_k^T Q^-1 m_k, the fraction of lag k's pattern in the span of the heads' maps (for the
    single-lag cyclic patterns here, :func:`bayesattn.diagnostics.observables.pattern_capture`), unchanged by any
    invertible mixing of the heads."""
    m, Q = np.asarray(m, np.float64), np.asarray(Q, np.float64)
    H, K = m.shape[-2:]
    lead = m.shape[:-2]
    m, Q = m.reshape(-1, H, K), Q.reshape(-1, H, H)
    n = m.shape[0]
    if signs:
        j = np.argmax(np.abs(m), axis=-1)
        s = np.sign(np.take_along_axis(m, j[..., None], axis=-1)[..., 0])
        s[s == 0] = 1.0
        m, Q = m * s[:, :, None], Q * s[:, :, None] * s[:, None, :]
    perm = np.zeros((n, H), int)
    free = np.ones((n, H), bool)
    for k in range(H):
        j = np.argmax(np.where(free, m[:, :, min(k, K - 1)], -np.inf), axis=1)
        perm[:, k] = j
        free[np.arange(n), j] = False
    i = np.arange(n)[:, None]
    mc, Qc = m[i, perm], Q[i[:, :, None], perm[:, :, None], perm[:, None, :]]
    sv = np.linalg.svd(m, compute_uv=False)
    # |p_k|^2 = T, p_k . alpha_h = T m_hk, Gram = T Q: the projection's share p^T Pi p / |p|^2 is m_k^T Q^-1 m_k
    capture = np.einsum("nhk,nhk->nk", m, np.linalg.solve(Q, m))
    return {
        "capture": capture.reshape(*lead, K),
        "mass_max": m.max(axis=1).reshape(*lead, K),
        "m_canon": mc.reshape(*lead, H, K),
        "Q_canon": Qc.reshape(*lead, H, H),
        "m_sv": sv.reshape(*lead, -1),
    }


def rotate(x, O, H, K):
    """x -> (O m, O Q O^T) for head rotations O (..., H, H) (linear heads: an exact symmetry of the posterior)."""
    m, Q = unpack(np.asarray(x), H, K, xp=np)
    return pack(O @ m, O @ Q @ np.swapaxes(O, -1, -2))


def orbit_tangents(x, H, K):
    """Orthonormal basis (r, D) of the tangent space of the O(H) orbit of x (the linear heads' zero modes)."""
    vs = []
    for i, j in itertools.combinations(range(H), 2):
        A = np.zeros((H, H))
        A[i, j], A[j, i] = 1.0, -1.0
        m, Q = unpack(np.asarray(x), H, K, xp=np)
        vs.append(pack(A @ m, A @ Q + Q @ A.T))
    if not vs:
        return np.zeros((0, len(x)))
    u, sv, _ = np.linalg.svd(np.asarray(vs).T, full_matrices=False)
    return u[:, sv > 1e-8 * max(1.0, sv.max())].T


def images(x, H, K, signs):
    """The images of x under relabelling the heads (and flipping a head's sign, linear)."""
    m, Q = unpack(np.asarray(x), H, K, xp=np)
    out = []
    for p in itertools.permutations(range(H)):
        for s in itertools.product(*([(1.0, -1.0)] * H if signs else [(1.0,)] * H)):
            s = np.asarray(s)
            out.append(pack(m[list(p)] * s[:, None], Q[np.ix_(p, p)] * s[:, None] * s[None, :]))
    return np.asarray(out)


def invariants(x, H, K):
    """O(H)-invariants of x: singular values of m, eigenvalues of Q and of m^T m (sorted)."""
    m, Q = unpack(np.asarray(x), H, K, xp=np)
    return np.concatenate([np.linalg.svd(m, compute_uv=False), np.linalg.eigvalsh(Q), np.linalg.eigvalsh(m.T @ m)])


def unique_rows(X, tol):
    """The rows of X, each kept unless it lies within ``tol`` (max norm) of one kept before."""
    keep = []
    for x in X:
        if not any(np.max(np.abs(x - y)) < tol for y in keep):
            keep.append(x)
    return keep
