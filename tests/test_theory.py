"""Tests of the order-parameter theory against independent references: docs/model.md's checked numbers (its theory
column, computed by the large-deviation reduction before this code was written), exact laws (Beta law of the linear cosine, prior means by symmetry), brute-force Monte Carlo
of one softmax row, and exact-posterior MCMC (ba.sample)."""

from __future__ import annotations

import functools
import json
import warnings

import jax
import numpy as np
import pytest
from scipy import integrate

import bayesattn as ba
from bayesattn import theory as th

D_TOK, P_REF = 8, 1000


def prior_at(beta, P=P_REF, d=D_TOK, **kw):
    """docs/model.md's checked setting: sigma2 = P d / (2 beta)."""
    return ba.Prior(kw.get("sigma_A2", 1.0), kw.get("sigma_V2", 100.0), P * d / (2 * beta))


# --- docs/model.md section 4 table (LDP / Beta-law column), to 0.005 ----------------------------------


@pytest.mark.parametrize(
    "T, betas, ref",
    [
        (8, [5, 10], [0.247, 0.414]),
        (32, [4, 6, 7, 8, 12, 20], [0.037, 0.044, 0.052, 0.207, 0.318, 0.402]),
    ],
)
def test_softmax_reproduces_checked_table(T, betas, ref):
    task = ba.CopyTask(T=T, d=D_TOK)
    got = [th.phase_curve(task, prior_at(b), "softmax", [P_REF]).stable["m"][0] for b in betas]
    np.testing.assert_allclose(got, ref, atol=0.005)


def test_linear_reproduces_checked_table():
    task = ba.CopyTask(T=16, d=D_TOK)
    betas = [2, 4, 8, 10, 12, 16]
    ref = [0.005, 0.008, 0.043, 0.186, 0.330, 0.500]
    got = [th.phase_curve(task, prior_at(b), "linear", [P_REF]).mean["u"][0] for b in betas]
    np.testing.assert_allclose(got, ref, atol=0.005)


# --- linear: exact laws ---------------------------------------------------------------------------


def test_linear_mean_u_matches_beta_law_quadrature():
    """q >> eps (huge sigma_V2): log p(u) = ((D-3)/2) log(1-u) - log(u)/2 + T beta u, integrated by scipy."""
    T = 8
    task = ba.CopyTask(T=T, d=D_TOK)
    D = T * T
    for beta in (2.0, 4.0, 6.0):
        pr = prior_at(beta, sigma_V2=1e9)
        got = th.phase_curve(task, pr, "linear", [P_REF]).mean["u"][0]
        logf = lambda u: 0.5 * (D - 3) * np.log1p(-u) - 0.5 * np.log(u) + T * beta * u  # noqa: E731
        c = logf(max(1e-9, 1 - (D - 3) / (2 * T * beta)))
        num = integrate.quad(lambda u: u * np.exp(logf(u) - c), 0, 1, limit=400, points=[0.01, 0.1, 0.5])[0]
        den = integrate.quad(lambda u: np.exp(logf(u) - c), 0, 1, limit=400, points=[0.01, 0.1, 0.5])[0]
        assert abs(got - num / den) < 2e-3, (beta, got, num / den)


@pytest.mark.parametrize("boundary", ["cyclic", "causal"])
def test_linear_prior_limit_is_beta_mean(boundary):
    """beta -> 0: u ~ Beta(1/2, (D-1)/2) exactly, mean 1/D (D = free logits in query rows)."""
    task = ba.CopyTask(T=6, d=D_TOK, boundary=boundary)
    D = int((task.key_mask & task.query_mask[:, None]).sum())
    got = th.phase_curve(task, ba.Prior(1.0, 1e9, 1e9), "linear", [10.0]).mean["u"][0]
    assert abs(got - 1.0 / D) < 5e-3 / D  # quadrature on 2000 cosine nodes


def test_linear_critical_point_and_exponent():
    """Second order, P_c -> sigma2 T / d as T grows (finite-T: (T^2 - 3) sigma2 / (T d) for q >> eps);
    u* grows linearly in P - P_c."""
    pr = ba.Prior(1.0, 100.0, 400.0)
    ratios = []
    for T in (8, 16, 32):
        pc = th.phase_curve(ba.CopyTask(T=T, d=D_TOK), pr, "linear", np.linspace(50, 4000, 80))
        assert pc.transition["order"] == "second"
        ratios.append(pc.transition["P_c"] / (pr.sigma2 * T / D_TOK))
    assert all(abs(r - 1) < 0.08 for r in ratios) and abs(ratios[-1] - 1) < 0.02
    assert abs(ratios[-1] - 1) < abs(ratios[0] - 1)
    ce = th.critical_exponent(ba.CopyTask(T=16, d=D_TOK), pr)
    assert abs(ce["exponent"] - 1.0) < 0.05


def test_linear_landscape_single_well_bifurcates():
    pr = ba.Prior(1.0, 100.0, 400.0)
    task = ba.CopyTask(T=16, d=D_TOK)
    below = th.landscape(task, pr, "linear", 500.0)
    above = th.landscape(task, pr, "linear", 1500.0)
    assert below["x"][np.argmin(below["S"])] < 0.01 and above["x"][np.argmin(above["S"])] > 0.2
    assert np.all(np.diff(below["S"]) > 0)  # single well at u = 0


# --- softmax -------------------------------------------------------------------------------------


def test_softmax_row_cgf_matches_brute_force():
    """Lambda(h, g) and its gradient (m, q) from the table vs direct Monte Carlo of full rows (other seed)."""
    T = 16
    task = ba.CopyTask(T=T, d=D_TOK)
    tab = th.softmax_action_table(task, ba.Prior(1.0, 100.0, 400.0), 10.0)
    z = np.asarray(jax.random.normal(jax.random.key(123), (20000, T - 1)))
    S1, S2 = np.exp(z).sum(1), np.exp(2 * z).sum(1)
    x = np.linspace(-10, 20, 700)
    for i, j in [(60, 60), (120, 90), (180, 30), (30, 110)]:
        h, g = tab.h[i], tab.g[j]
        e = np.exp(x)[:, None]
        a, b = e / (e + S1), (e**2 + S2) / (e + S1) ** 2
        lw = h * a + g * b - 0.5 * x[:, None] ** 2
        M = lw.max()
        w = np.exp(lw - M)
        Lam = np.log(w.sum() * (x[1] - x[0]) / np.sqrt(2 * np.pi) / len(S1)) + M
        assert abs(tab.Lam[i, j] - Lam) < 0.04
        assert abs(tab.m[i, j] - (w * a).sum() / w.sum()) < 3e-3
        assert abs(tab.q[i, j] - (w * b).sum() / w.sum()) < 3e-3


# the prior's density is broad at beta -> 0 and reaches the dual grid's edge (a warning about the posterior means):
# only the minimum is checked here
@pytest.mark.filterwarnings("ignore:theory. the posterior density reaches the edge:UserWarning")
def test_softmax_prior_limit_m_is_one_over_T():
    """beta -> 0 and no Occam term: the minimum is the prior mean, m = 1/T by exchangeability of keys."""
    T = 8
    pc = th.phase_curve(ba.CopyTask(T=T, d=D_TOK), ba.Prior(1.0, 1e12, 1e9), "softmax", [10.0])
    assert abs(pc.stable["m"][0] - 1.0 / T) < 2e-3


def test_softmax_transition_order_depends_on_T():
    """sigma2 = 400 (beta = P/100): crossover at T = 8, narrow first-order window at T = 32, wider at T = 64
    with the jump between P = 800 (low) and 1000 (high)."""
    pr = ba.Prior(1.0, 100.0, 400.0)
    P = np.arange(600.0, 1201.0, 10.0)
    pcs = {T: th.phase_curve(ba.CopyTask(T=T, d=D_TOK), pr, "softmax", P) for T in (8, 32, 64)}
    assert pcs[8].transition["order"] == "crossover"
    for T in (32, 64):
        tr = pcs[T].transition
        assert tr["order"] == "first" and tr["spinodals"][0] <= tr["P_c"] <= tr["spinodals"][1]
    w32 = np.diff(pcs[32].transition["spinodals"])[0]
    w64 = np.diff(pcs[64].transition["spinodals"])[0]
    assert w64 > w32
    st = pcs[64].stable["m"]
    assert st[P == 800][0] < 3 / 64 and st[P == 1000][0] > 0.15
    # inside the coexistence window the posterior mean lies between the branches (a mixture of the two wells)
    mean = pcs[64].mean["m"]
    assert np.all(np.isfinite(mean))
    lo_s, hi_s = pcs[64].transition["spinodals"]
    checked = 0
    for i, p in enumerate(P):
        ms = [b["m"][b["P"] == p][0] for b in pcs[64].branches if np.any(b["P"] == p)]
        if lo_s < p < hi_s and len(ms) >= 2:
            assert min(ms) - 2e-3 <= mean[i] <= max(ms) + 2e-3, (p, ms, mean[i])
            checked += 1
    assert checked >= 3  # the window holds several grid points with two branches
    # and the mean rises across the window, from near the low branch to near the high branch
    inside = (P > lo_s) & (P < hi_s)
    assert mean[inside][-1] > mean[inside][0]


def test_softmax_landscape_double_well_in_window():
    pr = ba.Prior(1.0, 100.0, 400.0)
    pc = th.phase_curve(ba.CopyTask(T=64, d=D_TOK), pr, "softmax", np.arange(850.0, 1051.0, 10.0))
    Pc = pc.transition["P_c"]
    L = th.landscape(ba.CopyTask(T=64, d=D_TOK), pr, "softmax", Pc, grid=np.linspace(0.01, 0.4, 120))
    S = L["S"]
    ok = np.isfinite(S)
    s = S[ok]
    mins = np.flatnonzero((s[1:-1] < s[:-2]) & (s[1:-1] < s[2:])) + 1
    assert len(mins) == 2
    assert abs(s[mins[0]] - s[mins[1]]) < 1.0  # equal depth at the binodal (grid resolution)


def _wells(task, prior, P, grid):
    """Local minima (positions in m) of the landscape S(m) = T min_q Phi(m, q): Newton at fixed m, a solver
    independent of the minimum search that builds the phase curve."""
    with warnings.catch_warnings():  # the grid's lowest m values, which the table does not reach (NaN)
        warnings.filterwarnings("ignore", "landscape: S is NaN", RuntimeWarning)
        L = th.landscape(task, prior, "softmax", P, grid=grid)
    s = L["S"]
    k = np.flatnonzero((s[1:-1] < s[:-2]) & (s[1:-1] < s[2:])) + 1
    return L["x"][k]


def test_softmax_finite_size_scaling_fields_against_landscape():
    """T = 64 (window ~ P 890-1120 on a 10-step grid): `jump` is the distance between the two wells of the
    landscape at the binodal; `window` = (P_high - P_low) / P_c with P_low, P_high the grid spinodals, each of
    which the landscape confirms (one well one grid step outside, two wells at the spinodal); `width` is the
    inverse steepest slope of the mean against log P, which at a first-order transition is below the jump's
    own scale 1 / jump; T = 8 is a crossover with zero jump and no window."""
    pr = ba.Prior(1.0, 100.0, 400.0)
    task = ba.CopyTask(T=64, d=D_TOK)
    P = np.arange(850.0, 1161.0, 10.0)
    f = th.finite_size_scaling(task, pr, "softmax", P, [8, 64])
    assert f["order"] == ["crossover", "first"] and f["jump"][0] == 0.0 and np.isnan(f["window"][0])
    Pc = f["P_c"][1]
    grid = np.linspace(0.005, 0.4, 400)  # its first values lie below the row table's reach (S NaN, a warning)
    w = _wells(task, pr, Pc, grid)
    assert len(w) == 2 and abs(f["jump"][1] - (w[1] - w[0])) < 0.005, (f["jump"], w)
    lo, hi = th.phase_curve(task, pr, "softmax", P).transition["spinodals"]
    assert abs(f["window"][1] - (hi - lo) / Pc) < 1e-12

    # the copy well appears at lo, the uniform-like well (m < 0.1) disappears after hi (a flat well can show
    # grid ripples, so wells are counted on each side of m = 0.1)
    def sides(p):
        x = _wells(task, pr, p, grid)
        return int(np.any(x < 0.1)), int(np.any(x > 0.1))

    assert sides(lo - 10.0) == (1, 0) and sides(lo) == (1, 1)
    assert sides(hi) == (1, 1) and sides(hi + 10.0) == (0, 1)
    assert 0 < f["width"][1] < 1.0 / f["jump"][1]


# --- bookkeeping and input validation --------------------------------------------------------------


def test_to_dict_roundtrip():
    pr = ba.Prior(1.0, 100.0, 400.0)
    pc = th.phase_curve(ba.CopyTask(T=32, d=D_TOK), pr, "softmax", np.arange(700.0, 780.0, 10.0))
    d = json.loads(json.dumps(pc.to_dict()))
    back = th.PhaseCurve.from_dict(d)
    np.testing.assert_allclose(back.stable["m"], pc.stable["m"])
    assert back.transition == pc.transition and len(back.branches) == len(pc.branches)
    pdg = th.phase_diagram(ba.CopyTask(T=8, d=D_TOK), pr, "linear", np.linspace(100, 1500, 30), {"T": [8, 12]})
    back = th.PhaseDiagram.from_dict(json.loads(json.dumps(pdg.to_dict())))
    np.testing.assert_allclose(back.P_c, pdg.P_c)
    assert back.order == ["second", "second"]
    # the heat map: per T the phase curve's posterior mean of u, the same numbers as phase_curve gives
    assert pdg.mean.shape == (2, 30)
    np.testing.assert_allclose(back.mean, pdg.mean)
    one = th.phase_curve(ba.CopyTask(T=12, d=D_TOK), pr, "linear", np.linspace(100, 1500, 30))
    np.testing.assert_allclose(pdg.mean[1], one.mean["u"], rtol=1e-10)


@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(P_values=[]), "non-empty"),
        (dict(P_values=[10, 5]), "increasing"),
        (dict(P_values=[0, 5]), "positive"),
        (dict(P_values=[1, float("nan")]), "positive"),
        # a bool was read as P = 1 and a text parsed as a number
        (dict(P_values=[True]), r"P_values item=True: expected a positive number \(not a bool or a text\)"),
        (dict(P_values=[True, 2]), r"P_values item=True"),
        (dict(P_values=["100", "200"]), r"P_values item='100'"),
        (dict(attention="relu"), "attention"),
        (dict(task=ba.CopyTask(T=8, d=8, tokens="onehot", boundary="causal")), "covers"),
        (dict(prior=(1, 2, 3)), "Prior"),
    ],
)
def test_bad_input(bad, match):
    args = dict(task=ba.CopyTask(T=8, d=8), prior=ba.Prior(), attention="linear", P_values=[100, 200])
    args.update(bad)
    with pytest.raises(ValueError, match=match):
        th.phase_curve(args["task"], args["prior"], args["attention"], args["P_values"])


def test_finite_size_scaling_names_an_unknown_option():
    """An unknown option named phase_curve, the inner function it is passed on to."""
    with pytest.raises(
        TypeError, match=r"finite_size_scaling\(\) got unexpected keyword argument\(s\) 'foo': .*nh, ng"
    ):
        th.finite_size_scaling(ba.CopyTask(T=8, d=8), ba.Prior(), "linear", [100, 200], [8, 12], foo=1)


def test_bad_vary():
    with pytest.raises(ValueError, match="vary"):
        th.phase_diagram(ba.CopyTask(T=8, d=8), ba.Prior(), "linear", [100, 200], {"sigma_V2": [1, 2]})
    with pytest.raises(ValueError, match="increasing"):
        th.phase_diagram(ba.CopyTask(T=8, d=8), ba.Prior(), "linear", [100, 200], {"T": [8, 6]})


# --- against exact-posterior MCMC -----------------------------------------------------------------


def _mcmc_mean(task, attention, prior, P, key, init="cold", chains=2, warmup=300, draws=300):
    data = task.sample(jax.random.key(key), P)
    post = ba.Posterior(data, attention, prior)
    s = ba.sample(post, jax.random.key(key + 1), num_chains=chains, num_warmup=warmup, num_samples=draws, init=init)
    name = "m" if attention == "softmax" else "u"
    return float(np.mean(s.order_parameters[name])), np.asarray(s.order_parameters[name]).mean(axis=1)


@pytest.mark.parametrize("attention, beta", [("linear", 12.0), ("softmax", 5.0)])
def test_theory_matches_short_mcmc(attention, beta):
    T = 8
    task = ba.CopyTask(T=T, d=D_TOK)
    pr = prior_at(beta)
    pc = th.phase_curve(task, pr, attention, [P_REF])
    theo = pc.mean["m" if attention == "softmax" else "u"][0]
    mc, _ = _mcmc_mean(task, attention, pr, P_REF, key=7)
    assert abs(theo - mc) < 0.04, (theo, mc)


# beta = P d / (2 sigma2) grids (sigma2 = 400, d = 8: P = 100 beta) spanning each transition; at T = 32 three
# points lie inside the theory's coexistence window (P ~ 736-748)
SLOW_BETAS = {
    (8, "softmax"): np.linspace(1.0, 14.0, 12),
    (32, "softmax"): np.array([3, 4, 5, 6, 6.5, 7, 7.2, 7.37, 7.42, 7.47, 7.6, 8, 10, 13, 16.0]),
    (8, "linear"): np.linspace(1.0, 10.0, 12),
    (32, "linear"): np.linspace(8.0, 30.0, 12),
}


SLOW_CASES = [(T, att, float(b)) for (T, att), bs in SLOW_BETAS.items() for b in bs]


@functools.cache
def _slow_theory(T, attention):
    """The theory on the test's P grid (means, branches) and on a fine grid (the coexistence window)."""
    pr = ba.Prior(1.0, 100.0, 400.0)
    task = ba.CopyTask(T=T, d=D_TOK)
    P = np.round(SLOW_BETAS[(T, attention)] * 2 * pr.sigma2 / D_TOK)
    fine = th.phase_curve(task, pr, attention, np.linspace(P[0], P[-1], 400))
    return P, th.phase_curve(task, pr, attention, P), fine


@pytest.mark.slow
@pytest.mark.parametrize("T, attention, beta", SLOW_CASES)
def test_theory_vs_mcmc_curves(T, attention, beta):
    """>= 12 values of P per curve spanning each transition (one test per P), one data set per P, NUTS
    (4 chains x 400 warmup + 600 draws) from cold and hot starts. Everywhere, the theory's posterior mean
    (the saddle-point density integrated over the dual grid) is within 0.03 of the MCMC mean. Inside the
    coexistence window: where cold and hot chains stay apart (no crossing in the run), the cold ones sit
    within 0.03 of the low branch and the hot ones within 0.03 of the high branch; where they agree (the
    chains cross the barrier, as at T = 32) their common mean is the theory's mean."""
    pr = ba.Prior(1.0, 100.0, 400.0)
    task = ba.CopyTask(T=T, d=D_TOK)
    P, pc, fine = _slow_theory(T, attention)
    i = int(np.argmin(np.abs(P - round(beta * 2 * pr.sigma2 / D_TOK))))
    p = int(P[i])
    name = "m" if attention == "softmax" else "u"
    cold, _ = _mcmc_mean(task, attention, pr, p, key=100 + p, init="cold", chains=4, warmup=400, draws=600)
    hot, _ = _mcmc_mean(task, attention, pr, p, key=100 + p, init="hot", chains=4, warmup=400, draws=600)
    assert abs(0.5 * (cold + hot) - pc.mean[name][i]) < 0.03, (p, cold, hot, pc.mean[name][i])
    tr = fine.transition
    if tr["order"] == "first" and tr["spinodals"][0] <= p <= tr["spinodals"][1] and abs(cold - hot) > 0.03:
        ms = sorted(np.interp(p, b["P"], b[name]) for b in fine.branches if b["P"][0] <= p <= b["P"][-1])
        assert abs(cold - ms[0]) < 0.03 and abs(hot - ms[-1]) < 0.03, (p, cold, hot, ms)


def test_softmax_curve_warns_where_no_minimum_was_found():
    """A P value without any minimum of the action must not pass silently: the transition read off such a
    curve can be an artefact (it was, for tempered priors with sigma_A2 <= 0.05 over a wide P range)."""
    from bayesattn.bayes.theory.curves import _softmax_curve

    P = np.array([100.0, 200.0, 300.0])
    minima = [[(0.04, 0.04, 1.0, 0.0)], [], [(0.3, 0.1, 0.5, 0.0)]]
    means = np.full((3, 5), 0.1)  # m, q, u, test error, largest cell share
    with pytest.warns(UserWarning, match=r"no minimum of the action found at 1 of 3 P values \(first P = 200\)"):
        _softmax_curve(P, minima, False, means, np.zeros(3), 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _softmax_curve(P, [minima[0], minima[0], minima[2]], False, means, np.zeros(3), 1.0)


@pytest.mark.slow
def test_tempered_prior_out_of_reach_warns():
    """End to end: T = 8 with the prior tempered by tau = 0.02 over P up to 3000 is outside what the dual-grid
    table resolves; the theory says so instead of reporting a transition (and that candidate minima lie on the
    grid's edge)."""
    with (
        pytest.warns(UserWarning, match="no minimum of the action"),
        pytest.warns(UserWarning, match="edge of the dual"),
    ):
        th.phase_curve(ba.CopyTask(T=8, d=8), ba.Prior(0.02, 2.0, 8.0), "softmax", np.arange(100.0, 3000.0, 20.0))


def test_softmax_landscape_says_where_the_table_does_not_reach():
    """m close to 0 or 1 at T = 4 with a small row table: the profile's solve does not converge there. S was NaN
    there without a word; now a warning names how many values and where, and a grid of only such values is refused.
    The reachable middle keeps its value: the same as on a grid of that value alone."""
    task, pr = ba.CopyTask(T=4, d=2), ba.Prior()
    with pytest.warns(RuntimeWarning, match=r"S is NaN at 2 of 3 grid values of m \(from 0.001 to 0.999\)"):
        S = th.landscape(task, pr, "softmax", 100.0, grid=[0.001, 0.5, 0.999], num_samples=200)["S"]
    assert np.isnan(S[[0, 2]]).all() and S[1] == 0.0
    with pytest.raises(ValueError, match=r"grid=\[0.001, 0.999\]: the row table of num_samples=200 reaches none"):
        th.landscape(task, pr, "softmax", 100.0, grid=[0.001, 0.999], num_samples=200)
