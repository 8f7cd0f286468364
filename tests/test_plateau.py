"""Plateau lengths (bayesattn.theory.plateau_curve and the plateau experiment): the predicted plateau against an
independent integration of the same one-dimensional flow, its two asymptotic laws in their limits, the measured
plateau of gradient descent on the real network against the prediction, the crossing rule, and a tiny run of the
experiment."""

import jax
import numpy as np
import pytest
from scipy.integrate import solve_ivp

import bayesattn as ba
from bayesattn.bayes.theory import mode_action, mode_curve, plateau_curve
from bayesattn.experiments.plateau.compute import crossing

PRIOR = ba.Prior(1.0, 100.0, 400.0)


def _flow_time_by_ode(task, attention, P, theta0, theta_half, g):
    """Integrate dtheta/dt = -(sigma2 / (P g)) dPhi_0/dtheta with an ODE solver (an event at theta_half): the
    plateau by another method than the predicted curve's quadrature."""

    def rhs(t, y):
        h = 1e-5
        lo = max(y[0] - h, 0.0)
        d = (mode_action(task, PRIOR, attention, P, y[0] + h) - mode_action(task, PRIOR, attention, P, lo)) / (
            y[0] + h - lo
        )
        return [-PRIOR.sigma2 / (P * g) * float(d)]

    hit = lambda t, y: y[0] - theta_half
    hit.terminal = True
    sol = solve_ivp(rhs, (0.0, 1e6), [theta0], events=hit, rtol=1e-10, atol=1e-12, max_step=np.inf)
    return float(sol.t_events[0][0])


def test_softmax_plateau_equals_the_integrated_flow_and_the_bottleneck_law_near_the_spinodal():
    task = ba.CopyTask(T=32, d=8)
    c = plateau_curve(task, PRIOR, "softmax", [300.0, 600.0, 2000.0])
    P_s = c["P_s"]
    assert 380 < P_s < 440 and np.isinf(c["t_plateau"][0])  # below the spinodal a small init stays uniform
    for P, t, m_half in zip(c["P"][1:], c["t_plateau"][1:], c["m_half"][1:]):
        d_half = np.log(m_half * 31 / (1 - m_half))
        assert t == pytest.approx(_flow_time_by_ode(task, "softmax", P, 0.0, d_half, 31.0), rel=2e-3)
    # the saddle-node law (P - P_s)^(-1/2) is the limit P -> P_s
    near = plateau_curve(task, PRIOR, "softmax", P_s * (1 + np.array([1e-4, 1e-3, 1e-2])))
    ratio = np.asarray(near["t_plateau"]) / np.asarray(near["bottleneck"])
    assert abs(ratio[0] - 1) < 0.06 and abs(ratio[0] - 1) < abs(ratio[1] - 1) < abs(ratio[2] - 1)
    dP = np.asarray(near["P"]) - P_s
    assert np.polyfit(np.log(dP[:2]), np.log(near["t_plateau"][:2]), 1)[0] == pytest.approx(-0.5, abs=0.05)


def test_linear_plateau_diverges_as_one_over_P_minus_Pc():
    task = ba.CopyTask(T=16, d=8)
    P_c = ba.theory.linear_mode_critical_P(task, PRIOR, "marginal")
    c = plateau_curve(task, PRIOR, "linear", P_c * np.array([0.9, 1.001, 1.01, 1.1, 2.0]))
    assert np.isinf(c["t_plateau"][0]) and c["P_c"] == pytest.approx(P_c)
    t = np.asarray(c["t_plateau"][1:])
    assert np.all(np.diff(t) < 0)
    # critical slowing down: the pitchfork law log(...) / (2 lambda), lambda ~ (P - P_c), is the limit P -> P_c
    ratio = np.asarray(c["escape"][1:]) / t
    assert abs(ratio[0] - 1) < 1e-3 and abs(ratio[1] - 1) < 5e-3 and abs(ratio[-1] - 1) > abs(ratio[1] - 1)
    lam_times_t = t / np.asarray(c["escape"][1:])  # ~1, while t itself grows ~ 1 / (P - P_c) up to the log
    assert t[0] * (c["P"][1] - P_c) == pytest.approx(t[1] * (c["P"][2] - P_c), rel=0.5) and lam_times_t[0] > 0
    # the same flow integrated as an ODE in r (q = r^2 / T^2): from the median init overlap to r_half
    m_star = float(mode_curve(task, PRIOR, "linear", [c["P"][3]]).stable["m"][0])
    r0, r_half = 0.6744897501960817 * 1e-2, 0.5 * m_star * 16

    def rhs(t_, y):
        h = 1e-7
        q = lambda r: r * r / 256.0
        d = (
            mode_action(task, PRIOR, "linear", c["P"][3], q(y[0] + h))
            - mode_action(task, PRIOR, "linear", c["P"][3], q(y[0] - h))
        ) / (2 * h)
        return [-PRIOR.sigma2 / c["P"][3] * float(d)]

    hit = lambda t_, y: y[0] - r_half
    hit.terminal = True
    sol = solve_ivp(rhs, (0.0, 1e6), [r0], events=hit, rtol=1e-10, atol=1e-14)
    assert c["t_plateau"][3] == pytest.approx(float(sol.t_events[0][0]), rel=2e-3)


def test_gradient_descent_on_the_network_follows_the_predicted_plateau():
    """The prediction is for the reduced, symmetric-row flow at large n; the real network's gradient descent (on
    the marginal objective, from a small init) reaches half-way at the predicted flow time, within 5%, at T = 8
    and P = 1000 (a smooth crossover, away from any bottleneck)."""
    task = ba.CopyTask(T=8, d=8)
    pred = plateau_curve(task, PRIOR, "softmax", [1000.0])
    lr = 0.05
    res = ba.train(
        task.sample(jax.random.key(0), 1000),
        PRIOR,
        "softmax",
        jax.random.key(1),
        optimizer="gd",
        objective="marginal",
        lr=lr,
        steps=200,
        record_every=1,
    )
    t = lr * np.asarray(res.history["step"], float)
    measured = crossing(t, np.asarray(res.history["m"], float), pred["m_half"][0])
    assert measured == pytest.approx(pred["t_plateau"][0], rel=0.05)


def test_crossing_interpolates_between_records_and_says_never():
    t = np.array([0.0, 1.0, 2.0, 3.0])
    m = np.array([0.1, 0.2, 0.6, 0.7])
    assert crossing(t, m, 0.4) == pytest.approx(1.5)
    assert crossing(t, m, 0.05) == 0.0
    assert crossing(t, m, 0.9) is None and crossing(t, m, float("nan")) is None


def test_plateau_curve_bad_input():
    with pytest.raises(ValueError, match="boundary"):
        plateau_curve(ba.CopyTask(T=8, d=4, boundary="causal"), PRIOR, "softmax", [100.0])
    with pytest.raises(ValueError, match="init_scale"):
        plateau_curve(ba.CopyTask(T=8, d=4), PRIOR, "linear", [100.0], init_scale=-1.0)


def test_plateau_config_refuses_factors_below_a_critical_point_only():
    """P_over <= 1 is refused for linear attention, whose small init stays at L = 0 below its critical point, and
    accepted for softmax, whose uniform branch ends at a spinodal (the plateau is then infinite, a result)."""
    from bayesattn.experiments import get_experiment

    cls = get_experiment("plateau")
    with pytest.raises(ValueError, match=r"P_over=\[0\.5, 2\.0\].*linear"):
        cls.load_config("plateau", ['cases=[{attention="linear", T=4, P_over=[0.5, 2.0]}]'])
    cfg = cls.load_config("plateau", ['cases=[{attention="softmax", T=4, P_over=[0.5, 2.0]}]'])
    assert cfg.cases[0].P_over == [0.5, 2.0]


def test_langevin_plateau_between_its_two_limits():
    """The finite-temperature prediction (Euler-Maruyama paths of the one-dimensional flow) against two
    independent references: at a vanishing temperature, plateau_curve's quadrature of the same flow; at a huge
    one, where the drift does nothing before the noise gets there, the exit time of Brownian motion from
    (-r_half, r_half), whose law is the classical series P(tau <= t) = 1 - (4/pi) sum_k (-1)^k / (2k + 1)
    exp(-(2k + 1)^2 pi^2 s t / (8 a^2)) (s the variance per unit time): its median."""
    from scipy.optimize import brentq

    from bayesattn.bayes.theory import langevin_plateau

    task, prior = ba.CopyTask(T=16, d=8), ba.Prior(1.0, 100.0, 400.0)
    P = [228.0, 312.0, 831.0]
    cold = langevin_plateau(task, prior, "linear", P, temperature=1e-7, samples=1000)
    flow = plateau_curve(task, prior, "linear", P)
    np.testing.assert_allclose(cold["t_plateau"], flow["t_plateau"], rtol=0.03)
    tau = 1e4
    hot = langevin_plateau(task, prior, "linear", [312.0], temperature=tau, samples=4000, seed=1)
    a = hot["m_half"][0] * task.T  # r_half = m_half sqrt(T T_q)
    s = 2 * tau * prior.sigma2 / (312.0 * task.T)
    k = np.arange(60)

    def cdf(t):
        return 1 - 4 / np.pi * np.sum(
            (-1.0) ** k / (2 * k + 1) * np.exp(-((2 * k + 1) ** 2) * np.pi**2 * s * t / (8 * a * a))
        )

    median = brentq(lambda t: cdf(t) - 0.5, 1e-12, 10 * a * a / s)
    assert hot["t_plateau"][0] == pytest.approx(median, rel=0.06)
    # in between, the noise shortens the plateau most where gradient flow is slowest (near P_c)
    warm = langevin_plateau(task, prior, "linear", P, temperature=0.05, samples=1000)
    ratio = np.asarray(warm["t_plateau"]) / np.asarray(flow["t_plateau"])
    assert ratio[0] < ratio[1] < ratio[2] <= 1.05 and ratio[0] < 0.5
    with pytest.raises(ValueError, match="linear attention only"):
        langevin_plateau(task, prior, "softmax", P, temperature=0.05)
    with pytest.raises(ValueError, match="temperature"):
        langevin_plateau(task, prior, "linear", P, temperature=0.0)
    with pytest.raises(ValueError, match="samples"):
        langevin_plateau(task, prior, "linear", P, temperature=0.05, samples=1)


def test_tiny_plateau_run_writes_a_summary_and_a_checked_figure(tmp_path):
    from bayesattn.experiments import get_experiment
    from bayesattn.sweep import run_experiment

    cls = get_experiment("plateau")
    case = (
        '{attention="linear", T=4, P_over=[1.5, 2.0, 3.0, 4.0], gd_lr=0.01, gd_steps=300, adam_steps=200, records=50}'
    )
    methods = '["gd", "sgld", "adam", "flow", "flow_joint"]'
    cfg = cls.load_config("plateau", ["seeds=2", f"cases=[{case}]", "theory_points=12", f"methods={methods}"])
    summary = run_experiment(cls(), cfg, tmp_path, progress=False)
    (row,) = summary["cases"]
    assert row["P_star_is"] == "P_c" and set(row["methods"]) == {"gd", "sgld", "adam", "flow", "flow_joint"}
    assert row["methods"]["flow"]["time_unit"] == "flow time" and row["methods"]["flow_joint"]["seeds"] == 2
    assert row["methods"]["sgld"]["time_unit"] == "lr x steps" and row["methods"]["adam"]["time_unit"] == "steps"
    gd = row["methods"]["gd"]
    assert gd["seeds"] == 2 and len(gd["per_P"]) == 4 and gd["time_unit"] == "lr x steps"
    assert (tmp_path / "figures" / "plateau.png").is_file()


def test_gradient_flow_is_the_limit_of_gradient_descent_from_the_same_start():
    """diffrax's flow (bayesattn.dynamics.flow) and gradient descent are two independent integrators of one ODE:
    gd's Euler error at a fixed flow time halves when lr halves and is small against the flow's change; the
    flow method starts exactly where the seed's gradient-descent run starts (same data, same init)."""
    pytest.importorskip("diffrax")
    from bayesattn.dynamics.flow import gradient_flow
    from bayesattn.experiments.plateau.compute import seed_start

    task, attention, seed, P = ba.CopyTask(T=8, d=8), "softmax", 3, 600
    seqs, L0, V0 = seed_start(task, attention, seed, P, 1e-2)
    sw = ba.train_sweep(
        task,
        PRIOR,
        attention,
        [P],
        [seed],
        jax.random.key(0),
        optimizer="gd",
        lr=0.05,
        steps=2,
        init="small",
        init_scale=1e-2,
        record_every=1,
        objective="marginal",
    )
    np.testing.assert_allclose(np.asarray(sw.history["L"])[0, 0, 0], np.asarray(L0), rtol=0, atol=1e-15)
    post = ba.Posterior(seqs, attention, PRIOR)
    t_end = 4.0
    flow = gradient_flow(post, L0, np.linspace(0.0, t_end, 5))
    assert flow["ok"] and abs(flow["m"][-1] - flow["m"][0]) > 0.05
    errors = []
    for lr in (0.04, 0.02, 0.01):
        res = ba.train(
            seqs,
            PRIOR,
            attention,
            jax.random.key(1),
            optimizer="gd",
            objective="marginal",
            lr=lr,
            steps=int(round(t_end / lr)),
            record_every=int(round(t_end / lr)),
            init=np.asarray(L0),
        )
        errors.append(abs(float(res.history["m"][-1]) - flow["m"][-1]))
    assert errors[0] / errors[1] == pytest.approx(2.0, rel=0.2) and errors[1] / errors[2] == pytest.approx(2.0, rel=0.2)
    assert errors[-1] < 0.02 * abs(flow["m"][-1] - flow["m"][0])
    with pytest.raises(ValueError, match="objective='bad'"):
        gradient_flow(post, L0, [0.0, 1.0], objective="bad")
    with pytest.raises(ValueError, match="ts of shape"):
        gradient_flow(post, L0, [1.0, 0.5])
