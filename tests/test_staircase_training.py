"""The minimal model and optimiser of the training staircase: AdamW with decoupled weight decay, clipping and
a plateau decay against a hand-written reference; the multi-head network's Xavier init and score scale."""

from types import SimpleNamespace

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from bayesattn.models import MultiHeadConfig
from bayesattn.training.core import OptimizerConfig


def _adamw_reference(p, grads, lr, wd, clip, b1=0.9, b2=0.999, eps=1e-8):
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        n = np.linalg.norm(g)
        g = g * min(1.0, clip / n)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g**2
        mh, vh = m / (1 - b1**t), v / (1 - b2**t)
        p = p - lr * (mh / (np.sqrt(vh) + eps) + wd * p)
    return p


def test_adamw_weight_decay_and_clipping_match_reference():
    rng = np.random.default_rng(0)
    p0 = rng.normal(size=5)
    grads = [3.0 * rng.normal(size=5) for _ in range(4)]
    opt = OptimizerConfig("adamw", 0.08, weight_decay=0.01, clip=1.0).build(4)
    p, st = jnp.asarray(p0), None
    st = opt.init(p)
    for g in grads:
        u, st = opt.update(jnp.asarray(g), st, p)
        p = optax.apply_updates(p, u)
    np.testing.assert_allclose(np.asarray(p), _adamw_reference(p0, grads, 0.08, 0.01, 1.0), rtol=1e-10)


def test_plateau_halves_the_step_after_patience_bad_steps():
    # optax reduces after `plateau_patience` steps without improvement; the staircase passes torch's patience + 1
    opt = optax.with_extra_args_support(
        OptimizerConfig("sgd", 1.0, decay="plateau", plateau_patience=3, plateau_factor=0.5).build(10)
    )
    p = jnp.zeros(1)
    st = opt.init(p)
    steps = []
    for value in [1.0, 1.0, 1.0, 1.0, 1.0]:
        u, st = opt.update(jnp.ones(1), st, p, value=value)
        steps.append(float(-u[0]))
    assert steps == [1.0, 1.0, 1.0, 0.5, 0.5]


@pytest.mark.parametrize("bad", [dict(name="adam", weight_decay=0.1), dict(name="adamw", weight_decay=-1.0)])
def test_weight_decay_bad_input(bad):
    with pytest.raises(ValueError, match="weight_decay"):
        OptimizerConfig(lr=0.1, **bad)


def test_sgd_momentum_is_heavy_ball_and_only_sgds():
    """OptimizerConfig("sgd", momentum=mu): v <- mu v + g, p <- p - lr v (torch's SGD), written out by hand."""
    opt = OptimizerConfig("sgd", 0.1, momentum=0.9).build(10)
    p, v = jnp.zeros(2), np.zeros(2)
    st = opt.init(p)
    for g in ([1.0, -2.0], [0.5, 0.0], [-1.0, 3.0]):
        u, st = opt.update(jnp.asarray(g), st, p)
        p = p + u
        v = 0.9 * v + np.asarray(g)
        np.testing.assert_allclose(np.asarray(u), -0.1 * v, rtol=1e-12)
    for bad in (dict(name="adam", momentum=0.9), dict(name="sgd", momentum=1.0)):
        with pytest.raises(ValueError, match="momentum"):
            OptimizerConfig(lr=0.1, **bad)


def test_multihead_xavier_init_and_score_scale():
    cfg = MultiHeadConfig(T=5, d_in=4, heads=2, init="xavier", init_scale=1.0, score_scale=1 / 3.0)
    net = cfg.build(jax.random.key(0))
    b = np.sqrt(3.0 / 9)
    assert float(jnp.max(jnp.abs(net.W_Q))) <= b and float(jnp.max(jnp.abs(net.W_V))) <= b
    assert float(jnp.max(jnp.abs(net.W_Q))) > 0.8 * b
    x = jax.nn.one_hot(jnp.array([0, 3, 1, 2, 2]), 4)
    y, attn = net(x)
    xp = np.concatenate([np.asarray(x), np.eye(5)], axis=1)
    for h in range(2):
        s = xp @ np.asarray(net.W_Q[h]) @ xp.T / 3.0
        s = np.where(np.tril(np.ones((5, 5))) > 0, s, -np.inf)
        a = np.exp(s - s.max(1, keepdims=True))
        a /= a.sum(1, keepdims=True)
        np.testing.assert_allclose(np.asarray(attn[0, h]), a, atol=1e-12)
    ref = sum(np.asarray(attn[0, h]) @ xp @ np.asarray(net.W_V[h]).T for h in range(2))
    np.testing.assert_allclose(np.asarray(y), ref, atol=1e-12)


# ---------------------------------------------------------------- the minimal model's gather forward
from bayesattn.experiments.staircase.config import TrainingConfig  # noqa: E402
from bayesattn.experiments.staircase.models import minimal_logits  # noqa: E402
from bayesattn.experiments.staircase.training import stage_times, train_minimal  # noqa: E402


def _general(net, tokens, q0):
    V = net.config.d_in
    y, attn = jax.vmap(net)(jax.nn.one_hot(tokens, V, dtype=jnp.float64))
    return y[:, q0:], jnp.transpose(attn[:, 0, :, q0:, :], (0, 2, 1, 3))


@pytest.mark.parametrize("q0", [0, 3])
def test_gather_forward_and_gradient_equal_the_general_path(q0):
    V, T, H = 7, 9, 2
    cfg = MultiHeadConfig(
        T=T,
        d_in=V,
        heads=H,
        positions="onehot",
        decoder="identity",
        mask="causal",
        init="xavier",
        init_scale=3.0,
        score_scale=1 / np.sqrt(V + T),
    )
    net = cfg.build(jax.random.key(1))
    tokens = jax.random.randint(jax.random.key(2), (5, T), 0, V)
    target = jax.random.normal(jax.random.key(3), (5, T - q0, V))
    y, a = jax.jit(minimal_logits, static_argnums=(3, 4, 5))(net.W_Q, net.W_V, tokens, cfg.score_scale, q0, jnp.float64)
    y0, a0 = eqx.filter_jit(_general)(net, tokens, q0)
    np.testing.assert_allclose(np.asarray(y), np.asarray(y0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(a), np.asarray(a0), rtol=1e-12, atol=1e-14)

    def loss_gather(W):
        y, a = minimal_logits(W[0], W[1], tokens, cfg.score_scale, q0, dtype=jnp.float64)
        return jnp.sum(jax.nn.log_softmax(y) * target) + jnp.sum(a[..., 0] ** 2)

    def loss_general(W):
        y, a = _general(eqx.tree_at(lambda n: (n.W_Q, n.W_V), net, W), tokens, q0)
        return jnp.sum(jax.nn.log_softmax(y) * target) + jnp.sum(a[..., 0] ** 2)

    g1 = jax.jit(jax.grad(loss_gather))((net.W_Q, net.W_V))
    g0 = jax.jit(jax.grad(loss_general))((net.W_Q, net.W_V))
    for a, b in zip(g1, g0):
        assert float(jnp.max(jnp.abs(b))) > 1e-3
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-12)


def test_gather_forward_float32_close_to_float64():
    V, T = 6, 8
    cfg = MultiHeadConfig(
        T=T,
        d_in=V,
        heads=3,
        positions="onehot",
        decoder="identity",
        mask="causal",
        init="xavier",
        init_scale=1.0,
        score_scale=1 / np.sqrt(V + T),
    )
    net = cfg.build(jax.random.key(0))
    tokens = jax.random.randint(jax.random.key(1), (4, T), 0, V)
    f = jax.jit(minimal_logits, static_argnums=(3, 4, 5))
    y32, a32 = f(net.W_Q, net.W_V, tokens, cfg.score_scale, 2, jnp.float32)
    y64, a64 = f(net.W_Q, net.W_V, tokens, cfg.score_scale, 2, jnp.float64)
    assert y32.dtype == jnp.float32 and a32.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(y32), np.asarray(y64), atol=1e-5)


def test_gather_forward_bad_shapes():
    with pytest.raises(ValueError, match="W_Q"):
        minimal_logits(jnp.zeros((2, 10, 10)), jnp.zeros((2, 5, 10)), jnp.zeros((3, 4), int), 1.0)


# ---------------------------------------------------------------- the training part and its variants
_TINY = dict(
    vocab=6,
    span_lengths=(1, 1),
    generated=6,
    heads=2,
    train=40,
    val=20,
    batch_size=16,
    steps=6,
    record_every=3,
    probe=10,
)


@pytest.mark.parametrize(
    "variant",
    [dict(), dict(optimizer="sgd", lr=0.5, momentum=0.9), dict(model="transformer", width=12, mlp=8, lr=0.003)],
)
def test_training_variants_record_what_they_should(variant):
    cfg = TrainingConfig(**_TINY, **variant)
    out = train_minimal(cfg, 0)
    R, H, K = 3, 2, 2
    assert out["failed_at"] == -1
    np.testing.assert_array_equal(out["step"], [0, 3, 6])
    assert out["mass_last"].shape == (R, H, K) and out["mass_rows"].shape == (R, H, K) and out["kl"].shape == (R, K)
    # the spans hold 1 of the last query's keys each; masses are probabilities
    assert np.all(out["mass_last"] >= 0) and np.all(out["mass_last"].sum(-1) <= 1 + 1e-9)
    assert np.all(out["kl"] >= -1e-9)
    # the loss is the cross-entropy of samples of the teacher: its mean is at least the teacher's entropy
    assert np.all(out["val_loss"] > 0.5 * out["teacher_entropy"])
    assert not np.allclose(out["val_loss"][0], out["val_loss"][-1])  # the parameters moved


def test_training_record_matches_the_general_network():
    # the first record (step 0) of the minimal model equals the general network's loss on the same data
    cfg = TrainingConfig(**_TINY)
    out = train_minimal(cfg, 3)
    task = cfg.task(3)  # the run's own teacher (one per seed)
    assert out["teacher_seed"] == 3 and task.seed == 3
    assert TrainingConfig(**_TINY, teacher="fixed", teacher_seed=5).task(3).seed == 5  # one teacher for all seeds
    k_data, k_val, k_init, _ = jax.random.split(jax.random.key(3), 4)
    val = task.sample(k_val, cfg.val)
    net = cfg.network().build(k_init)
    y, _ = jax.vmap(net)(val.X[: cfg.probe])
    q0 = task.burn_in - 1
    ref = -np.mean(np.sum(np.asarray(val.Y[: cfg.probe, q0:]) * np.asarray(jax.nn.log_softmax(y[:, q0:])), -1))
    assert abs(out["val_loss"][0] - ref) < 1e-5


def test_the_teacher_is_as_sharp_as_the_papers_and_old_points_keep_their_names():
    """The paper's runs sample softmax(logits / 0.1): the default teacher's logits are 10x those of scale 1, for the
    same U_k. A point made before the field existed (scale 1, one fixed teacher, finite data) keeps its dict."""
    cfg = TrainingConfig(**_TINY)
    tokens = jax.nn.one_hot(jnp.arange(cfg.task(2).T) % cfg.vocab, cfg.vocab, dtype=jnp.float64)
    sharp, soft = cfg.task(2), cfg.replace(scale=1.0).task(2)
    assert sharp.scale == 10.0
    np.testing.assert_allclose(sharp.teacher_logits(tokens), 10.0 * soft.teacher_logits(tokens), rtol=1e-12)
    legacy = TrainingConfig(**_TINY, scale=1.0, teacher="fixed", data="finite")
    assert not {"scale", "teacher", "data", "query_init", "value_init"} & set(legacy.point_dict())
    small = TrainingConfig(**_TINY, query_init=1e-9, value_init=0.0)
    assert (small.network().init_scale, small.network().value_init_scale) == (1e-9, 0.0)
    assert small.point_dict()["value_init"] == 0.0
    assert TrainingConfig(**_TINY).point_dict()["scale"] == 10.0


@pytest.mark.parametrize(
    "bad, name",
    [
        (dict(model="mlp"), "model"),
        (dict(optimizer="adam"), "optimizer"),
        (dict(momentum=0.5), "momentum"),
        (dict(optimizer="sgd", momentum=1.5), "momentum"),
        (dict(model="transformer", width=10), "width"),
        (dict(probe=5000), "probe"),
        (dict(batch_size=0), "batch_size"),
    ],
)
def test_training_config_bad_input(bad, name):
    with pytest.raises(ValueError, match=name):
        TrainingConfig.load(bad)


def test_stage_times_reads_first_covered_steps():
    steps = np.array([0, 10, 20, 30])
    mass = np.zeros((4, 2, 2))  # (R, H, K); span 2 is the newest
    mass[1:, 0, 1] = 0.6  # newest covered from step 10
    mass[3, 1, 0] = 0.7  # oldest from step 30
    mass[2, 1, 0] = 0.7  # (and at step 20)
    assert stage_times(steps, mass) == [10, 20]
    assert stage_times(steps, mass, threshold=0.65) == [None, None]


def test_transformer_variant_layout_against_numpy():
    """The paper's full one-layer transformer (post-LayerNorm, ReLU MLP with biases, learned positions, orthogonal
    embedding and output map, Xavier weights) against a numpy forward written from its torch layout."""
    from bayesattn.models.transformer import TransformerConfig

    V, T, width, H, mlp = 5, 6, 12, 3, 4
    cfg = TransformerConfig(
        T=T,
        width=width,
        layers=1,
        heads=H,
        mlp=mlp,
        norm="layernorm",
        norm_position="post",
        positions="learned",
        vocab=V,
        d_out=V,
        activation="relu",
        mlp_bias=True,
        init="xavier",
    )
    net = cfg.build(jax.random.key(0))
    E, U = np.asarray(net.embedding.W_E), np.asarray(net.embedding.W_U)
    np.testing.assert_allclose(E @ E.T, np.eye(V), atol=1e-12)  # orthonormal token embeddings
    np.testing.assert_allclose(U @ U.T, np.eye(V), atol=1e-12)
    blk = net.blocks[0]
    assert float(jnp.max(jnp.abs(blk.W_Q))) <= np.sqrt(6 / (2 * width))
    assert float(jnp.max(jnp.abs(net.pos))) <= np.sqrt(6 / (T + width))
    # non-zero biases, so that they are exercised
    blk = eqx.tree_at(lambda b: (b.b_in, b.b_out), blk, (0.3 * jnp.ones(mlp), -0.2 * jnp.ones(width)))
    net = eqx.tree_at(lambda n: n.blocks[0], net, blk)
    tok = np.array([0, 3, 1, 4, 4, 2])
    y, attn = net(jnp.asarray(tok))

    def ln(h):
        h = h - h.mean(-1, keepdims=True)
        return h / np.sqrt((h**2).mean(-1, keepdims=True) + 1e-5)

    g = {k: np.asarray(getattr(blk, k)) for k in ("W_Q", "W_K", "W_V", "W_O", "W_in", "W_out", "b_in", "b_out")}
    x = E[tok] + np.asarray(net.pos)
    dh = width // H
    q, k, v = (x @ g[w].T for w in ("W_Q", "W_K", "W_V"))
    out = np.zeros_like(x)
    for h in range(H):
        sl = slice(h * dh, (h + 1) * dh)
        s = q[:, sl] @ k[:, sl].T / np.sqrt(dh)
        s = np.where(np.tril(np.ones((T, T))) > 0, s, -np.inf)
        a = np.exp(s - s.max(1, keepdims=True))
        a /= a.sum(1, keepdims=True)
        np.testing.assert_allclose(np.asarray(attn[0, h]), a, atol=1e-12)
        out[:, sl] = a @ v[:, sl]
    x = ln(x + out @ g["W_O"].T)
    x = ln(x + np.maximum(x @ g["W_in"].T + g["b_in"], 0) @ g["W_out"].T + g["b_out"])
    np.testing.assert_allclose(np.asarray(y), x @ U.T, rtol=1e-10, atol=1e-12)


def test_config_variants_make_labelled_points_and_bad_ones_name_the_parameter(tmp_path):
    from bayesattn.experiments.staircase import Staircase

    points = Staircase().points
    path = tmp_path / "v.toml"
    path.write_text(
        'name = "v"\nparts = ["train"]\ntrain_seeds = 2\n[train]\nbatch_size = 600\n'
        '[train_variants.sgd]\noptimizer = "sgd"\nlr = 0.5\nmomentum = 0.9\nseeds = 3\n'
    )
    cfg = Staircase.load_config(path)
    pts = points(cfg)["train"]
    assert [(p["variant"], p["seed"]) for p in pts] == [("main", 0), ("main", 1), ("sgd", 0), ("sgd", 1), ("sgd", 2)]
    assert pts[2]["train"]["batch_size"] == 600 and pts[2]["train"]["momentum"] == 0.9  # [train] underneath
    assert {p["variant"] for p in points(cfg.replace(train_only=["sgd"]))["train"]} == {"sgd"}
    with pytest.raises(ValueError, match="train_only"):  # an unknown run: refused before any point is made
        cfg.replace(train_only=["adam"])
    path.write_text('name = "v"\n[train_variants.bad]\nmomentum = 0.9\n')
    with pytest.raises(ValueError, match="momentum"):
        Staircase.load_config(path)


def test_a_killed_training_point_goes_on_from_its_last_part(tmp_path, monkeypatch, kill_at_second_save):
    """The experiment's training point with an artifacts folder: killed after its second part (in the save that
    follows it), it leaves its state there, and the rerun goes on from that part and returns the uninterrupted
    run's records bit for bit (the reference: train_minimal in one compiled program); the file is removed at the
    end. The SGD transformer, so that momentum and the LayerNorm's parameters cross the cuts. The run's time is
    carried across the kill: with the rerun's clock stopped, it reports exactly the time saved with its state."""
    from bayesattn.experiments.staircase import bayes, training
    from bayesattn.training import checkpoints

    cfg = TrainingConfig(
        **{**_TINY, "steps": 30}, model="transformer", width=12, mlp=8, optimizer="sgd", lr=0.2, momentum=0.9
    )
    point = {"method": "train", "variant": "t", "train": cfg.config(), "seed": 3}
    monkeypatch.setattr(training, "PART_STEPS", 10**6)
    whole = training.train_minimal(cfg, 3)
    monkeypatch.setattr(training, "PART_STEPS", 9)  # parts of 9 steps: cuts at steps 9, 18, 27
    probe = kill_at_second_save(training)
    with pytest.raises(KeyboardInterrupt):
        bayes.train_point(point, artifacts=tmp_path)
    assert [int(args[1].step) for args, _ in probe.saves] == [9, 18]
    assert len(list(tmp_path.glob("train-*.npz"))) == 1
    metas = [args[4] for args, _ in probe.saves]
    probe.resume()
    # the rerun's clock stands still
    monkeypatch.setattr(checkpoints, "time", SimpleNamespace(perf_counter=lambda: 0.0))
    again = bayes.train_point(point, artifacts=tmp_path)
    assert [int(state.step) for state, _ in probe.loaded] == [18]
    assert metas[1]["wall_s"] > metas[0]["wall_s"] > 0.0 and again["train_wall_s"] == metas[1]["wall_s"]
    for k in ("step", "val_loss", "train_loss", "mass_last", "mass_rows", "kl"):
        np.testing.assert_array_equal(again[k], whole[k])
    assert not list(tmp_path.glob("train-*"))


def test_a_training_point_resumed_from_a_state_without_its_time_reports_the_time_unknown(
    tmp_path, monkeypatch, kill_at_second_save
):
    """A state saved without the time spent before it (by an older version) resumes as usual, but the run's
    training time is then not known: None, not the rerun's seconds alone (an undercount)."""
    from bayesattn.experiments.staircase import bayes, training

    cfg = TrainingConfig(**{**_TINY, "steps": 30})
    point = {"method": "train", "variant": "t", "train": cfg.config(), "seed": 1}
    monkeypatch.setattr(training, "PART_STEPS", 9)
    probe = kill_at_second_save(training)
    again = probe.rerun_without_saved_time(
        lambda: bayes.train_point(point, artifacts=tmp_path), tmp_path, "train-*.npz"
    )
    assert [int(state.step) for state, _ in probe.loaded] == [18]
    assert again["train_wall_s"] is None


def test_summary_names_the_papers_boundaries_of_each_run_kind():
    """Each training run is set beside the paper's boundaries for its model and optimizer (none where the paper has
    no such run), in the summary and in the printed line; the leave-teacher steps are read off the KL minima; a run's
    time is its training time over every process that ran it, where the record has it."""
    from bayesattn.experiments.staircase.summary import describe, summarize

    steps = np.arange(0, 50, 10)
    kl = np.array([[3.0, 3.0, 3.0], [1.0, 2.0, 2.5], [2.0, 0.5, 1.0], [3.0, 1.0, 0.2], [4.0, 2.0, 0.1]])

    def rec(model, optimizer, variant):
        train = {**TrainingConfig(model=model, optimizer=optimizer, width=12, mlp=8).config()}
        result = {"stages": [10, 20, None], "step": steps.tolist(), "kl": kl.tolist()}
        return {"point": {"variant": variant, "train": train, "seed": 0}, "result": result, "wall_time_s": 1.0}

    recs = [rec("minimal", "adamw", "main"), rec("transformer", "sgd", "sgd_transformer"), rec("minimal", "sgd", "sgd")]
    recs[1]["result"]["train_wall_s"] = 7.0  # a resumed run: its time over every process, not the last one's
    t = summarize({"train": recs})["train"]
    assert t["wall_s"] == [1.0, 7.0, 1.0]
    assert t["paper_boundaries"] == [(330, 575), (600, 4000), None]
    assert t["leave_teacher_steps"] == [[10, 20]] * 3
    lines = [line for line in describe({"train": t}) if line.startswith("training")]
    assert lines[1].endswith("(the paper: ~600 and ~4000)") and "the paper" not in lines[2]
