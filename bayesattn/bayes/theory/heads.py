"""Order-parameter theory of H heads on K lags (docs/theory.md section 12): the Bayesian staircase.

Order parameters (row averages over the T query rows): per-head lag masses m_hk = <alpha_h[t, t-k]>_t and the
head overlaps Q_hh' = <sum_s alpha_h[t, s] alpha_h'[t, s]>_t (self-overlaps q_h = Q_hh). For
``MultiLagCopyTask`` (cyclic, Gaussian tokens, single-lag spans, y_t = sum_k w_k U_k x_{t-k}) the closed form
self-averages (G ~ n Q kron I_d, block h of C ~ n sum_k w_k m_hk U_k^T, |Y|^2 ~ n d sum_k w_k^2) to the per-row
energy, with beta = P d / (2 sigma2) and eps = lam / n,

    Phi_E(m, Q) = beta [sum_k w_k^2 - tr((Q + eps I)^{-1} M)] + (d^2 / (2 T)) log det(I + Q / eps),
    M_hh' = sum_kk' w_k w_k' m_hk m_h'k' R_kk',   R_kk' = tr(U_k^T U_k') / d,

and log p(L | D) = -T Phi_E(m(L), Q(L)) + log prior(L) + const. For H = K = 1 this is docs/theory.md section 1.
The rows are i.i.d. under the prior, so the order parameters have the large-deviation density exp(-T I(x)),
I the Legendre transform of the row cumulant generating function Lambda (:mod:`.heads_rowlaw`). A fixed point
(a local minimum of F = Phi_E + I) is found in the dual variables lam by minimising
Psi(lam) = Phi_E(grad Lambda) + lam . grad Lambda - Lambda(lam) (= F at x = grad Lambda(lam); its gradient is
Cov (lam + grad Phi_E)), from a cold start, hot starts and the neighbouring P's fixed points (both directions).
Posterior means: a Laplace mixture of the stable wells with their Gaussian fluctuations; linear heads have an
exact O(H) symmetry (rotating the heads), so their wells are orbits, averaged over Haar rotations, and their
m = 0 wells are integrated with the saddle-point density (soft at the continuous transition).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np
from scipy.optimize import minimize
from scipy.stats import ortho_group

from ..._validate import brief, check_int, check_nonnegative, check_positive, check_real_array
from ...models.attention import attention_kind
from ..posterior import Prior
from .common import check_grid, check_prior, first_crossing
from .heads_labels import images, invariants, label_free, orbit_tangents, rotate, unique_rows
from .heads_rowlaw import ROW_LAWS, RowLaw, default_proposal, linear_legendre, n_stats, pack, unpack

COVERED_HEADS = (
    "heads_curve / heads_energy cover MultiLagCopyTask with tokens='gaussian', boundary='cyclic' and "
    "single-lag spans (any lags, weights and rotations), softmax or linear attention, H >= 1 heads"
)


def check_heads_task(task):
    from ...tasks import MultiLagCopyTask

    if not isinstance(task, MultiLagCopyTask):
        raise ValueError(f"task={brief(task)}: not covered; {COVERED_HEADS}")
    if task.tokens != "gaussian":
        raise ValueError(f"task.tokens={task.tokens!r}: not covered (G and C are not isotropic); {COVERED_HEADS}")
    if task.boundary != "cyclic":
        raise ValueError(
            f"task.boundary={task.boundary!r}: not covered (rows with different key sets); {COVERED_HEADS}"
        )
    if any(len(s) != 1 for s in task.spans):
        raise ValueError(f"task.spans={task.spans!r}: not covered (a span of several lags); {COVERED_HEADS}")
    if task.d_out != task.d:
        raise ValueError(f"task.d_out={task.d_out}: expected d_out = d = {task.d}")
    return task


def energy_params(task, prior: Prior, P) -> dict:
    """beta, eps (arrays over P), w (K,), R (K, K), d, T of the H-head energy for ``task``."""
    check_heads_task(task)
    P = np.asarray(P, np.float64)
    U = np.asarray(task.rotation_matrices())
    R = np.einsum("kij,lij->kl", U, U) / task.d
    return {
        "beta": P * task.d / (2.0 * prior.sigma2),
        "eps": prior.lam(task.d) / (P * task.T),
        "w": np.asarray(task.weights, np.float64),
        "R": R,
        "d": task.d,
        "T": task.T,
    }


def _phi_E(x, beta, eps, w, R, d, T, H, K):
    m, Q = unpack(x, H, K)
    mw = m * w
    M = mw @ R @ mw.T
    A = Q + eps * jnp.eye(H)
    fit = jnp.trace(jnp.linalg.solve(A, M))
    _, logdet = jnp.linalg.slogdet(jnp.eye(H) + Q / eps)
    return beta * (jnp.sum(w**2) - fit) + d**2 / (2.0 * T) * logdet


def row_energy(ep, H, K):
    """phi(x, beta, eps): the per-row energy of :func:`_phi_E` with the task's parameters ``ep`` fixed; one
    function object per set of parameters, by value (so the row laws' jitted programs are built once for them)."""
    w, R = np.asarray(ep["w"], np.float64), np.asarray(ep["R"], np.float64)
    return _energy_of(tuple(w.tolist()), R.tobytes(), R.shape, int(ep["d"]), int(ep["T"]), H, K)


@functools.lru_cache(maxsize=32)
def _energy_of(w: tuple, R_bytes: bytes, R_shape: tuple, d: int, T: int, H: int, K: int):
    args = (np.asarray(w, np.float64), np.frombuffer(R_bytes, np.float64).reshape(R_shape), d, T, H, K)
    return lambda x, b, e: _phi_E(x, b, e, *args)


def heads_energy(m, Q, *, task, prior: Prior, P: float):
    """The per-row energy Phi_E(m, Q) (module docstring): m (..., H, K), Q (..., H, H) -> (...).
    -T Phi_E is the log likelihood of L (V integrated out) to leading order in P, up to -(n d/2) log(2 pi sigma2)."""
    p = energy_params(task, check_prior(prior), check_positive("P", P))
    m, Q = (jnp.asarray(check_real_array(k, v, (None,) * np.ndim(v)), jnp.float64) for k, v in (("m", m), ("Q", Q)))
    if m.ndim < 2:
        raise ValueError(f"m of shape {m.shape}: expected (..., H, K), H heads by K = task.K = {task.K} lags")
    H, K = m.shape[-2:]
    if K != task.K:
        raise ValueError(f"m of shape {m.shape}: its last axis holds K = {K} lags; expected task.K = {task.K}")
    if Q.shape[-2:] != (H, H):
        raise ValueError(f"Q of shape {Q.shape}: expected (..., {H}, {H}) for m of shape {m.shape} ({H} heads)")
    x = jnp.asarray(pack(m, Q))
    f = lambda v: _phi_E(v, float(p["beta"]), float(p["eps"]), p["w"], p["R"], p["d"], p["T"], H, K)  # noqa: E731
    return jnp.vectorize(f, signature="(n)->()")(x)


# ---------------------------------------------------------------------------------------------- the solver
def _residual(law, lam, b, e):
    L, x, C, _ = law.moments(lam)
    if not np.isfinite(L):
        return np.inf, None, None, None
    r = lam + np.asarray(law.dphi(jnp.asarray(x), b, e))
    return float(np.max(np.abs(r)) / max(1.0, np.max(np.abs(lam)))), r, x, C


def _newton_polish(law, lam, b, e, steps=30, tol=1e-11):
    """Newton on lam + grad Phi_E(grad Lambda(lam)) = 0 (Jacobian I + H_E Cov), from the minimiser's lam, kept
    only while it lowers the residual (L-BFGS stops early where Cov is small: its gradient is Cov times this)."""
    err, r, x, C = _residual(law, lam, b, e)
    for _ in range(steps):
        if err < tol:
            break
        HE = np.asarray(law.hphi(jnp.asarray(x), b, e))
        new = lam - np.linalg.solve(np.eye(len(lam)) + HE @ C, r)
        err_new, r_new, x_new, C_new = _residual(law, new, b, e)
        if not err_new < err:
            break
        lam, err, r, x, C = new, err_new, r_new, x_new, C_new
    return lam


def _fixed_point(law: RowLaw, lam0, b, e, rounds=6, tol=1e-3):
    """Minimise Psi from lam0 (an adaptive law, softmax: re-fitting the proposal between rounds). Returns a dict
    or None."""
    lam = np.asarray(lam0, np.float64)
    x_prev = None
    for r in range(rounds if law.adaptive else 1):
        res = minimize(
            law.psi,
            lam,
            args=(b, e),
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": 200, "ftol": 1e-10, "gtol": 1e-7},
        )
        lam = _newton_polish(law, res.x, b, e)
        _, x, _, _ = law.moments(lam)
        if x_prev is not None and np.max(np.abs(x - x_prev)) < tol:
            break
        x_prev = x
        if r < rounds - 1:  # the last round's samples are the ones lam solves for
            law.adapt(lam)
    L, x, C, ess = law.moments(lam)
    if not np.isfinite(L):
        return None
    F, _ = law.psi(lam, b, e)
    HE = np.asarray(law.hphi(jnp.asarray(x), b, e))
    # the Hessian of F = Phi_E + I in x is H_E + Cov^{-1}; linear heads: restricted to the directions
    # transverse to the O(H) orbit of x (along it F is flat: an exact symmetry)
    D = len(x)
    B = np.eye(D)
    if law.kind.sign_symmetric:
        Tg = orbit_tangents(x, law.H, law.K)
        if len(Tg):
            u, sv, _ = np.linalg.svd(np.eye(D) - Tg.T @ Tg)
            B = u[:, sv > 0.5].T
    try:
        Cinv = np.linalg.inv(C)
    except np.linalg.LinAlgError:
        return None
    hess = B @ (HE + Cinv) @ B.T
    hess = 0.5 * (hess + hess.T)
    ev = np.linalg.eigvalsh(hess)
    resid = lam + np.asarray(law.dphi(jnp.asarray(x), b, e))
    # Laplace weight of the well: density prefactor det(Cov)^{-1/2} (Daniels) times the Gaussian integral
    # det(T hess)^{-1/2} over the transverse directions (up to a constant common to all wells)
    Cc = B @ C @ B.T
    logdet = float(np.linalg.slogdet(Cc)[1] + np.linalg.slogdet(hess)[1]) if ev.min() > 0 else math.inf
    return {
        "x": x,
        "lam": lam,
        "F": float(F),
        "stable": bool(ev.min() > 0),
        "min_eig": float(ev.min()),
        "residual": float(np.max(np.abs(resid)) / max(1.0, np.max(np.abs(lam)))),
        "ess": ess,
        "basis": B,
        "hess": hess,
        "logdet": logdet,
    }


def _linear_daniels(law, fp, b, e, n, rng, max_std=0.4):
    """Draws x and normalised weights of the saddle-point (Daniels) density det(Cov)^{-1/2} exp(-T F(x)) of the
    order parameters around a linear fixed point, by importance sampling from a Gaussian (its inverse Hessian
    with every standard deviation capped at ``max_std``, doubled in variance); F(x) = Phi_E(x) + I(x) exactly,
    I by the Legendre transform of the closed-form Lambda (:func:`.heads_rowlaw.linear_legendre`)."""
    T, H, K = law.T, law.H, law.K
    ev, V = np.linalg.eigh(fp["hess"])
    var = 2.0 * np.minimum(1.0 / (T * np.maximum(ev, 1e-12)), max_std**2)
    z = rng.standard_normal((n, len(ev))) * np.sqrt(var)
    xs = fp["x"] + z @ V.T
    logq = -0.5 * np.sum(z**2 / var, axis=1)
    lam, L, logdetC, res = (
        np.asarray(a) for a in linear_legendre(jnp.asarray(xs), jnp.asarray(fp["lam"]), H=H, K=K, T=T, sigma_A2=law.sA2)
    )
    phi = np.asarray(jax.vmap(lambda v: law.phi(v, b, e))(jnp.asarray(xs)))
    F = phi + np.sum(lam * xs, axis=1) - L
    lw = np.where(res < 1e-8, -T * F - 0.5 * logdetC - logq, -np.inf)
    w = np.exp(lw - lw.max())
    return xs, w / w.sum()


@dataclass
class HeadsCurve:
    """Per P: label-free posterior means (Laplace mixture of the stable fixed points with their Gaussian
    fluctuations): "mass_max" (NP, K), "capture" (NP, K) (:func:`label_free`), "m_canon" (NP, H, K), "Q_canon"
    (NP, H, H), "m_sv" (NP, min(H, K)); the most probable fixed point
    (relabelled, no fluctuations): "m_fp", "Q_fp"; every fixed point found per P ("fixed_points"); transitions:
    "lag<k>" the P where mass_max on lag k crosses 3/T (log-interpolated; None if it does not in the P range),
    "coexistence_P" the P with more than one stable well, "binodals" where the two lowest wells' free energies
    T F cross, "dTF" their difference per P (low-mass well minus high-mass well; None with one well)."""

    attention: str
    P: np.ndarray
    mean: dict = field(default_factory=dict)
    fixed: dict = field(default_factory=dict)
    fixed_points: list = field(default_factory=list)
    transitions: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)


def _coexistence(P, fps, T):
    """First-order jumps by free energy: the P with more than one stable well, and the binodals, where the two
    lowest wells' T F cross (linear interpolation of their difference between neighbouring P)."""
    co, dF = [], []
    for Pi, fl in zip(P, fps):
        st = sorted(T * fp["F"] for fp in fl if fp["stable"])
        if len(st) > 1:
            co.append(float(Pi))
        # signed difference: low-mass well minus high-mass well (positive: the high-mass well wins)
        wells = sorted((float(np.max(fp["x_canon"][:1])), T * fp["F"]) for fp in fl if fp["stable"])
        dF.append(wells[0][1] - wells[-1][1] if len(wells) > 1 else np.nan)
    binodals = []
    for i in range(len(P) - 1):
        if np.isfinite(dF[i]) and np.isfinite(dF[i + 1]) and dF[i] * dF[i + 1] < 0:
            binodals.append(float(P[i] + (P[i + 1] - P[i]) * dF[i] / (dF[i] - dF[i + 1])))
    return {"coexistence_P": co, "binodals": binodals, "dTF": [None if not np.isfinite(v) else float(v) for v in dF]}


def heads_curve(
    P,
    task=None,
    *,
    heads: int = 2,
    attention: str = "softmax",
    prior: Prior | None = None,
    T: int = 16,
    d: int = 8,
    weights=None,
    num_samples: int = 200_000,
    seed: int = 0,
    fluct_samples: int = 4000,
    min_ess: float = 200.0,
) -> HeadsCurve:
    """The H-head theory over a grid of P (docs/theory.md section 12).

    task: a :class:`~bayesattn.MultiLagCopyTask` (default: T, d, single lags 1..K with ``weights``, default
    0.6^k for K = heads, orthogonal U_k as experiments/staircase.py builds them); prior: default Prior(1, 100,
    400). num_samples: importance samples of the softmax row law (fixed seed; ignored for linear, which is
    closed form); a softmax fixed point whose importance sampling has an effective sample size below ``min_ess``
    is discarded (with few effective rows the estimated Lambda, hence F, is dominated by single rows and shows
    spurious wells: seen at H = 3 with 60,000 rows). Raises ValueError outside what is covered (:data:`COVERED_HEADS`)."""
    from ...tasks import MultiLagCopyTask

    kind = attention_kind(attention)
    H = check_int("heads", heads, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    fluct_samples = check_int("fluct_samples", fluct_samples, minimum=2)
    min_ess = check_nonnegative("min_ess", min_ess)
    if task is not None and (T, d, weights) != (16, 8, None):
        raise ValueError(
            f"T={T}, d={d}, weights={weights!r} with a task: these build the default task; give them or a task"
        )
    if task is None:
        w = tuple(0.6**k for k in range(H)) if weights is None else tuple(weights)
        if len(w) > T - 1:  # the default task copies lags 1..K
            what = f"heads={H}" if weights is None else f"weights={weights!r} ({len(w)} lags)"
            raise ValueError(f"{what} with T={T}: the default task copies lags 1..K, so expected K <= T - 1 = {T - 1}")
        task = MultiLagCopyTask(
            T=T, d=d, spans=tuple((k + 1,) for k in range(len(w))), weights=w, rotations="orthogonal"
        )
    check_heads_task(task)
    prior = Prior(1.0, 100.0, 400.0) if prior is None else check_prior(prior)
    P = check_grid("P", P)
    T, K = task.T, task.K
    ep = energy_params(task, prior, P)
    law = ROW_LAWS[kind.name](
        row_energy(ep, H, K),
        H,
        K,
        T,
        float(prior.sigma_A2),
        check_int("num_samples", num_samples, minimum=1000),
        jax.random.key(seed),
    )
    signs = kind.sign_symmetric
    rng = np.random.default_rng(seed)
    named = law.named_starts()
    out_mean = {"mass_max": [], "m_canon": [], "Q_canon": [], "m_sv": [], "capture": []}
    out_fix = {"m_fp": [], "Q_fp": [], "F": []}
    key, tol = ("invariants", 5e-3) if signs else ("x_canon", 0.02)

    def add(found, name, lam0, b, e):
        """Run one start; keep the fixed point if converged and new. The same well: linear, the same O(H) orbit;
        softmax, within the importance-sampling noise (~5e-3; distinct wells here differ by > 0.1 in a mass)."""
        law.set_proposal(*default_proposal(H, K))
        fp = _fixed_point(law, lam0, b, e)
        if fp is None or fp["residual"] > 1e-5:  # not a fixed point (minimisation stopped short)
            return
        if fp["ess"] < min_ess:  # softmax: Lambda rests on a handful of rows there, so the "well" is noise
            return
        lf = label_free(*unpack(fp["x"], H, K, xp=np), signs=signs)
        fp["x_canon"] = pack(lf["m_canon"], lf["Q_canon"])
        fp["invariants"] = invariants(fp["x"], H, K)
        dup = [g for g in found if np.max(np.abs(g[key] - fp[key])) < tol]
        if dup:
            dup[0]["starts"].append(name)
            return
        fp["starts"] = [name]
        # softmax: the number of distinct relabellings; linear: one orbit (its volume is not included, which
        # matters only between coexisting stable orbits of different shape)
        fp["multiplicity"] = 1 if signs else int(len(unique_rows(images(fp["x"], H, K, False), 5e-3)))
        found.append(fp)

    # forward in P from the named starts and the previous P's minima, then backward from the next P's minima
    # (continuation both ways tracks a metastable well to its spinodal, whichever side it lives on)
    founds = []
    for i in range(len(P)):
        b, e = float(ep["beta"][i]), float(ep["eps"][i])
        found = []
        add(found, "cold", np.zeros(n_stats(H, K)), b, e)
        for name, x0 in named.items():
            add(found, name, -np.asarray(law.dphi(jnp.asarray(x0), b, e)), b, e)
        for fp in founds[-1] if founds else []:
            if fp["stable"]:
                add(found, "previous P", fp["lam"], b, e)
        founds.append(found)
    for i in range(len(P) - 2, -1, -1):
        b, e = float(ep["beta"][i]), float(ep["eps"][i])
        for fp in founds[i + 1]:
            if fp["stable"] and not any(np.max(np.abs(g[key] - fp[key])) < 3 * tol for g in founds[i]):
                add(founds[i], "next P", fp["lam"], b, e)
    all_fp = []
    for i, Pi in enumerate(P):
        b, e = float(ep["beta"][i]), float(ep["eps"][i])
        found = founds[i]
        stable = [fp for fp in found if fp["stable"]]
        if not stable:
            raise RuntimeError(
                f"P={Pi}: no stable fixed point found (softmax: none with an importance-sampling "
                f"ESS >= min_ess={min_ess}; raise num_samples={num_samples})"
            )
        logwt = np.array([math.log(fp["multiplicity"]) - T * fp["F"] - 0.5 * fp["logdet"] for fp in stable])
        wt = np.exp(logwt - logwt.max())
        wt /= wt.sum()
        acc = {k: 0.0 for k in out_mean}
        for fp, wi in zip(stable, wt):
            fp["weight"] = float(wi)
            if signs and fp["basis"].shape[0] == fp["basis"].shape[1]:
                # linear, a point fixed by every head rotation (m = 0): its soft modes are the m directions,
                # which go soft at the continuous transition; integrate the saddle-point density there
                xs, pw = _linear_daniels(law, fp, b, e, min(fluct_samples, 2000), rng)
                fp["daniels_ess"] = float(1.0 / np.sum(pw**2))
            else:
                cov = np.linalg.inv(T * fp["hess"])
                z = rng.multivariate_normal(np.zeros(len(cov)), 0.5 * (cov + cov.T), size=fluct_samples, method="eigh")
                xs, pw = fp["x"] + z @ fp["basis"], np.full(fluct_samples, 1.0 / fluct_samples)
                if signs:  # linear: uniform over the O(H) orbit (Haar rotations of the heads)
                    O = ortho_group.rvs(H, size=fluct_samples, random_state=rng).reshape(-1, H, H)
                    xs = rotate(xs, O, H, K)
            lf = label_free(*unpack(xs, H, K, xp=np), signs=signs)
            for k in acc:
                acc[k] = acc[k] + wi * np.tensordot(pw, lf[k], axes=1)
        for k in acc:
            out_mean[k].append(acc[k])
        best = stable[int(np.argmax(wt))]
        mc, Qc = unpack(best["x_canon"], H, K, xp=np)
        out_fix["m_fp"].append(mc)
        out_fix["Q_fp"].append(Qc)
        out_fix["F"].append(T * best["F"])
        all_fp.append([{k: v for k, v in fp.items() if k not in ("basis", "hess")} for fp in found])
    mean = {k: np.asarray(v) for k, v in out_mean.items()}
    trans = {f"lag{k + 1}": first_crossing(P, mean["mass_max"][:, k], 3.0 / T) for k in range(K)}
    trans.update(_coexistence(P, all_fp, T))
    return HeadsCurve(
        kind.name,
        P,
        mean,
        {k: np.asarray(v) for k, v in out_fix.items()},
        all_fp,
        trans,
        {
            "T": T,
            "d": task.d,
            "H": H,
            "K": K,
            "weights": list(task.weights),
            "prior": prior.config(),
            "num_samples": num_samples,
            "seed": seed,
            "R": ep["R"].tolist(),
        },
    )
