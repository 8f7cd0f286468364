"""Tests of bayesattn.training against independent references: the direct joint density, a scipy optimisation
of the closed-form profile posterior, NUTS on the closed form, exact emergence of a logistic curve."""

import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import scipy.optimize as so

import bayesattn as ba
from bayesattn import training as tr
from bayesattn._json import to_plain

SMALL = dict(T=4, d=2)


def small_problem(attention="softmax", P=100, sigma2=1.0, boundary="cyclic", seed=0):
    task = ba.CopyTask(**SMALL, boundary=boundary)
    prior = ba.Prior(1.0, 10.0, sigma2)
    data = task.sample(jax.random.key(seed), P)
    return task, prior, data


# ---------------------------------------------------------------------------------------------------
# the objective is minus the joint log density (direct O(P) reference), per row and times sigma2
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("attention", ["softmax", "linear"])
@pytest.mark.parametrize("boundary", ["cyclic", "causal"])
def test_objective_is_scaled_minus_joint_log_density(attention, boundary):
    task, prior, data = small_problem(attention, P=37, sigma2=2.0, boundary=boundary)
    post = ba.Posterior(data, attention, prior)
    k = jax.random.split(jax.random.key(3), 4)
    pts = [(jax.random.normal(k[i], (4, 4)), jax.random.normal(k[i + 1], (2, 2))) for i in (0, 2)]
    scale = prior.sigma2 / data.n
    J = [tr.training_objective(L, V, post) for L, V in pts]
    ref = [-scale * ba.joint_log_density(L, V, data, attention, prior) for L, V in pts]
    np.testing.assert_allclose(J[0] - J[1], ref[0] - ref[1], rtol=1e-10, atol=1e-12)
    gJ = jax.grad(tr.training_objective, argnums=(0, 1))(*pts[0], post)
    gref = jax.grad(lambda L, V: -scale * ba.joint_log_density(L, V, data, attention, prior), argnums=(0, 1))(*pts[0])
    for a, b in zip(gJ, gref):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    # the minibatch path on all sequences is the same squared error
    L, V = pts[0]
    sq_direct = tr.objective.batch_sq_error(task, attention, L, V, data.X, data.Y)
    np.testing.assert_allclose(sq_direct, tr.objective.sq_error(post, L, V), rtol=1e-10)


# ---------------------------------------------------------------------------------------------------
# Adam reaches the joint MAP; reference: scipy on the closed-form profile max_V log p(L, V, D)
# ---------------------------------------------------------------------------------------------------


def profile_map(post, L0):
    """argmax_L of max_V log p(L, V, D) = log p(L, D) + log p(V* | L, D), V* = conditional mode.

    log p(V* | L, D) = -(d_out/2) log det(2 pi cov) (Gaussian rows at their mean)."""

    def neg(x):
        L = x.reshape(post.T, post.T)
        _, cov = post.readout_posterior(L)
        return -(post.log_density(L) - 0.5 * post.d_out * jnp.linalg.slogdet(2 * np.pi * cov)[1])

    vg = jax.jit(jax.value_and_grad(neg))
    hess = jax.jit(jax.hessian(neg))
    res = so.minimize(
        lambda x: [np.asarray(a) for a in vg(jnp.asarray(x))],
        np.ravel(L0),
        jac=True,
        hess=lambda x: np.asarray(hess(jnp.asarray(x))),
        method="trust-exact",
        options={"gtol": 1e-9},
    )
    L = res.x.reshape(post.T, post.T)
    return L, np.asarray(post.readout_posterior(jnp.asarray(L))[0])


@pytest.mark.parametrize("attention", ["softmax", "linear"])
def test_adam_reaches_joint_map(attention):
    task, prior, data = small_problem(attention)
    post = ba.Posterior(data, attention, prior)
    sched = optax.exponential_decay(3e-2, 12000, 0.003)  # anneal so that Adam settles on the mode
    res = ba.train(data, prior, attention, jax.random.key(1), lr=sched, steps=12000, init_scale=0.3, record_every=1000)
    L_ref, V_ref = profile_map(post, 0.5 * task.target_pattern)
    L, V = res.final_params
    if attention == "linear" and np.sum(L * L_ref) < 0:  # (L, V) -> (-L, -V) is an exact symmetry
        L, V = -L, -V
    np.testing.assert_allclose(L, L_ref, atol=2e-5)
    np.testing.assert_allclose(V, V_ref, atol=2e-5)
    assert res.failure is None


# ---------------------------------------------------------------------------------------------------
# Langevin samples the posterior: order parameters against NUTS on the closed form (V integrated out)
# ---------------------------------------------------------------------------------------------------


def nuts_order_parameter(post, key, name):
    """NUTS on the closed form: draws of ``name`` (chains, draws) and their ESS."""
    s = ba.sample(post, key, num_chains=4, num_warmup=400, num_samples=1500)
    return np.asarray(s.order_parameters[name]), float(s.diagnostics[name]["ess_bulk"])


def langevin_order_parameter(data, prior, attention, name, lr, steps, chains=4, burn=100):
    from numpyro.diagnostics import effective_sample_size

    x = np.array(
        [
            ba.train(
                data,
                prior,
                attention,
                jax.random.key(100 + c),
                optimizer="langevin",
                lr=lr,
                steps=steps,
                record_every=steps // 500,
            ).history[name][burn:]
            for c in range(chains)
        ]
    )
    return x, float(effective_sample_size(x[:, :, None])[0])


def check_same_law(x, ess_x, y, ess_y, std_rtol):
    se = np.sqrt(x.var() / ess_x + y.var() / ess_y)
    assert abs(x.mean() - y.mean()) < 4 * se + 2e-3, (x.mean(), y.mean(), se)
    assert abs(x.std() / y.std() - 1) < std_rtol, (x.std(), y.std())


@pytest.mark.parametrize("attention,name,P", [("softmax", "m", 20)])
def test_langevin_matches_nuts(attention, name, P):
    task, prior, data = small_problem(attention, P=P, sigma2=4.0)
    post = ba.Posterior(data, attention, prior)
    y, ess_y = nuts_order_parameter(post, jax.random.key(5), name)
    x, ess_x = langevin_order_parameter(data, prior, attention, name, lr=0.05, steps=50000)
    assert ess_x > 100
    check_same_law(x, ess_x, y, ess_y, std_rtol=0.15)


@pytest.mark.slow
@pytest.mark.parametrize("attention,name,P", [("softmax", "m", 50), ("linear", "u", 50), ("linear", "u", 10)])
def test_langevin_matches_nuts_slow(attention, name, P):
    task, prior, data = small_problem(attention, P=P, sigma2=4.0)
    post = ba.Posterior(data, attention, prior)
    y, ess_y = nuts_order_parameter(post, jax.random.key(5), name)
    x, ess_x = langevin_order_parameter(data, prior, attention, name, lr=0.02, steps=200000)
    check_same_law(x, ess_x, y, ess_y, std_rtol=0.08)


@pytest.mark.slow
def test_langevin_matches_nuts_canonical():
    """T = 16, d = 8, P = 1000, canonical prior (near where the copy head appears), default Langevin lr."""
    task, prior = ba.CopyTask(T=16, d=8), ba.Prior(1.0, 100.0, 400.0)
    data = task.sample(jax.random.key(0), 1000)
    y, ess_y = nuts_order_parameter(ba.Posterior(data, "softmax", prior), jax.random.key(1), "m")
    x = np.array(
        [
            ba.train(
                data, prior, "softmax", jax.random.key(10 + c), optimizer="langevin", steps=40000, record_every=40
            ).history["m"][250:]
            for c in range(4)
        ]
    )
    from numpyro.diagnostics import effective_sample_size

    ess_x = float(effective_sample_size(x[:, :, None])[0])
    assert ess_x > 80
    check_same_law(x, ess_x, y, ess_y, std_rtol=0.25)


# ---------------------------------------------------------------------------------------------------
# determinism, vmap == loop, minibatches
# ---------------------------------------------------------------------------------------------------


def test_same_key_same_run_and_different_key_differs():
    task, prior, data = small_problem("softmax")
    kw = dict(optimizer="langevin", lr=0.02, steps=300, record_every=50)
    a = ba.train(data, prior, "softmax", jax.random.key(7), **kw)
    b = ba.train(data, prior, "softmax", jax.random.key(7), **kw)
    c = ba.train(data, prior, "softmax", jax.random.key(8), **kw)
    for k in ("loss", "test_loss", "m", "L"):
        np.testing.assert_array_equal(a.history[k], b.history[k])
    assert not np.allclose(a.history["L"][-1], c.history["L"][-1])
    np.testing.assert_array_equal(a.history["step"], np.arange(0, 301, 50))


@pytest.mark.parametrize(
    "kw",
    [
        dict(optimizer="adam", init="hot", runs_per_batch=3),  # lax.map over batches of 3 runs, one left over
        dict(optimizer="langevin", init="small", lr=0.02, runs_per_batch=100),  # one vmap over all runs
        dict(optimizer="adam", init="small", batch_size=8, runs_per_batch=1),  # sequential, minibatches
    ],
)
def test_sweep_equals_loop(kw):
    runs_per_batch = kw.pop("runs_per_batch")
    task = ba.CopyTask(**SMALL)
    prior = ba.Prior(1.0, 10.0, 1.0)
    Ps, seeds, key = [12, 30], [0, 3], jax.random.key(11)
    common = dict(steps=230, record_every=100, test_size=16, **kw)
    sw = ba.train_sweep(task, prior, "softmax", Ps, seeds, key, runs_per_batch=runs_per_batch, **common)
    assert sw.history["m"].shape == (2, 2, 4) and sw.history["L"].shape == (2, 2, 4, 4, 4)
    for j, s in enumerate(seeds):
        data_key, run_key = jax.random.split(jax.random.fold_in(key, s))
        full = task.sample(data_key, max(Ps))
        for i, P in enumerate(Ps):
            one = ba.train(ba.Dataset(full.X[:P], full.Y[:P], task), prior, "softmax", run_key, **common)
            for k in ("step", "loss", "test_loss", "objective", "m", "q", "u", "L"):
                np.testing.assert_allclose(sw.history[k][i, j], one.history[k], rtol=1e-9, atol=1e-12, err_msg=k)
            np.testing.assert_allclose(sw.final_V[i, j], one.final_params[1], rtol=1e-9, atol=1e-12)
            assert sw.run(i, j).final_order_parameters == pytest.approx(one.final_order_parameters, rel=1e-9)
    json.dumps(sw.to_dict(max_L_records=2))
    with pytest.raises(ValueError, match=r"i_P=-1: expected an integer in 0\.\.1"):
        sw.run(-1, 0)  # Python's negative index would pick the last P silently
    with pytest.raises(ValueError, match=r"i_seed=2: expected an integer in 0\.\.1"):
        sw.run(0, 2)


def test_hot_init_starts_on_the_copy_pattern():
    task, prior, data = small_problem("softmax")
    res = ba.train(data, prior, "softmax", jax.random.key(0), init="hot", steps=1, record_every=1, lr=1e-12)
    assert res.history["m"][0] == pytest.approx(0.9, abs=1e-12)  # default hot logit: source weight 0.9
    res = ba.train(data, prior, "linear", jax.random.key(0), init="hot", steps=1, record_every=1, lr=1e-12)
    assert res.history["m"][0] == pytest.approx(1.0) and res.history["u"][0] == pytest.approx(1.0)
    # an explicit (L, V) init is used as given
    L0, V0 = np.full((4, 4), 0.3), np.eye(2)
    res = ba.train(data, prior, "softmax", jax.random.key(0), init=(L0, V0), steps=1, record_every=1, lr=1e-12)
    np.testing.assert_allclose(res.history["L"][0], L0)


def test_initial_loss_and_trained_loss():
    """At L = 0, V ~ 0 the squared error per coordinate is E|y|^2 / d = 1 (Gaussian tokens); well above the
    transition training drives train and test loss far below it."""
    task = ba.CopyTask(T=8, d=4)
    data = task.sample(jax.random.key(0), 2000)
    res = ba.train(
        data, ba.Prior(1.0, 100.0, 50.0), "softmax", jax.random.key(1), steps=1500, init_scale=1e-6, test_size=2000
    )
    assert res.history["loss"][0] == pytest.approx(float(jnp.mean(data.Y**2)), rel=1e-4)
    assert res.history["test_loss"][0] == pytest.approx(1.0, abs=0.05)
    assert res.history["loss"][-1] < 0.2 and res.history["test_loss"][-1] < 0.2
    assert res.final_order_parameters["m"] > 0.5
    json.dumps(res.to_dict())


# ---------------------------------------------------------------------------------------------------
# bad input and divergence
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(lr=0.0), "lr"),
        (dict(lr=-1e-3), "lr"),
        (dict(steps=0), "steps"),
        (dict(steps=2.5), "steps"),
        (dict(optimizer="sgd"), "optimizer"),
        (dict(init="cold"), "init"),
        (dict(init=np.zeros((3, 3))), "init"),
        (dict(init=np.zeros((4, 4)), init_scale=0.5), "init_scale=0.5: only init='small' or 'hot'"),
        (dict(init_scale=-1.0), "init_scale"),
        (dict(batch_size=0), "batch_size"),
        (dict(batch_size=10**6), "batch_size"),
        (dict(record_every=0), "record_every"),
        (dict(test_size=0), "test_size"),
        (dict(optimizer="langevin", lr=optax.constant_schedule(1e-3)), "schedule"),
        # a callable that is not a schedule failed deep inside jit; a schedule is called at step 0 first
        (dict(lr=print), r"lr=<built-in function print>: expected .* or an optax schedule.*lr\(0\) returned None"),
        (dict(lr=lambda step: float("nan")), r"lr=.*lr\(0\) returned nan, expected a finite number"),
        (dict(lr=lambda step: 1 / 0), r"lr=.*lr\(0\) raised ZeroDivisionError"),
        # the seed labels the run in its config and messages: a text was written there as it was
        (dict(seed="abc"), "seed='abc': expected an integer"),
        (dict(seed=1.5), "seed=1.5: expected an integer"),
    ],
)
def test_bad_arguments(kw, match):
    task, prior, data = small_problem()
    with pytest.raises(ValueError, match=match):
        ba.train(data, prior, "softmax", jax.random.key(0), **kw)


def test_a_schedule_is_taken_as_lr():
    task, prior, data = small_problem()
    res = ba.train(data, prior, "softmax", jax.random.key(0), lr=optax.cosine_decay_schedule(1e-2, 3), steps=3)
    assert res.failure is None and res.history["step"].tolist() == [0, 3]


def test_bad_dataset_prior_attention():
    task, prior, data = small_problem()
    with pytest.raises(ValueError, match="dataset"):
        ba.train(np.zeros((3, 4, 2)), prior, "softmax", jax.random.key(0))
    bad = ba.Dataset(data.X[:, :3], data.Y, task)  # X does not match the task's T
    with pytest.raises(ValueError, match="dataset.X"):
        ba.train(bad, prior, "softmax", jax.random.key(0))
    with pytest.raises(ValueError, match="attention"):
        ba.train(data, prior, "relu", jax.random.key(0))
    with pytest.raises(ValueError, match="prior"):
        ba.train(data, (1.0, 1.0, 1.0), "softmax", jax.random.key(0))
    with pytest.raises(ValueError, match="P_values"):
        ba.train_sweep(task, prior, "softmax", [10, 0], [0], jax.random.key(0))
    with pytest.raises(ValueError, match="init"):
        ba.train_sweep(task, prior, "softmax", [10], [0], jax.random.key(0), init=np.zeros((4, 4)))
    # a seed is folded into the key as a 32-bit word: a larger one overflowed after the check
    with pytest.raises(ValueError, match=r"seeds item=4294967296: expected an integer in 0\.\.4294967295"):
        ba.train_sweep(task, prior, "softmax", [10], [2**32], jax.random.key(0), steps=3)
    net = {"name": "single_layer", "T": task.T, "d_in": task.d}
    with pytest.raises(ValueError, match=r"seeds item=4294967296"):
        ba.fit_sweep(net, task, [10], [2**32], jax.random.key(0), steps=3)
    # each item is named as given: the list was cast to floats first (naming 1.0 for 2.5) and a bool ran as P = 1
    for sweep in (ba.train_sweep, lambda task, prior, attention, *a, **kw: ba.fit_sweep(net, task, *a, **kw)):
        for P_values, seeds, named in [
            ([1, 2.5], [0], "P_values item=2.5: expected an integer"),
            ([True, 2], [0], "P_values item=True: expected an integer"),
            ([2], [0, 1.5], "seeds item=1.5: expected an integer"),
            ([2], [False], "seeds item=False: expected an integer"),
        ]:
            with pytest.raises(ValueError, match=re.escape(named)):
                sweep(task, prior, "softmax", P_values, seeds, jax.random.key(0), steps=3)


def test_divergent_run_is_reported_and_others_continue():
    task = ba.CopyTask(**SMALL)
    prior = ba.Prior(1.0, 10.0, 4.0)
    key = jax.random.key(0)
    kw = dict(optimizer="langevin", lr=3.0, steps=400, record_every=100, test_size=16)
    with pytest.warns(RuntimeWarning, match="diverged"):
        sw = ba.train_sweep(task, prior, "linear", [1, 100], [0, 1], key, runs_per_batch=4, **kw)
    # high temperature (P = 1) with a huge step explodes; P = 100 does not
    assert sorted((f["seed"], f["P"]) for f in sw.failures) == [(0, 1), (1, 1)]
    for f in sw.failures:
        assert f"seed={f['seed']}" in f["message"] and "P=1" in f["message"] and f"step {f['step']}" in f["message"]
        assert 0 <= f["step"] < 400
    assert np.all(np.isfinite(sw.final_L)) and np.all(np.isfinite(sw.history["loss"]))
    # frozen: the records after the failure repeat the last finite state
    f = sw.failures[0]
    i_seed = list(sw.seeds).index(f["seed"])
    after = sw.history["step"][0, i_seed] > f["step"]
    np.testing.assert_array_equal(sw.history["L"][0, i_seed][after], sw.final_L[0, i_seed][None].repeat(after.sum(), 0))
    # the healthy runs are exactly what they are alone
    for j, s in enumerate(sw.seeds):
        data_key, run_key = jax.random.split(jax.random.fold_in(key, int(s)))
        full = task.sample(data_key, 100)
        one = ba.train(full, prior, "linear", run_key, **kw)
        assert one.failure is None
        np.testing.assert_allclose(sw.history["u"][1, j], one.history["u"], rtol=1e-9)
    # a single run reports itself too
    data1 = ba.Dataset(full.X[:1], full.Y[:1], task)
    with pytest.warns(RuntimeWarning, match="seed=4, P=1 diverged at step"):
        res = ba.train(data1, prior, "linear", jax.random.key(0), seed=4, **kw)
    assert res.failed_at is not None and np.all(np.isfinite(res.final_params[0]))


# ---------------------------------------------------------------------------------------------------
# emergence and comparisons: exact answers on synthetic curves
# ---------------------------------------------------------------------------------------------------


def test_emergence_of_a_logistic_rise():
    steps = np.arange(0, 10001, 1)
    t0, w, lo, hi = 3000.0, 150.0, 1 / 16, 0.7
    m = lo + (hi - lo) / (1 + np.exp(-(steps - t0) / w))
    e = ba.emergence({"step": steps, "m": m})
    # exact: the logistic reaches fraction f of its rise at t0 + w log(f / (1 - f)) (endpoints ~ saturated)
    assert e["emerged"] and e["step"] == pytest.approx(t0, abs=1.0)
    assert e["sharpness"] == pytest.approx(2 * w * np.log(9.0), abs=2.0)
    flat = ba.emergence({"step": steps, "m": lo + 1e-3 * np.sin(steps)})
    assert not flat["emerged"] and np.isnan(flat["step"])
    with pytest.raises(ValueError, match="history"):
        ba.emergence({"step": steps, "m": m[:-1]})


def _fake_sweep(finals, P, attention="softmax", T=16):
    nP, nS = finals.shape
    hist = {"step": np.tile(np.array([0, 10]), (nP, nS, 1)), "m": np.stack([np.full_like(finals, 1 / T), finals], -1)}
    hist["u"] = hist["m"]
    return tr.SweepResult(
        np.asarray(P),
        np.arange(nS),
        hist,
        {"m": finals, "u": finals, "q": finals},
        np.zeros((nP, nS, T, T)),
        np.zeros((nP, nS, 2, 2)),
        [],
        {"attention": attention, "task": {"T": T}},
    )


def test_final_vs_P_onsets_and_theory_reference():
    P = [100, 200, 400, 800]
    small = _fake_sweep(np.array([[0.06, 0.07], [0.06, 0.3], [0.3, 0.4], [0.5, 0.5]]), P)
    hot = _fake_sweep(np.array([[0.06, 0.07], [0.3, 0.3], [0.4, 0.4], [0.5, 0.5]]), P)
    pc = {"branches": [], "transition": {"order": "first", "P_c": 380.0, "spinodals": [150.0, 600.0]}}
    out = ba.final_vs_P(small, hot, pc)
    assert out["key"] == "m" and out["threshold"] == pytest.approx(2 / 16)
    assert out["onset_small"] == 400 and out["onset_small_any"] == 200 and out["onset_hot"] == 200
    assert out["onset_small_closest"] == "binodal"
    assert out["theory_P"] == {"binodal": 380.0, "spinodal_lower": 150.0, "spinodal_upper": 600.0}
    pc["transition"]["P_c"] = 700.0
    assert ba.final_vs_P(small, None, pc)["onset_small_closest"] == "spinodal_upper"
    np.testing.assert_allclose(out["small"]["mean"], [0.065, 0.18, 0.35, 0.5])
    # linear: a collapsed attention (q ~ 0) does not count, whatever its cosine u
    lin = _fake_sweep(np.array([[0.9, 0.2], [0.9, 0.9]]), [10, 50], attention="linear")
    lin.final_order_parameters["q"] = np.array([[1e-9, 0.01], [0.01, 0.02]])
    out = ba.final_vs_P(lin, None, {"transition": {"order": "second", "P_c": None, "P_c_exact": 800.0}})
    assert out["key"] == "u" and out["onset_small"] == 50 and out["onset_small_any"] == 50
    assert out["small"]["frac_above"].tolist() == [0.0, 1.0]
    assert out["theory_P"] == {"P_c": 800.0}
    ev = ba.emergence_vs_P(small)
    assert ev["frac_emerged"].tolist() == [0.0, 0.5, 1.0, 1.0]


# ---------------------------------------------------------------------------------------------------
# the canonical training numbers on the canonical model (fast: 4 seeds; slow: 8 seeds, 5000 steps)
# ---------------------------------------------------------------------------------------------------


def _canonical(seeds, steps):
    task = ba.CopyTask(T=16, d=8)
    prior = ba.Prior(1.0, 100.0, 400.0)
    return ba.train_sweep(task, prior, "softmax", [100, 4000], seeds, jax.random.key(0), steps=steps, record_every=250)


def test_canonical_far_below_and_far_above():
    sw = _canonical(range(3), 2000)
    m = sw.final_order_parameters["m"]
    assert np.all(m[0] < 2 / 16), m[0]
    assert np.all(m[1] > 0.5), m[1]


@pytest.mark.slow
def test_canonical_far_below_and_far_above_slow():
    sw = _canonical(range(8), 5000)
    m = sw.final_order_parameters["m"]
    assert np.all(m[0] < 2 / 16), m[0]
    assert np.all(m[1] > 0.5), m[1]


def test_training_curves_plateau_then_rise():
    """Softmax at T = 8: far below the transition m stays at ~1/T and the loss at ~1; far above, m rises and
    the loss falls (an emergence step inside the run, a 10-90% width shorter than the run)."""
    task = ba.CopyTask(T=8, d=4)
    out = ba.training_curves(
        task,
        ba.Prior(1.0, 100.0, 50.0),
        "softmax",
        [5, 2000],
        jax.random.key(0),
        seeds=(0, 1),
        steps=1500,
        record_every=25,
        init_scale=1e-3,
    )
    c = out["curves"]
    assert c["m"].shape == (2, 2, 61)
    assert np.all(np.abs(c["m"][0, :, -1] - 1 / 8) < 0.05) and np.all(np.isnan(out["emergence_step"][0]))
    assert np.all(c["m"][1, :, -1] > 0.5) and np.all(c["loss"][1, :, -1] < 0.3 * c["loss"][1, :, 0])
    assert np.all((out["emergence_step"][1] > 0) & (out["emergence_step"][1] < 1500))
    assert np.all(out["sharpness"][1] < 1500)
    json.dumps(to_plain(out, nonfinite="none"), allow_nan=False)


# ---------------------------------------------------------------------------------------------------
# user data: a task that cannot sample, a user test set
# ---------------------------------------------------------------------------------------------------


def test_train_on_user_data_with_and_without_a_test_set():
    from dataclasses import dataclass

    from conftest import np_attention

    @dataclass(frozen=True)
    class UserData(ba.Task):  # describes user arrays: no _sample, one named pattern (the copy shift)
        @property
        def target_patterns(self):
            return ba.CopyTask(self.T, self.d).target_patterns

    task = UserData(T=4, d=2)
    src = ba.CopyTask(T=4, d=2).sample(jax.random.key(0), 60)
    data = ba.Dataset.from_arrays(src.X[:40], src.Y[:40], task)
    test = ba.Dataset.from_arrays(src.X[40:], src.Y[40:], task)
    prior = ba.Prior(1.0, 10.0, 1.0)
    kw = dict(steps=200, record_every=100)
    res = ba.train(data, prior, "softmax", jax.random.key(1), **kw)
    assert "test_loss" not in res.history and res.config["test"].startswith("none: UserData cannot sample")
    assert res.history["m"][-1] > 0.5
    res2 = ba.train(data, prior, "softmax", jax.random.key(1), test=test, **kw)
    np.testing.assert_array_equal(res2.history["L"], res.history["L"])  # the test set does not change the run
    L, V = res2.final_params
    F = np.einsum("ts,psi,ki->ptk", np_attention(L, "softmax", task.key_mask), np.asarray(test.X), V)
    assert res2.history["test_loss"][-1] == pytest.approx(np.mean((np.asarray(test.Y) - F) ** 2), rel=1e-10)
    assert res2.config["test"] == "user test set (20 sequences)"
    with pytest.raises(ValueError, match="test.X"):
        ba.train(data, prior, "softmax", jax.random.key(1), test=ba.Dataset(src.X[:3, :3], src.Y[:3], task))


def test_on_record_reports_each_record_step_and_changes_nothing():
    """run_loop's host callback (a progress bar inside one compiled run) sees every record step after the first,
    in order, also under vmap (batched), and the records are bit-identical with and without it."""
    target = jnp.asarray([1.0, -2.0, 0.5])

    def loss_fn(p, key):
        return jnp.sum((p - target) ** 2) + 0.1 * jnp.sum(jax.random.normal(key, p.shape) * p)

    def record(p):
        return {"p": p}

    plan = tr.Plan.make(40, 10)
    seen = []
    run = lambda cb: jax.jit(  # noqa: E731
        lambda k: tr.run_loop(jnp.zeros(3), loss_fn, optax.sgd(0.05), plan, record, k, on_record=cb)
    )
    key = jax.random.key(3)
    _, with_cb, _ = run(lambda s: seen.append(int(s)))(key)
    jax.effects_barrier()
    _, without, _ = run(None)(key)
    assert seen == [10, 20, 30, 40]
    np.testing.assert_array_equal(np.asarray(with_cb["p"]), np.asarray(without["p"]))

    batched = []
    jax.jit(
        jax.vmap(
            lambda k: tr.run_loop(
                jnp.zeros(3),
                loss_fn,
                optax.sgd(0.05),
                plan,
                record,
                k,
                on_record=lambda s: batched.append(np.asarray(s)),
            )[1]
        )
    )(jax.random.split(key, 2))
    jax.effects_barrier()
    assert [int(b.max()) for b in batched] == [10, 20, 30, 40]
    with tr.StepProgress(40, "test", enabled=False) as bar:
        assert bar.callback is None


def _noisy_quadratic():
    target = jnp.asarray([1.0, -2.0, 0.5])

    def loss_fn(p, key):
        return jnp.sum((p - target) ** 2) + 0.1 * jnp.sum(jax.random.normal(key, p.shape) * p)

    return loss_fn, lambda p: {"p": p, "norm": jnp.sum(p**2)}


@pytest.mark.parametrize("part_steps", [1, 7, 20, 35, 1000])
def test_run_in_parts_is_run_loop_bit_for_bit(part_steps):
    """run_loop_in_parts against run_loop, the reference path: the same records and final state whatever the cut,
    with a stochastic loss (per-step keys) and Adam's state carried across parts; a plan with uneven records too."""
    loss_fn, record = _noisy_quadratic()
    key = jax.random.key(5)
    for plan in (tr.Plan.make(40, 5), tr.Plan.make(43, 10, log_records=6)):
        st_ref, ref, _ = jax.jit(lambda k: tr.run_loop(jnp.zeros(3), loss_fn, optax.adam(0.1), plan, record, k))(key)
        st, recs = tr.run_loop_in_parts(
            jnp.zeros(3), loss_fn, optax.adam(0.1), plan, record, key, part_steps=part_steps
        )
        assert list(recs["step"]) == list(plan.record_steps)
        for k in ref:
            np.testing.assert_array_equal(recs[k], np.asarray(ref[k]))
        np.testing.assert_array_equal(np.asarray(st.params), np.asarray(st_ref.params))
        assert int(st.step) == plan.steps


def test_run_in_parts_resumes_where_it_was_killed(tmp_path):
    """A run killed after its second part and started again with the saved file computes what the uninterrupted
    run computes; the file names its run, and a file of another run, a damaged one or a state at a step that is
    no cut is refused (set aside with a warning, or a ValueError)."""
    from bayesattn.training.checkpoints import load_loop_state, save_loop_state

    loss_fn, record = _noisy_quadratic()
    key, plan, f = jax.random.key(2), tr.Plan.make(60, 5), tmp_path / "run.npz"
    whole = tr.run_loop_in_parts(jnp.zeros(3), loss_fn, optax.adam(0.1), plan, record, key, part_steps=15)[1]
    saves = []

    def save(st, r):
        save_loop_state(f, st, r, "run A")
        saves.append(int(st.step))
        if len(saves) == 2:
            raise KeyboardInterrupt  # killed between parts

    with pytest.raises(KeyboardInterrupt):
        tr.run_loop_in_parts(jnp.zeros(3), loss_fn, optax.adam(0.1), plan, record, key, part_steps=15, save=save)
    assert saves == [15, 30]
    resumed_from = []

    def resume(like):
        got = load_loop_state(f, like, "run A")
        resumed_from.append(None if got is None else int(got[0].step))
        return got

    _, again = tr.run_loop_in_parts(
        jnp.zeros(3), loss_fn, optax.adam(0.1), plan, record, key, part_steps=15, resume=resume
    )
    assert resumed_from == [30]
    for k in whole:
        np.testing.assert_array_equal(again[k], whole[k])

    like = tr.loop_steps(loss_fn, optax.adam(0.1), record, key).start(jnp.zeros(3))
    with pytest.warns(UserWarning, match="another run"):
        assert load_loop_state(f, like, "run B") is None
    assert not f.exists() and (tmp_path / "run.npz.corrupt").exists()
    f.write_bytes(b"not a zip file")
    with pytest.warns(UserWarning, match="cannot be read"):
        assert load_loop_state(f, like, "run A") is None
    save_loop_state(f, like._replace(step=jnp.asarray(7)), {"step": np.zeros(1, int)}, "run A")
    with pytest.raises(ValueError, match="step 7"):
        tr.run_loop_in_parts(
            jnp.zeros(3),
            loss_fn,
            optax.adam(0.1),
            plan,
            record,
            key,
            part_steps=15,
            resume=lambda like: load_loop_state(f, like, "run A"),
        )
    with pytest.raises(ValueError, match="part_steps"):
        tr.run_loop_in_parts(jnp.zeros(3), loss_fn, optax.adam(0.1), plan, record, key, part_steps=0)
    with pytest.raises(ValueError, match="checkpoint"):
        tr.run_loop_in_parts(
            jnp.zeros(3), loss_fn, optax.adam(0.1), tr.Plan.make(20, 5, checkpoints=3), record, key, part_steps=5
        )


def test_saved_progress_reads_a_saved_state_and_ignores_other_files(tmp_path):
    """saved_progress gives a loop state's step and meta as save_loop_state wrote them, without the arrays; an
    npz of another kind, a file that is no zip and a missing file give None."""
    from bayesattn.training.checkpoints import save_loop_state, saved_progress

    loss_fn, record = _noisy_quadratic()
    like = tr.loop_steps(loss_fn, optax.adam(0.1), record, jax.random.key(2)).start(jnp.zeros(3))
    state = like._replace(step=jnp.asarray(15))
    f = save_loop_state(tmp_path / "a.npz", state, {"step": np.zeros(1, int)}, "A", {"wall_s": 2.5})
    assert saved_progress(f) == {"step": 15, "meta": {"wall_s": 2.5}}
    np.savez(tmp_path / "other.npz", x=np.zeros(2))
    (tmp_path / "junk.npz").write_bytes(b"not a zip file")
    assert [saved_progress(tmp_path / n) for n in ("other.npz", "junk.npz", "none.npz")] == [None, None, None]


def test_run_clock_carries_the_time_saved_with_a_state_and_knows_when_it_cannot(tmp_path, monkeypatch):
    """RunClock: this process's seconds (a fake clock here) plus those saved with the state it loads; a missing file
    leaves them at zero; a state saved without them makes the time unknown (None), and the meta it then gives to
    save carries no time."""
    from types import SimpleNamespace

    from bayesattn.training import checkpoints

    now = [100.0]
    monkeypatch.setattr(checkpoints, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    loss_fn, record = _noisy_quadratic()
    like = tr.loop_steps(loss_fn, optax.adam(0.1), record, jax.random.key(2)).start(jnp.zeros(3))
    recs = {"step": np.zeros(1, int)}
    checkpoints.save_loop_state(tmp_path / "timed.npz", like, recs, "A", {"wall_s": 7.5, "steps": 9})
    checkpoints.save_loop_state(tmp_path / "old.npz", like, recs, "A", {"steps": 9})

    fresh = checkpoints.RunClock()
    assert fresh.load(tmp_path / "none.npz", like, "A") is None
    now[0] = 103.0
    assert fresh.seconds() == 3.0 and fresh.meta(steps=9) == {"steps": 9, "wall_s": 3.0}

    resumed = checkpoints.RunClock()
    assert resumed.load(tmp_path / "timed.npz", like, "A") is not None
    now[0] = 105.0
    assert resumed.seconds() == 9.5 and resumed.meta(steps=9)["wall_s"] == 9.5

    unknown = checkpoints.RunClock()
    assert unknown.load(tmp_path / "old.npz", like, "A") is not None
    assert unknown.seconds() is None and unknown.meta(steps=9) == {"steps": 9}


def test_optimizer_and_sgld_refuse_what_they_cannot_run():
    """A negative plateau tolerance, a Langevin optimizer built without its temperature, and SGLD's own
    learning rate or temperature out of range are refused naming them (they ran, or failed later)."""
    from bayesattn.training.core import OptimizerConfig, sgld

    for call, named in [
        (lambda: OptimizerConfig("adam", decay="plateau", plateau_rtol=-1.0), "plateau_rtol=-1.0"),
        (lambda: OptimizerConfig("langevin").build(10), "temperature=None"),
        (lambda: sgld(-1.0, 1.0), "learning_rate=-1.0"),
        (lambda: sgld(0.1, -1.0), "temperature=-1.0"),
    ]:
        with pytest.raises(ValueError, match=named):
            call()


def test_loop_and_analysis_refuse_arguments_of_another_kind_in_one_line():
    """run_loop's plan and optimizer, emergence's record name and final_vs_P's sweep are named when they are of
    another kind (they failed with an AttributeError or a KeyError)."""
    import bayesattn as ba
    from bayesattn.training.analysis import final_vs_P
    from bayesattn.training.results import emergence

    loss_fn, record = _noisy_quadratic()
    plan, key = tr.Plan.make(4, 2), jax.random.key(0)
    for call, named in [
        (lambda: tr.run_loop(jnp.zeros(3), loss_fn, optax.adam(0.1), 3, record, key), "plan=3"),
        (lambda: tr.run_loop(jnp.zeros(3), loss_fn, "adam", plan, record, key), "opt='adam'"),
        (lambda: tr.run_loop(jnp.zeros(3), loss_fn, optax.adam(0.1), plan, record, 0), "key=0"),
        (lambda: emergence({"step": [0, 1], "m": [0.0, 1.0]}, key="u"), "key='u'"),
        (lambda: final_vs_P(None), "sweep_small=NoneType"),
    ]:
        with pytest.raises(ValueError, match=re.escape(named)):
            call()
    task, prior = ba.CopyTask(T=4, d=2), ba.Prior(1.0, 100.0, 20.0)
    sweep = ba.train_sweep(task, prior, "softmax", [4], [0], key, steps=4)
    with pytest.raises(ValueError, match="key='x': expected one of"):
        final_vs_P(sweep, key="x")
    # a theory curve of the wrong kind was taken as none; bad thresholds passed; unrelated sweeps were compared
    for kw, named in [
        (dict(phase_curve=3), "phase_curve=3: expected a ba.theory.PhaseCurve"),
        (dict(phase_curve="abc"), "phase_curve='abc'"),
        (dict(threshold=float("nan")), "threshold=nan"),
        (dict(threshold="0.5"), "threshold='0.5'"),
        (dict(min_q=-1.0), "min_q=-1.0"),
    ]:
        with pytest.raises(ValueError, match=re.escape(named)):
            final_vs_P(sweep, **kw)
    other = ba.train_sweep(ba.CopyTask(T=5, d=2), prior, "softmax", [4], [0], key, steps=4)
    with pytest.raises(ValueError, match="sweep_hot: expected a sweep of sweep_small's attention, task and prior"):
        final_vs_P(sweep, other)


def test_training_curves_names_an_unknown_option():
    """An unknown option named train_sweep, the inner function it is passed on to."""
    task, prior = ba.CopyTask(T=4, d=2), ba.Prior(1.0, 100.0, 20.0)
    with pytest.raises(TypeError, match=r"training_curves\(\) got unexpected keyword argument\(s\) 'foo': .*steps"):
        ba.training_curves(task, prior, "softmax", [4], jax.random.key(0), foo=1)
    with pytest.raises(TypeError, match=r"training_curves\(\) .*'P_values'"):
        ba.training_curves(task, prior, "softmax", [4], jax.random.key(0), P_values=[4])


def test_objectives_need_data_and_sweeps_distinct_runs():
    """The objectives are per data row, so a posterior of no data is refused (it gave NaN); a sweep with a repeated
    P or seed is refused before it trains."""
    import bayesattn as ba

    task, prior, key = ba.CopyTask(T=4, d=2), ba.Prior(1.0, 100.0, 20.0), jax.random.key(0)
    empty = ba.Posterior(task.sample(key, 0), "softmax", prior)
    for call in (
        lambda: ba.training_objective(jnp.zeros((4, 4)), jnp.zeros((2, 2)), empty),
        lambda: ba.marginal_objective(jnp.zeros((4, 4)), empty),
    ):
        with pytest.raises(ValueError, match="posterior with no data"):
            call()
    with pytest.raises(ValueError, match=re.escape("P_values=[4, 4]: expected distinct values")):
        ba.train_sweep(task, prior, "softmax", [4, 4], [0], key, steps=2)
    with pytest.raises(ValueError, match=re.escape("seeds=[0, 0]: expected distinct values")):
        ba.fit_sweep(ba.models.SingleLayerConfig.for_task(task), task, [4], [0, 0], key, steps=2)


@pytest.mark.parametrize(
    "args, match",
    [
        ((10, (0, 5, 10), (0, 7)), r"checkpoint_steps=\(0, 7\): \[7\] not among the record_steps"),
        ((10, (0, 5), ()), r"record_steps=\(0, 5\): expected steps from 0 to steps=10"),
        ((10, (1, 10), ()), r"expected steps from 0"),
        ((10, (0, 5, 5, 10), ()), r"record_steps=.*: expected increasing steps"),
        ((10, (0, 12), ()), r"record_steps\[1\]=12: expected an integer in 0..10"),
        ((10, [0, 10], ()), r"record_steps=\[0, 10\]: expected a tuple"),
        ((0, (0,), ()), r"steps=0"),
    ],
)
def test_a_plan_built_directly_is_checked(args, match):
    # a checkpoint step that is not a record step was never written: its slot kept zeros
    with pytest.raises(ValueError, match=match):
        tr.Plan(*args)


def test_plan_make_builds_the_steps_its_docstring_names():
    """Brute force: records every ``record_every`` steps and at the rounded log-spaced steps, always 0 and the last;
    checkpoints at the rounded log-spaced steps plus 0 and the last, and among the records."""
    for steps in (1, 2, 7, 100, 1001):
        for every in (1, 3, 50, 5000):
            for log_records, checkpoints in ((0, 0), (5, 0), (0, 4), (9, 9)):
                made = tr.Plan.make(steps, every, log_records, checkpoints)
                logs = lambda n: {int(round(x)) for x in np.geomspace(1, steps, n)} if n else set()  # noqa: E731
                ck = logs(checkpoints) | ({0, steps} if checkpoints else set())
                rec = {t for t in range(steps + 1) if t % min(every, steps) == 0} | {steps} | logs(log_records) | ck
                assert made.record_steps == tuple(sorted(rec)), (steps, every, log_records, checkpoints)
                assert made.checkpoint_steps == tuple(sorted(ck)), (steps, every, log_records, checkpoints)
