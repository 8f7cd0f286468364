"""Public entry points that took bad input silently or failed deep inside: each is refused with a ValueError naming
the argument, and the answers they give for good input are compared with independent numpy references."""

import inspect
import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayesattn as ba
from bayesattn.bayes.theory.phase_curve import PhaseCurve
from bayesattn.models import TransformerConfig, network_from_config
from bayesattn.training import load_checkpoint, save_checkpoint, sequence_loss

# ------------------------------------------------------------------------------------------- loss_curve(curve=)
TASK, PRIOR, PRIOR2 = ba.CopyTask(T=8, d=4), ba.Prior(1.0, 100.0, 100.0), ba.Prior(1.0, 100.0, 10.0)
P_GRID = np.linspace(50.0, 600.0, 6)


def test_loss_curve_refuses_a_curve_of_another_prior_or_task():
    """The curve of sigma2 = 100 passed for sigma2 = 10 gave that prior's test errors (0.89 against 0.19)."""
    c1 = ba.theory.phase_curve(TASK, PRIOR, "softmax", P_GRID)
    with pytest.raises(ValueError, match=r"curve is of another prior: \['sigma2'\] differ"):
        ba.theory.loss_curve(TASK, PRIOR2, "softmax", P_GRID, curve=c1)
    other_task = ba.CopyTask(T=8, d=4, offset=2)
    with pytest.raises(ValueError, match=r"curve is of another task: \['offset'\] differ"):
        ba.theory.loss_curve(other_task, PRIOR, "softmax", P_GRID, curve=c1)
    # the right curve, given or computed, and the same curve after a JSON round trip, give its own test errors
    want = ba.theory.phase_curve(TASK, PRIOR2, "softmax", P_GRID).mean["test_error"]
    got = ba.theory.loss_curve(TASK, PRIOR2, "softmax", P_GRID)["posterior"]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    back = PhaseCurve.from_dict(json.loads(json.dumps(c1.to_dict())))
    np.testing.assert_allclose(
        ba.theory.loss_curve(TASK, PRIOR, "softmax", P_GRID, curve=back)["posterior"], c1.mean["test_error"]
    )
    assert not np.allclose(got, c1.mean["test_error"])  # the two priors' errors do differ: the check matters


def test_loss_curve_refuses_a_mode_curve_and_a_curve_that_records_no_prior():
    mode = ba.theory.mode_curve(TASK, PRIOR, "linear", P_GRID)
    with pytest.raises(ValueError, match=r"curve has no posterior test error \(a mode_curve\?\)"):
        ba.theory.loss_curve(TASK, PRIOR, "linear", P_GRID, curve=mode)  # was a bare KeyError: 'test_error'
    pc = ba.theory.phase_curve(TASK, PRIOR, "linear", P_GRID)
    bare = PhaseCurve(pc.attention, pc.P, pc.branches, pc.stable, pc.mean, pc.transition)  # no config
    with pytest.raises(ValueError, match="curve records no task"):
        ba.theory.loss_curve(TASK, PRIOR, "linear", P_GRID, curve=bare)


# ------------------------------------------------------------------------------------------------ sequence_loss
def _np_log_softmax(F):
    F = np.asarray(F, np.float64)
    z = F - F.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def test_sequence_loss_refuses_another_kind_and_bad_shapes():
    rng = np.random.default_rng(0)
    F, Y = rng.normal(size=(3, 4, 5)), rng.normal(size=(3, 4, 5))
    qm = np.array([False, True, True, True])
    for kind in ("MSE", "l1", None):  # each was taken as cross-entropy
        with pytest.raises(ValueError, match=re.escape(f"kind={kind!r}: expected one of 'mse', 'xent'")):
            sequence_loss(kind, F, Y, qm)
    for call, named in [
        (lambda: sequence_loss("mse", F, Y[:, :3], qm), "Y has shape (3, 3, 5)"),
        (lambda: sequence_loss("mse", F, Y[..., 0], qm), "Y has shape (3, 4)"),  # would broadcast
        (lambda: sequence_loss("xent", F, np.zeros((3, 5), int), qm), "Y has shape (3, 5)"),
        (lambda: sequence_loss("mse", F[0], Y[0], qm), "F has shape (4, 5)"),
        (lambda: sequence_loss("mse", F, Y, qm[:3]), "query_mask has shape (3,)"),
        (lambda: sequence_loss("mse", F, Y, qm, jnp.ones(2)), "weights has shape (2,)"),
        # inside jit the shapes are static, so the same checks run there
        (lambda: jax.jit(lambda f, y: sequence_loss("mse", f, y, qm))(F, Y[:, :3]), "Y has shape (3, 3, 5)"),
    ]:
        with pytest.raises(ValueError, match=re.escape(named)):
            call()


def test_sequence_loss_values_against_numpy():
    rng = np.random.default_rng(1)
    F, Y = rng.normal(size=(3, 4, 5)), rng.normal(size=(3, 4, 5))
    qm, w = np.array([False, True, True, True]), np.array([1.0, 1.0, 0.0])
    want = ((Y - F) ** 2).mean(-1)[:2, 1:].mean()  # weight 0 drops sequence 2, the mask drops row 0
    np.testing.assert_allclose(sequence_loss("mse", F, Y, qm, jnp.asarray(w)), want, rtol=1e-12)
    cls = rng.integers(0, 5, size=(3, 4))
    want = -np.take_along_axis(_np_log_softmax(F), cls[..., None], -1)[..., 0][:, 1:].mean()
    np.testing.assert_allclose(sequence_loss("xent", F, cls, qm), want, rtol=1e-12)
    np.testing.assert_allclose(sequence_loss("xent", F, np.eye(5)[cls], qm), want, rtol=1e-12)
    jitted = jax.jit(lambda f, y: sequence_loss("xent", f, y, qm))(F, cls)
    np.testing.assert_allclose(jitted, want, rtol=1e-12)


# -------------------------------------------------------------------------------------------------- checkpoints
def test_checkpoint_without_a_suffix_loads_back(tmp_path):
    """save wrote ``ckpt`` and load looked for ``ckpt.eqx`` (Equinox appends the suffix to a bare name)."""
    cfg = TransformerConfig(T=4, width=8, heads=2, mlp=8, d_in=2)
    net = network_from_config(cfg, jax.random.key(0))
    for name in ("ckpt", "step.7.eqx", "a.b"):
        path = save_checkpoint(tmp_path / name, net, step=1)
        assert path == tmp_path / name and path.exists()
        back = load_checkpoint(tmp_path / name)
        for x, y in zip(jax.tree.leaves(net), jax.tree.leaves(back)):
            np.testing.assert_array_equal(x, y)
        assert ba.training.checkpoints.checkpoint_header(path)["step"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [n for name in ("ckpt", "step.7.eqx", "a.b") for n in (name, name + ".json")]
    )  # no ckpt.eqx, no .tmp left over


def test_checkpoint_refuses_a_negative_step_before_writing(tmp_path):
    net = network_from_config(TransformerConfig(T=4, width=8, heads=2, mlp=8, d_in=2), jax.random.key(0))
    for bad, named in ((-1, "step=-1: expected an integer >= 0"), (1.5, "step=1.5: expected an integer")):
        with pytest.raises(ValueError, match=re.escape(named)):
            save_checkpoint(tmp_path / "ckpt", net, step=bad)
    assert not list(tmp_path.iterdir())
    save_checkpoint(tmp_path / "ok", net, step=np.int64(0))  # numpy integers and 0 are fine


def test_checkpoint_refuses_a_bad_extra_and_keeps_the_earlier_file_whole(tmp_path):
    """An extra that JSON cannot write, or that reuses the header's own keys, is refused before anything is written:
    the checkpoint already at the path (another network's) still loads as it was. Before, the arrays were replaced
    and then the header failed, so the old header read the new arrays."""
    a = network_from_config(TransformerConfig(T=4, width=8, heads=2, mlp=8, d_in=2), jax.random.key(0))
    b = network_from_config(TransformerConfig(T=4, width=8, heads=2, mlp=8, d_in=2), jax.random.key(1))
    path = save_checkpoint(tmp_path / "w.eqx", a, step=1, extra={"note": "first"})
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    for extra, named in (
        ({"o": object()}, "not JSON-serialisable"),
        ({"step": -7}, "keys ['step'] are the header's own"),
        ({"format": "x", "leaves": 0}, "keys ['format', 'leaves']"),
        (["note"], "expected a dict"),
    ):
        with pytest.raises(ValueError, match=re.escape(named)):
            save_checkpoint(path, b, step=2, extra=extra)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    back = load_checkpoint(path)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(back)):
        np.testing.assert_array_equal(x, y)
    assert ba.training.checkpoints.checkpoint_header(path)["note"] == "first"


# ------------------------------------------------------------------------------------------ sufficient_statistics
def _np_statistics(X, Y):
    X, Y = np.asarray(X, np.float64), np.asarray(Y, np.float64)
    return np.einsum("psi,puj->suij", X, X), np.einsum("psi,ptj->stij", X, Y), float((Y**2).sum())


def test_sufficient_statistics_checks_its_input():
    data = TASK.sample(jax.random.key(0), 6)
    X32, Y32 = np.asarray(data.X, np.float32), np.asarray(data.Y, np.float32)
    got = ba.sufficient_statistics(X32, Y32)  # float32 in: float64 statistics of the same values
    assert all(g.dtype == jnp.float64 for g in got)
    for g, w in zip(got, _np_statistics(X32, Y32)):
        np.testing.assert_allclose(g, w, rtol=1e-12)
    for g, w in zip(ba.sufficient_statistics(X32.tolist(), Y32.tolist()), got):  # lists: an AttributeError before
        np.testing.assert_array_equal(g, w)
    X_nan = np.asarray(data.X).copy()
    X_nan[0, 1, 0] = np.nan
    for call, named in [
        (lambda: ba.sufficient_statistics(X_nan, data.Y), "X contains 1 NaN or inf value(s)"),
        (lambda: ba.sufficient_statistics(data.X, data.Y[:5]), "Y has shape (5, 8, 4): expected shape (6, 8, *)"),
        (lambda: ba.sufficient_statistics(data.X[0], data.Y), "X has shape (8, 4)"),
        (lambda: ba.sufficient_statistics(data.X.astype(complex), data.Y), "X has dtype complex128"),
        (lambda: jax.jit(ba.sufficient_statistics)(data.X, data.Y[:5]), "Y has shape (5, 8, 4)"),
    ]:
        with pytest.raises(ValueError, match=re.escape(named)):
            call()


def test_sufficient_statistics_inside_a_trace_checks_shapes_only():
    data = TASK.sample(jax.random.key(1), 5)
    want = _np_statistics(data.X, data.Y)
    X32 = data.X.astype(jnp.float32)  # traced float32: converted, the statistics of its values in float64
    for g, w in zip(jax.jit(ba.sufficient_statistics)(X32, data.Y), _np_statistics(X32, data.Y)):
        assert g.dtype == jnp.float64
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    # a traced NaN cannot be seen: it propagates, no error at trace time
    assert np.isnan(jax.jit(ba.sufficient_statistics)(data.X.at[0, 0, 0].set(jnp.nan), data.Y)[0]).any()
    batched = jax.vmap(ba.sufficient_statistics)(data.X[None], data.Y[None])
    for g, w in zip(batched, want):
        np.testing.assert_allclose(g[0], w, rtol=1e-12)


# ------------------------------------------------------------------------------------------------ train(key=)
def test_train_needs_its_key_without_a_misleading_default():
    params = inspect.signature(ba.train).parameters
    assert params["key"].default is inspect.Parameter.empty
    data, prior = ba.CopyTask(T=4, d=2).sample(jax.random.key(0), 5), ba.Prior(1.0, 100.0, 20.0)
    with pytest.raises(TypeError, match="key"):
        ba.train(data, prior, "softmax", steps=2)
    with pytest.raises(ValueError, match="key=None: expected one JAX PRNG key"):
        ba.train(data, prior, "softmax", None, steps=2)


# ---------------------------------------------------------------------------------------------------- emergence
def test_emergence_refuses_a_history_with_nan():
    """A NaN in the history gave emerged=True with step=nan."""
    steps = np.arange(0.0, 11.0)
    m = np.clip((steps - 3) / 4, 0, 1)  # rises from 0 to 1 between steps 3 and 7: half-way at step 5
    e = ba.emergence({"step": steps, "m": m})
    assert e["emerged"] and e["step"] == pytest.approx(5.0) and e["sharpness"] == pytest.approx(0.8 * 4)
    for bad_m, bad_steps, named in [
        (np.where(steps == 5, np.nan, m), steps, "history['m'] contains 1 NaN or inf"),
        (np.where(steps == 9, np.inf, m), steps, "history['m'] contains 1 NaN or inf"),
        (m, np.where(steps == 2, np.nan, steps), "history['step'] contains 1 NaN or inf"),
    ]:
        with pytest.raises(ValueError, match=re.escape(named)):
            ba.emergence({"step": bad_steps, "m": bad_m})


def test_emergence_refuses_a_bad_threshold_or_unordered_steps():
    """min_rise = 0 called a flat history emerged (at step nan), NaN called nothing emerged, and unsorted steps gave
    a negative sharpness; a key the sweep did not record raised a bare KeyError."""
    steps = np.arange(0.0, 11.0)
    m = np.clip((steps - 3) / 4, 0, 1)
    for bad in (0.0, -1.0, float("nan"), "0.1"):
        with pytest.raises(ValueError, match=r"min_rise=.*: expected a positive finite number"):
            ba.emergence({"step": steps, "m": m}, min_rise=bad)
    with pytest.raises(ValueError, match=re.escape("history['step']: expected increasing steps")):
        ba.emergence({"step": steps[::-1], "m": m})
    sw = ba.train_sweep(
        ba.CopyTask(T=4, d=2), ba.Prior(1.0, 10.0, 5.0), "softmax", [8], [0], jax.random.key(0), steps=4
    )
    for bad in ("zz", "step", "L"):
        with pytest.raises(ValueError, match=rf"key='{bad}': expected a recorded order parameter, one of .*'m'"):
            sw.emergence(bad)
        with pytest.raises(ValueError, match=rf"key='{bad}'"):
            ba.emergence_vs_P(sw, key=bad)


def test_small_init_transition_names_a_bad_attention():
    with pytest.raises(ValueError, match=r"attention='x': expected one of 'softmax', 'linear'"):
        ba.theory.small_init_transition(ba.CopyTask(T=4, d=2), ba.Prior(), "x")
    with pytest.raises(ValueError, match="prior"):
        ba.theory.small_init_transition(ba.CopyTask(T=4, d=2), (1.0, 1.0, 1.0), "softmax")


def test_posterior_refuses_complex_input_it_would_cut_to_its_real_part():
    """A complex L or dataset was cut to its real part with only NumPy's warning: log_density of 1j gave that of 0."""
    data = ba.CopyTask(T=4, d=2).sample(jax.random.key(0), 6)
    post = ba.Posterior(data)
    for call, named in [
        (lambda: post.log_density(jnp.zeros((4, 4)) + 1j), "L has dtype complex128: expected real numbers"),
        (lambda: post.observables(jnp.zeros((3, 4, 4)) + 1j), "L has dtype complex128"),
        (lambda: ba.Posterior(ba.Dataset(data.X + 1j, data.Y, data.task)), "dataset.X has dtype complex128"),
    ]:
        with pytest.raises(ValueError, match=re.escape(named)):
            call()
    # traced and real input is untouched: the same value eagerly, under jit, and a gradient
    L = jnp.full((4, 4), 0.3)
    assert float(jax.jit(post.log_density)(L)) == pytest.approx(float(post.log_density(L)), rel=1e-12)
    assert np.all(np.isfinite(np.asarray(jax.grad(post.log_density)(L))))


def test_sampler_starts_refuse_complex_arrays():
    """A complex init started every chain from its real part (zeros for 1j), with only NumPy's warning."""
    post = ba.Posterior(ba.CopyTask(T=4, d=2).sample(jax.random.key(0), 6))
    with pytest.raises(
        ValueError, match=r"init=.*: expected one of 'cold', 'hot', 'prior' or an array of real numbers"
    ):
        ba.initial_positions(post, jax.random.key(0), np.full((4, 4), 1j), 2)
    assert ba.initial_positions(post, jax.random.key(0), np.full((4, 4), 0.5), 2).shape == (2, 4, 4)


def test_optimizer_refuses_settings_it_would_record_but_not_use():
    """A decay setting of another decay, a warm-up as long as the decay, a temperature for Adam and a learning rate
    or temperature given as text were accepted: recorded with the run, and not used (or used as a string)."""
    from bayesattn.training.core import OptimizerConfig, sgld

    for call, named in [
        (lambda: OptimizerConfig(decay_steps=5), "decay_steps=5 with decay='constant': expected None"),
        (lambda: OptimizerConfig(final_factor=0.1), "final_factor=0.1 with decay='constant': expected 0.0"),
        (lambda: OptimizerConfig(decay="cosine", plateau_patience=3), "plateau_patience=3 with decay='cosine'"),
        (lambda: OptimizerConfig(decay="cosine", warmup=10, decay_steps=10), "warmup=10 with decay_steps=10"),
        (lambda: OptimizerConfig(decay="exponential", warmup=10).build(10), "warmup=10 with steps=10"),
        (lambda: OptimizerConfig("adam").build(10, temperature=1.0), "temperature=1.0 with optimizer='adam'"),
        (lambda: sgld("0.1", 1.0), "learning_rate='0.1'"),
        (lambda: sgld(0.1, "1"), "temperature='1'"),
    ]:
        with pytest.raises(ValueError, match=re.escape(named)):
            call()
    # what each decay uses is taken, and a schedule or an array stays the caller's
    OptimizerConfig(decay="cosine", warmup=5, decay_steps=50, final_factor=0.1).build(100)
    OptimizerConfig(decay="plateau", plateau_patience=3, plateau_factor=0.2).build(10)
    OptimizerConfig("langevin").build(10, temperature=0.5)
    # a schedule and an array temperature are taken: at temperature 0 the update is -lr g (the formula by hand)
    opt = sgld(lambda step: 0.1, jnp.array(0.0))
    update, _ = opt.update(jnp.array([1.0, -2.0]), opt.init(jnp.zeros(2)), key=jax.random.key(0))
    assert np.allclose(np.asarray(update), [-0.1, 0.2])


def test_maps_and_references_refuse_complex_or_nan_input_they_passed_through():
    """Complex logits gave complex attention weights, complex X complex features, and a NaN L or V a NaN evidence,
    with no error; the references now refuse both, and the same calls on real input agree under jit."""
    data = ba.CopyTask(T=4, d=2).sample(jax.random.key(0), 6)
    post, mask, L = ba.Posterior(data), np.ones((4, 4), bool), jnp.full((4, 4), 0.2)
    V = jnp.ones((2, 2))
    for call, named in [
        (lambda: ba.softmax_attention(L + 1j, mask), "L has dtype complex128: expected real numbers"),
        (lambda: ba.linear_attention(np.asarray(L) + 1j, mask), "L has dtype complex128"),
        (lambda: post.features(L, data.X + 1j), "X has dtype complex128"),
        (lambda: post.predict(L, data.X + 1j), "X has dtype complex128"),
        (lambda: ba.gp_log_evidence(L * jnp.nan, data, "softmax", ba.Prior()), "L contains 16 NaN or inf"),
        (lambda: ba.gp_log_evidence(L + 1j, data, "softmax", ba.Prior()), "L has dtype complex128"),
        (lambda: ba.joint_log_density(L, V * jnp.nan, data, "softmax", ba.Prior()), "V contains 4 NaN or inf"),
        (lambda: ba.joint_log_density(L, V + 1j, data, "softmax", ba.Prior()), "V has dtype complex128"),
    ]:
        with pytest.raises(ValueError, match=re.escape(named)):
            call()
    gp = jax.jit(lambda L: ba.gp_log_evidence(L, data, "softmax", ba.Prior()))
    assert float(gp(L)) == pytest.approx(float(ba.gp_log_evidence(L, data, "softmax", ba.Prior())), rel=1e-12)
    # the closed form agrees with the dense reference (the same prior)
    assert float(post.log_likelihood(L)) == pytest.approx(float(gp(L)), rel=1e-9)


def test_sequence_loss_refuses_what_gave_nan_or_an_unnamed_error():
    """An all-False query mask, no sequence and all-zero weights gave NaN (a mean over nothing), a list of weights an
    AttributeError, complex predictions a complex loss; under jit the weights are not looked at."""
    F, Y, qm = jnp.zeros((2, 4, 3)), jnp.ones((2, 4, 3)), np.ones(4, bool)
    for call, named in [
        (
            lambda: sequence_loss("mse", F, Y, np.zeros(4, bool)),
            "query_mask=array([False, False, False, False]): expected a",
        ),
        (lambda: sequence_loss("mse", F[:0], Y[:0], qm), "F of 0 sequences"),
        (lambda: sequence_loss("mse", F, Y, qm, weights=[0.0, 0.0]), "weights=[0.0, 0.0]: expected numbers >= 0"),
        (lambda: sequence_loss("mse", F, Y, qm, weights=[1.0, -1.0]), "weights=[1.0, -1.0]"),
        (lambda: sequence_loss("mse", F + 1j, Y, qm), "F has dtype complex128"),
        # a mask of other numbers reweighted the rows or gave NaN
        (lambda: sequence_loss("mse", F, Y, np.array([-1.0, 1.0, 0.0, 1.0])), "query_mask=array([-1.,  1.,  0.,  1.])"),
        (lambda: sequence_loss("mse", F, Y, np.array([0.5, 2.0, 0.0, 1.0])), "expected booleans or 0 / 1"),
        # cross-entropy: a class past the outputs gave NaN, a negative one the last class, real targets no bound
        (lambda: sequence_loss("xent", F, np.full((2, 4), 3), qm), "classes from 3 to 3; expected integers in 0..2"),
        (lambda: sequence_loss("xent", F, np.full((2, 4), -1), qm), "classes from -1 to -1"),
        (lambda: sequence_loss("xent", F, -Y, qm), "Y: values from -1 to -1, row sums from -3 to -3; expected rows"),
    ]:
        with pytest.raises(ValueError, match=re.escape(named)):
            call()
    # a list of weights is an array: the weighted mean by hand (rows of squared error 1, and weights 1 and 3)
    F2 = F.at[1].set(1.0)  # the second sequence's error is 0
    assert float(sequence_loss("mse", F2, Y, qm, weights=[1.0, 3.0])) == pytest.approx(1.0 / 4.0)
    assert float(jax.jit(lambda w: sequence_loss("mse", F2, Y, qm, w))(jnp.array([1.0, 3.0]))) == pytest.approx(0.25)
    # probabilities are only required on queried rows of weighted sequences (a Dataset's other rows are zeros)
    Yp = np.zeros((2, 4, 3))
    Yp[0, 1:, 0] = 1.0
    Yp[1] = 5.0
    ok = sequence_loss("xent", F, Yp, np.array([False, True, True, True]), weights=[1.0, 0.0])
    assert float(ok) == pytest.approx(np.log(3.0))  # uniform predictions over 3 outputs


def test_a_dataset_built_directly_is_checked_by_every_consumer():
    """Dataset(...) checks nothing; a task of None or arrays given as lists failed with an AttributeError deep in
    the Posterior, the references, train and fit. check_dataset names the part that is wrong in each."""
    data = ba.CopyTask(T=4, d=2).sample(jax.random.key(0), 6)
    no_task = ba.Dataset(data.X, data.Y, None)
    lists = ba.Dataset(np.asarray(data.X).tolist(), np.asarray(data.Y).tolist(), data.task)
    nan_y = ba.Dataset(data.X, data.Y.at[0, 0, 0].set(jnp.nan), data.task)
    key, L = jax.random.key(1), jnp.zeros((4, 4))
    net = {"name": "single_layer", "T": 4, "d_in": 2}
    consumers = {
        "dataset": [
            lambda ds: ba.Posterior(ds),
            lambda ds: ba.gp_log_evidence(L, ds, "softmax", ba.Prior()),
            lambda ds: ba.train(ds, ba.Prior(), "softmax", key, steps=2),
        ],
        "data": [lambda ds: ba.fit(net, ds, key, steps=2)],
    }
    for name, calls in consumers.items():
        for call in calls:
            with pytest.raises(ValueError, match=re.escape(f"{name}.task=None: expected a bayesattn Task")):
                call(no_task)
            with pytest.raises(ValueError, match=re.escape(f"{name}.Y contains 1 NaN or inf")):
                call(nan_y)
    # arrays given as lists are arrays: the same posterior as the Dataset's own
    assert float(ba.Posterior(lists).log_density(L)) == pytest.approx(float(ba.Posterior(data).log_density(L)))
    with pytest.raises(ValueError, match=re.escape("test.task=None")):
        ba.train(data, ba.Prior(), "softmax", key, steps=2, test=no_task)


def test_theory_formulas_refuse_scales_and_values_that_gave_nan_or_a_crash():
    """action with T_q = 0 divided by zero, a negative eps gave NaN; tilted_row_entropy took NaN h; mode_action
    took NaN or complex x (cut to its real part); heads_energy took complex m."""
    th, task = ba.theory, ba.CopyTask(T=8, d=4)
    kw = dict(beta=1.0, eps=0.1, d=2, T_q=2)
    for call, named in [
        (lambda: th.action(0.5, 0.3, 0.1, **{**kw, "T_q": 0}), "T_q=0: expected a positive finite number"),
        (lambda: th.action(0.5, 0.3, 0.1, **{**kw, "eps": -0.1}), "eps=-0.1"),
        (lambda: th.action("a", 0.3, 0.1, **kw), "m has dtype <U1"),
        (lambda: th.tilted_row_entropy(task, ba.Prior(), float("nan"), 0.0), "h=nan: expected a finite number"),
        (lambda: th.tilted_row_entropy(task, ba.Prior(), 1.0, 0.0, beta_max=float("nan")), "beta_max=nan"),
        (lambda: th.mode_action(task, ba.Prior(), "softmax", 100, [np.nan]), "x contains 1 NaN or inf"),
        (lambda: th.mode_action(task, ba.Prior(), "softmax", 100, [1j]), "x has dtype complex128"),
        # a negative radius or overlap gave NaN, a string entropy a raw TypeError
        (
            lambda: th.mode_action(task, ba.Prior(), "linear", 100, [-1.0]),
            "x=array([-1.]): expected radii q >= 0 for linear",
        ),
        (lambda: th.action(0.5, -1.0, 0.0, **kw), "q=array(-1.): expected q >= 0"),
        (lambda: th.action(0.5, 0.5, "x", **kw), "entropy has dtype <U1"),
        (
            lambda: th.heads_energy(
                np.full((2, 2), 0.3 + 1j), np.eye(2), task=ba.MultiLagCopyTask(4, 2), prior=ba.Prior(), P=10
            ),
            "m has dtype complex128",
        ),
    ]:
        with pytest.raises(ValueError, match=re.escape(named)):
            call()
    # the formula by hand at good input, eagerly and with a traced beta
    want = 1.0 * (1 - 0.25 / 0.4) + 4 / 4 * np.log1p(3.0) + 0.1
    assert float(th.action(0.5, 0.3, 0.1, **kw)) == pytest.approx(want, rel=1e-12)
    traced = jax.jit(lambda b: th.action(0.5, 0.3, 0.1, **{**kw, "beta": b}))(1.0)
    assert float(traced) == pytest.approx(want, rel=1e-12)


def test_samplers_and_observables_refuse_particles_and_weights_of_another_kind():
    """tempered_smc's particles given as a list, a scalar, integers or NaN failed inside blackjax or returned a NaN
    evidence; order_parameters of complex weights were complex, of a list an AttributeError; joint_model without a
    Prior or with a Dataset for its task, and SufficientStats.from_data without a query mask, failed deep."""
    from bayesattn.bayes.joint import joint_model
    from bayesattn.bayes.statistics import SufficientStats

    lp = lambda x: -0.5 * jnp.sum(x**2)  # noqa: E731
    ll = lambda x: -0.5 * jnp.sum((x - 1.0) ** 2)  # noqa: E731
    key, parts = jax.random.key(0), jax.random.normal(jax.random.key(1), (8, 2))
    task = ba.CopyTask(T=4, d=2)
    data, A = task.sample(key, 3), np.full((4, 4), 0.25)
    handlers = pytest.importorskip("numpyro.handlers")
    for call, named in [
        (lambda: ba.tempered_smc(lp, ll, key, [[0.0, 1.0]] * 8), "particles=<list>: expected arrays"),
        (lambda: ba.tempered_smc(lp, ll, key, jnp.zeros(())), "particles has shape ()"),
        (lambda: ba.tempered_smc(lp, ll, key, jnp.zeros((1, 2))), "particles has shape (1, 2)"),
        (lambda: ba.tempered_smc(lp, ll, key, jnp.ones((8, 2), int)), "particles has dtype int64"),
        (lambda: ba.tempered_smc(lp, ll, key, parts * jnp.nan), "particles contains 16 NaN"),
        (lambda: ba.tempered_smc(1.0, ll, key, parts), "logprior_fn=1.0: expected a function"),
        (lambda: ba.order_parameters(A + 1j, task.target_pattern, task.query_mask), "alpha has dtype complex128"),
        (lambda: ba.order_parameters("x", task.target_pattern, task.query_mask), "alpha has dtype <U1"),
        (lambda: handlers.seed(joint_model, 0)(data.X, data.Y, task, "softmax", None), "prior=None"),
        (lambda: handlers.seed(joint_model, 0)(data.X, data.Y, data, "softmax", ba.Prior()), "task=<Dataset>"),
        (lambda: SufficientStats.from_data(data.X, data.Y, None), "query_mask of shape () and dtype object"),
    ]:
        with pytest.raises(ValueError, match=re.escape(named)):
            call()
    # a list of weights is an array: the uniform rows' order parameters by hand (m = q = 1 / T)
    op = ba.order_parameters(A.tolist(), task.target_pattern, task.query_mask)
    assert float(op["m"]) == pytest.approx(0.25) and float(op["q"]) == pytest.approx(0.25)


def test_training_helpers_refuse_arguments_that_failed_without_naming_them():
    """A complex init was cut to its real part; emergence of complex records likewise, of a list key a TypeError;
    emergence_vs_P of a dict an AttributeError; run_loop without a loss or record function, with a text bound or
    no parameters failed inside JAX; save_checkpoint to a folder raised IsADirectoryError after writing."""
    import optax

    from bayesattn.training.analysis import emergence_vs_P
    from bayesattn.training.results import emergence

    data, key = ba.CopyTask(T=4, d=2).sample(jax.random.key(0), 6), jax.random.key(1)
    plan, params = ba.Plan.make(4, 2), {"a": jnp.ones(2)}
    loss = lambda p, k: jnp.sum(p["a"] ** 2)  # noqa: E731
    rec = lambda p: {"n": jnp.sum(p["a"])}  # noqa: E731
    for call, named in [
        (lambda: ba.train(data, ba.Prior(), "softmax", key, steps=2, init=np.full((4, 4), 1j)), "complex128"),
        (lambda: emergence({"step": [0, 1, 2], "m": [0.0, 0.5j, 1.0]}), "history['m'] has dtype complex128"),
        (lambda: emergence({"step": [0, 1], "m": [0.0, 1.0]}, key=["m"]), "key=['m']: expected the name"),
        (lambda: emergence_vs_P({"m": 1}), "sweep={'m': 1}: expected a SweepResult"),
        (lambda: ba.run_loop(params, None, optax.sgd(0.1), plan, rec, key), "loss_fn=None: expected a function"),
        (lambda: ba.run_loop(params, loss, optax.sgd(0.1), plan, None, key), "record_fn=None"),
        (lambda: ba.run_loop(params, loss, optax.sgd(0.1), plan, rec, key, on_record=3), "on_record=3"),
        (lambda: ba.run_loop(params, loss, optax.sgd(0.1), plan, rec, key, bound="big"), "bound='big'"),
        (lambda: ba.run_loop({}, loss, optax.sgd(0.1), plan, rec, key), "params: 0 arrays"),
        (lambda: ba.run_loop({"a": jnp.ones(2, int)}, loss, optax.sgd(0.1), plan, rec, key), "['int64']"),
    ]:
        with pytest.raises(ValueError, match=re.escape(named)):
            call()


def test_save_checkpoint_refuses_a_folder_or_a_name_that_is_not_one(tmp_path):
    """A folder as the path wrote its temporary file beside it and then failed with IsADirectoryError; an int path
    raised a TypeError that did not name it."""
    from bayesattn.models import SingleLayerConfig

    net = SingleLayerConfig.for_task(ba.CopyTask(T=4, d=2)).build(jax.random.key(0))
    for path, named in [(tmp_path, "a folder; expected the name of a checkpoint file"), (3, "path=3")]:
        with pytest.raises(ValueError, match=re.escape(named)):
            save_checkpoint(path, net)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written beside the folder
    save_checkpoint(tmp_path / "w.eqx", net, step=1)
    assert np.array_equal(np.asarray(load_checkpoint(tmp_path / "w.eqx").L), np.asarray(net.L))


def test_joint_model_branch_evidences_and_patterns_name_what_failed_deep():
    """joint_model's data of another T or with NaN failed inside numpyro ("Normal distribution got invalid loc");
    branch_evidences without a density function raised a TypeError, and a complex reference was cut to its real
    part; a target pattern of None reached JAX; the base Task's sample raised a bare NotImplementedError."""
    from bayesattn.bayes.joint import joint_model

    handlers = pytest.importorskip("numpyro.handlers")
    task = ba.CopyTask(T=4, d=2)
    data, other = task.sample(jax.random.key(0), 3), ba.CopyTask(T=3, d=2).sample(jax.random.key(0), 3)
    post, ones = ba.Posterior(data), np.ones((4, 4))
    refs = {"a": (0 * ones, ones), "b": (ones, ones)}
    model = handlers.seed(joint_model, 0)
    for call, named in [
        (
            lambda: model(other.X, other.Y, task, "softmax", ba.Prior()),
            "X has shape (3, 3, 2): expected shape (*, 4, 2)",
        ),
        (lambda: model(data.X * jnp.nan, data.Y, task, "softmax", ba.Prior()), "X contains 24 NaN or inf"),
        (lambda: ba.branch_evidences(None, jax.random.key(0), refs), "logdensity_fn=None: expected a function"),
        (lambda: ba.branch_evidences(post.log_density, jax.random.key(0), refs, observable_fn=3), "observable_fn=3"),
        (
            lambda: ba.branch_evidences(post.log_density, jax.random.key(0), {**refs, "a": (ones + 1j, ones)}),
            "branches['a']: expected a (mean, std) tuple of real numeric arrays",
        ),
        (
            lambda: ba.branch_evidences(lambda L: jnp.nan * L.sum(), jax.random.key(0), refs),
            "logdensity_fn is nan at the mean of branch",  # its weights were NaN, without a word
        ),
        (lambda: ba.order_parameters(ones / 4, None, task.query_mask), "target_pattern of shape (): expected (4, 4)"),
        (lambda: ba.Task(4, 2).sample(jax.random.key(0), 2), "Task cannot sample"),
    ]:
        with pytest.raises((ValueError, NotImplementedError), match=re.escape(named)):
            call()
    # the model's trace at good input (lists are arrays): the likelihood site holds the query rows' targets
    trace = handlers.trace(model).get_trace(np.asarray(data.X).tolist(), data.Y, task, "softmax", ba.Prior())
    assert np.array_equal(np.asarray(trace["Y"]["value"]), np.asarray(data.Y)[:, np.flatnonzero(task.query_mask)])


def test_objectives_gram_and_progress_refuse_input_they_took():
    """training_objective of a complex V and marginal_objective of a complex L were cut to their real parts;
    Posterior.gram of a NaN L returned NaN; softmax_attention of a text failed inside JAX; StepProgress with a
    number for its label failed in tqdm."""
    from bayesattn.training.core import StepProgress

    data = ba.CopyTask(T=4, d=2).sample(jax.random.key(0), 6)
    post, L, V = ba.Posterior(data), jnp.full((4, 4), 0.1), jnp.ones((2, 2))
    for call, named in [
        (lambda: ba.training_objective(L, V + 1j, post), "V has dtype complex128"),
        (lambda: ba.marginal_objective(L + 1j, post), "L has dtype complex128"),
        (lambda: post.gram(L * jnp.nan), "L contains 16 NaN or inf"),
        (lambda: ba.softmax_attention("abc", np.ones((4, 4), bool)), "L has dtype <U3"),
        (lambda: StepProgress(5, 3, enabled=False), "desc=3: expected the bar's label"),
        (lambda: StepProgress(5, "x", enabled="no"), "enabled='no': expected True or False"),  # "no" drew a bar
    ]:
        with pytest.raises(ValueError, match=re.escape(named)):
            call()
    # a list of logits is an array: the uniform rows of zero logits
    assert np.allclose(np.asarray(ba.softmax_attention([[0.0, 0.0], [0.0, 0.0]], np.ones((2, 2), bool))), 0.5)
    G, _ = post.gram(L)
    assert np.all(np.isfinite(np.asarray(G)))


def test_calls_that_ended_in_an_unnamed_error_name_their_argument():
    """order_parameters of H heads on a task of several lags raised KeyError: 'm'; critical_exponent with one
    rel_range value failed to unpack it."""
    key = jax.random.key(0)
    task = ba.MultiLagCopyTask(T=4, d=2)
    post = ba.Posterior(task.sample(key, 4), heads=2)
    with pytest.raises(ValueError, match=r"MultiLagCopyTask with 2 heads has no single m, q, u; .* mass_max:lag1"):
        post.order_parameters(np.zeros((2, 4, 4)))
    assert set(post.observables(np.zeros((2, 4, 4)))) >= {"mass_max:lag1", "overlap"}
    with pytest.raises(ValueError, match=re.escape("rel_range=(0.1,): expected (low, high)")):
        ba.theory.critical_exponent(ba.CopyTask(T=4, d=2), ba.Prior(), rel_range=(0.1,))


def test_branch_evidences_name_a_branch_whose_evidence_is_not_finite():
    """A density finite at the branches' means but NaN on part of the space: the SMC run whose particles reach it
    has a NaN log evidence, which made every weight NaN; now the branch is named."""
    z, o = np.zeros(2), np.ones(2)
    density = lambda x: jnp.where(x[0] > 2.0, jnp.nan, -0.5 * jnp.sum(x**2))  # noqa: E731
    with pytest.raises(RuntimeError, match=r"branch 'a': the log evidence is not finite in a run"):
        ba.branch_evidences(
            density, jax.random.key(0), {"a": (z, o), "b": (o, o)}, runs=2, num_particles=64, num_mcmc_steps=2
        )


def test_sample_refuses_draws_too_many_to_hold_before_any_work():
    """A trillion kept draws, or a hundred million chains, failed inside XLA with RESOURCE_EXHAUSTED."""
    post = ba.Posterior(ba.CopyTask(T=4, d=2).sample(jax.random.key(0), 8), "softmax", ba.Prior())
    with pytest.raises(ValueError, match=r"num_chains=4, num_samples=1000000000000, thin=1: .* expected at most"):
        ba.sample(post, jax.random.key(1), num_samples=10**12)
    with pytest.raises(ValueError, match=r"num_chains=1000000000, num_samples=1000, thin=10: .* a larger thin\)"):
        ba.sample(post, jax.random.key(1), num_chains=10**9, thin=10)
