"""The one training loop on the zoo: data modes, schedules and clipping really applied (first updates against
hand-written optax-free references), divergence frozen and reported, checkpoints and results round-trip,
sweeps equal single runs."""

import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayesattn as ba
from bayesattn.models import SingleLayerConfig, TransformerConfig, network_from_config
from bayesattn.training import OptimizerConfig, fit, fit_sweep, load_checkpoint, save_checkpoint
from bayesattn.training.results import FitResult

TASK = ba.CopyTask(T=4, d=2)
CFG = SingleLayerConfig.for_task(TASK, init_scale=0.3)
FAST = dict(record_every=1, log_records=0, test=None, probe_size=4)


def ref_grad(L, V, X, Y):
    """Gradient of the mean squared error of f_t = V sum_s softmax(L)_ts x_s, written directly in numpy-like jax
    (no bayesattn code): mean over sequences, rows and coordinates."""

    def mse(L, V):
        A = jax.nn.softmax(L, axis=-1)
        F = jnp.einsum("ts,psi,ki->ptk", A, X, V)
        return jnp.mean((Y - F) ** 2)

    return jax.grad(mse, argnums=(0, 1))(L, V)


def one_step(data, opt, key=None, steps=1):
    key = jax.random.key(5) if key is None else key
    net0 = network_from_config(CFG, jax.random.key(0))
    res = fit(net0, data, key, optimizer=opt, steps=steps, **FAST)
    return net0, res.network


def test_full_batch_step_is_the_full_gradient_step():
    data = TASK.sample(jax.random.key(1), 16)
    net0, net1 = one_step(data, OptimizerConfig("sgd", 0.1))
    gL, gV = ref_grad(net0.L, net0.V, data.X, data.Y)
    np.testing.assert_allclose(net1.L, net0.L - 0.1 * gL, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(net1.V, net0.V - 0.1 * gV, rtol=1e-10, atol=1e-13)
    # full batch ignores the step key: another key, the same step
    np.testing.assert_array_equal(one_step(data, OptimizerConfig("sgd", 0.1), jax.random.key(9))[1].L, net1.L)


def test_minibatch_draws_sequences_of_the_data():
    data = TASK.sample(jax.random.key(1), 16)
    same = ba.Dataset(jnp.repeat(data.X[:1], 16, 0), jnp.repeat(data.Y[:1], 16, 0), TASK)
    net0 = network_from_config(CFG, jax.random.key(0))
    step = lambda d, k: fit(net0, d, k, optimizer=OptimizerConfig("sgd", 0.1), steps=1, batch_size=3, **FAST).network  # noqa: E731
    # all sequences equal: any minibatch is the full batch
    gL, _ = ref_grad(net0.L, net0.V, same.X[:1], same.Y[:1])
    np.testing.assert_allclose(step(same, jax.random.key(2)).L, net0.L - 0.1 * gL, rtol=1e-10, atol=1e-13)
    # distinct sequences: the step depends on the draw, and is the gradient of 3 of the sequences
    a, b = step(data, jax.random.key(2)).L, step(data, jax.random.key(3)).L
    assert not np.allclose(a, b)
    import itertools

    # the reference step of every multiset of 3 sequences, ref_grad mapped over them in one call
    idx = jnp.asarray(list(itertools.combinations_with_replacement(range(16), 3)))
    grads = jax.vmap(lambda i: ref_grad(net0.L, net0.V, data.X[i], data.Y[i])[0])(idx)
    cands = np.asarray(net0.L - 0.1 * grads)
    assert len(cands) == 816 and np.min(np.max(np.abs(a - cands), axis=(1, 2))) < 1e-12


def test_online_learns_from_fresh_data_and_is_deterministic():
    kw = dict(
        optimizer=OptimizerConfig("adam", 0.05), steps=300, batch_size=8, record_every=100, log_records=5, test=64
    )
    a = fit(CFG, TASK, jax.random.key(0), **kw)
    b = fit(CFG, TASK, jax.random.key(0), **kw)
    np.testing.assert_array_equal(a.history["loss"], b.history["loss"])
    assert a.config["mode"] == "online" and a.history["m"][-1] > 0.8 and a.history["test_loss"][-1] < 0.1
    # records every 100 steps and at log-spaced steps 1, 4, 17, 72 (resolving the early rise)
    assert a.history["step"].tolist() == [0, 1, 4, 17, 72, 100, 200, 300]


def test_warmup_and_cosine_schedule_are_applied():
    data = TASK.sample(jax.random.key(1), 16)
    net0, net1 = one_step(data, OptimizerConfig("sgd", 0.1, warmup=2))
    np.testing.assert_array_equal(net1.L, net0.L)  # the warm-up starts at lr = 0
    _, net2 = one_step(data, OptimizerConfig("sgd", 0.1, warmup=2), steps=2)
    gL, _ = ref_grad(net0.L, net0.V, data.X, data.Y)
    # step 1: lr / 2 (optax evaluates the schedule in float32: 0.05 to 1e-9)
    np.testing.assert_allclose(net2.L, net0.L - 0.05 * gL, rtol=1e-8, atol=1e-10)
    sched = OptimizerConfig("adam", 0.1, decay="cosine", final_factor=0.1).schedule(100)
    for k in (0, 30, 100):
        assert float(sched(k)) == pytest.approx(0.1 * (0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * k / 100))))


def test_clipping_bounds_the_first_update():
    data = TASK.sample(jax.random.key(1), 16)
    net0, net1 = one_step(data, OptimizerConfig("sgd", 0.1, clip=1e-3))
    gL, gV = ref_grad(net0.L, net0.V, data.X, data.Y)
    assert float(jnp.sqrt(jnp.sum(gL**2) + jnp.sum(gV**2))) > 1e-2  # the clip is active
    moved = np.sqrt(np.sum((net1.L - net0.L) ** 2) + np.sum((net1.V - net0.V) ** 2))
    assert moved == pytest.approx(0.1 * 1e-3, rel=1e-9)


def test_plateau_decay_scales_updates_on_a_flat_loss():
    opt = OptimizerConfig("sgd", 1.0, decay="plateau", plateau_patience=2, plateau_factor=0.5).build(10)
    p = {"w": jnp.ones(2)}
    s = opt.init(p)
    sizes = []
    for _ in range(6):  # the loss never improves: the scale halves after every 2 non-improving steps
        u, s = opt.update({"w": jnp.ones(2)}, s, p, value=jnp.asarray(1.0))
        sizes.append(float(-u["w"][0]))
    assert sizes == [1.0, 1.0, 0.5, 0.5, 0.25, 0.25]


def test_the_training_loop_passes_each_steps_own_loss_to_the_plateau_rule():
    """The loop against a hand loop that calls ``update(..., value=loss)`` with the loss of the current parameters.
    The loss improves for two steps and then stays flat while its gradient does not vanish, so the step at which
    the scale halves depends on which loss the rule sees (a stale or missing one moves it)."""
    from bayesattn.training import Plan, run_loop

    def loss(w, key=None):  # value: 2 + max(w0, -1.5) (positive: the rule's tolerance is relative), gradient: ones
        return 2.0 + jax.lax.stop_gradient(jnp.maximum(w[0], -1.5)) + (jnp.sum(w) - jax.lax.stop_gradient(jnp.sum(w)))

    opt = OptimizerConfig("sgd", 1.0, decay="plateau", plateau_patience=2, plateau_factor=0.5).build(8)
    w, state, hand = jnp.zeros(2), None, []
    state = opt.init(w)
    for _ in range(8):
        value, g = jax.value_and_grad(loss)(w)
        u, state = opt.update(g, state, w, value=value)
        w = w + u
        hand.append(np.asarray(w))
    _, recs, _ = run_loop(jnp.zeros(2), loss, opt, Plan.make(8, 1), lambda p: {"w": p}, jax.random.key(0))
    np.testing.assert_array_equal(np.asarray(recs["w"])[1:], np.stack(hand))
    steps = -np.diff(np.concatenate([[0.0], np.stack(hand)[:, 0]]))
    assert steps[0] == 1.0 and steps[-1] < 1.0  # the rule did act within the run


def test_divergence_is_frozen_and_reported():
    data = TASK.sample(jax.random.key(1), 8)
    with pytest.warns(RuntimeWarning, match=r"seed=3, P=8 diverged at step \d+"):
        res = fit(CFG, data, jax.random.key(0), optimizer=OptimizerConfig("sgd", 1e12), steps=20, seed=3, **FAST)
    assert res.failed_at is not None and 0 <= res.failed_at < 20
    assert all(np.all(np.isfinite(x)) for x in jax.tree.leaves(res.network))
    after = res.history["step"] > res.failed_at
    assert np.all(res.history["loss"][after] == res.history["loss"][-1])  # frozen
    with pytest.warns(RuntimeWarning, match="diverged"):
        sw = fit_sweep(
            CFG, TASK, [4, 8], [0, 1], jax.random.key(0), optimizer=OptimizerConfig("sgd", 1e12), steps=20, **FAST
        )
    assert sorted((f["seed"], f["P"]) for f in sw.failures) == [(0, 4), (0, 8), (1, 4), (1, 8)]


def test_checkpoint_round_trip_and_mismatch(tmp_path):
    cfg = TransformerConfig(T=4, width=8, heads=2, mlp=8, d_in=2)
    net = network_from_config(cfg, jax.random.key(0))
    path = save_checkpoint(tmp_path / "a.eqx", net, step=7)
    back = load_checkpoint(path, cfg)
    for x, y in zip(jax.tree.leaves(net), jax.tree.leaves(back)):
        np.testing.assert_array_equal(x, y)
    assert load_checkpoint(path).config == cfg  # the header's config suffices
    with pytest.raises(ValueError, match="another network.*width"):
        load_checkpoint(path, cfg.replace(width=12))
    with pytest.raises(ValueError, match="net=NoneType: expected a network"):
        save_checkpoint(tmp_path / "none.eqx", None)
    assert not list(tmp_path.glob("none*"))
    with pytest.raises(ValueError, match=r"array .*W_in \(9, 8\)"):  # same config, other arrays
        load_checkpoint(path, eqx.tree_at(lambda n: n.blocks[0].W_in, net, jnp.zeros((9, 8))))
    with pytest.raises(ValueError, match="no header"):
        load_checkpoint(tmp_path / "missing.eqx", cfg)


def test_result_round_trip_with_log_spaced_checkpoints(tmp_path):
    data = TASK.sample(jax.random.key(1), 16)
    res = fit(
        CFG,
        data,
        jax.random.key(0),
        optimizer=OptimizerConfig("adam", 0.05),
        steps=100,
        checkpoints=4,
        record_every=50,
        log_records=0,
        test=32,
    )
    assert [s for s, _ in res.checkpoints] == [0, 1, 5, 22, 100]
    np.testing.assert_array_equal(res.checkpoints[-1][1].L, res.network.L)
    back = FitResult.load(res.save(tmp_path / "run"))
    for k, v in res.history.items():
        np.testing.assert_array_equal(back.history[k], v)
    np.testing.assert_array_equal(back.network.L, res.network.L)
    assert [s for s, _ in back.checkpoints] == [0, 1, 5, 22, 100]
    np.testing.assert_array_equal(back.checkpoints[2][1].V, res.checkpoints[2][1].V)
    json.loads((tmp_path / "run" / "result.json").read_text())


@pytest.mark.parametrize(
    "runs_per_batch,cfg",
    [
        (4, CFG),  # one vmap over all runs
        pytest.param(
            1, TransformerConfig(T=4, width=6, heads=2, mlp=None, norm="rmsnorm", d_in=2), marks=pytest.mark.slow
        ),  # lax.map, one run at a time
    ],
)
def test_sweep_equals_single_runs(runs_per_batch, cfg):
    kw = dict(
        optimizer=OptimizerConfig("adam", 0.01, warmup=3, clip=1.0),
        steps=12,
        batch_size=3,
        record_every=4,
        log_records=3,
        test=8,
        probe_size=4,
    )
    key = jax.random.key(3)
    sw = fit_sweep(cfg, TASK, [5, 9], [0, 2], key, runs_per_batch=runs_per_batch, **kw)
    for j, s in enumerate([0, 2]):
        data_key, fit_key = jax.random.split(jax.random.fold_in(key, s))
        full = TASK.sample(data_key, 9)
        for i, P in enumerate([5, 9]):
            one = fit(cfg, ba.Dataset(full.X[:P], full.Y[:P], TASK), fit_key, **kw)
            for k, v in one.history.items():
                np.testing.assert_allclose(sw.history[k][i, j], v, rtol=1e-9, atol=1e-12, err_msg=k)
            run = sw.run(i, j)
            for x, y in zip(jax.tree.leaves(run.network), jax.tree.leaves(one.network)):
                np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match=r"i_seed=-1: expected an integer in 0\.\.1"):
        sw.run(0, -1)


def test_bad_fit_arguments():
    data = TASK.sample(jax.random.key(1), 8)
    for kw, match in [
        (dict(loss="hinge"), "loss"),
        (dict(batch_size=0), "batch_size"),
        (dict(optimizer="rmsprop"), "optimizer='rmsprop': expected one of 'adam', 'adamw', 'sgd'"),
        (dict(optimizer="langevin"), "langevin"),
        (dict(steps=0), "steps"),
        (dict(seed="x"), "seed='x': expected an integer"),  # written into config["seed"] as it was
    ]:
        with pytest.raises(ValueError, match=match):
            fit(CFG, data, jax.random.key(0), **kw)
    for kw, match in [(dict(clip=-1.0), "clip"), (dict(decay="step"), "decay"), (dict(warmup=-1), "warmup")]:
        with pytest.raises(ValueError, match=match):
            OptimizerConfig("adam", 1e-3, **kw)
    # the config's field is name (it was called optimizer= in the message)
    with pytest.raises(ValueError, match="name='foo': expected one of 'adam', 'adamw', 'sgd', 'langevin'"):
        OptimizerConfig(name="foo")
    with pytest.raises(ValueError, match="batch_size=None"):
        fit(CFG, TASK, jax.random.key(0))
    with pytest.raises(ValueError, match="data="):
        fit(CFG, np.zeros((3, 4, 2)), jax.random.key(0))


def test_fit_refuses_a_network_or_test_set_of_another_shape_and_empty_data_in_one_line():
    """A network built for another T or d is found by tracing it once (no computation) and refused naming it, by
    fit and fit_sweep alike; so are a training set of no sequences and a test set of another d."""
    import jax

    import bayesattn as ba

    key, task = jax.random.key(0), ba.CopyTask(T=4, d=2)
    data = task.sample(key, 5)
    for other in (ba.CopyTask(T=5, d=2), ba.CopyTask(T=4, d=3)):
        cfg = ba.models.SingleLayerConfig.for_task(other)
        with pytest.raises(ValueError, match=r"network \(SingleLayer, .*build it for the task"):
            ba.fit(cfg, data, key, steps=2)
        with pytest.raises(ValueError, match=r"network \(SingleLayer, .*build it for the task"):
            ba.fit_sweep(cfg, task, [3], [0], key, steps=2)
    cfg = ba.models.SingleLayerConfig.for_task(task)
    with pytest.raises(ValueError, match="data: P=0 sequences"):
        ba.fit(cfg, task.sample(key, 0), key, steps=2, test=None)
    with pytest.raises(ValueError, match=r"test.X has shape \(3, 4, 3\)"):
        ba.fit(cfg, data, key, steps=2, test=ba.CopyTask(T=4, d=3).sample(key, 3))
    # the cross-entropy of Gaussian targets is unbounded below: refused, by fit and fit_sweep; one-hot tokens train
    with pytest.raises(ValueError, match=r"data.Y: values from .* expected rows of probabilities"):
        ba.fit(cfg, data, key, steps=2, loss="xent")
    with pytest.raises(ValueError, match=r"the task's Y: values from .* expected rows of probabilities"):
        ba.fit_sweep(cfg, task, [3], [0], key, steps=2, loss="xent")
    onehot = ba.CopyTask(T=4, d=2, tokens="onehot")
    res = ba.fit(cfg, onehot.sample(key, 5), key, steps=2, loss="xent", test=None)
    assert np.isfinite(res.history["loss"]).all()


def test_fit_refuses_data_it_cannot_train_on_and_names_its_own_bound():
    """A Dataset built directly with NaN or complex tokens trained and reported "diverged at step 0" (or failed deep
    in JAX); a run stopped by a bound of its own named the default bound instead."""
    import warnings

    data = TASK.sample(jax.random.key(1), 6)
    net = {"name": "single_layer", "T": TASK.T, "d_in": TASK.d}
    with pytest.raises(ValueError, match=r"data.X contains 48 NaN or inf value\(s\)"):
        fit(net, ba.Dataset(data.X * jnp.nan, data.Y, TASK), jax.random.key(0), steps=3)
    with pytest.raises(ValueError, match=r"data.Y has dtype complex128: expected real numbers"):
        fit(net, ba.Dataset(data.X, data.Y + 1j, TASK), jax.random.key(0), steps=3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = fit(net, data, jax.random.key(0), steps=3, bound=1e-6)
    msgs = [str(w.message) for w in caught if "diverged" in str(w.message)]
    assert res.failure is not None and msgs and all("|parameter| > 1e-06" in m for m in msgs), msgs
    # a task that cannot sample has no test set of its own, but a bad count is still refused, not ignored
    fixed = ba.Dataset.from_arrays(data.X, data.Y, ba.Task(T=TASK.T, d=TASK.d))
    for bad in (-5, "abc"):
        with pytest.raises(ValueError, match=rf"test={bad!r}: expected an integer"):
            fit(net, fixed, jax.random.key(0), steps=3, test=bad)
