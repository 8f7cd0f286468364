"""Circuit screens (bayesattn.diagnostics.screens) against brute-force references and constructed heads."""

import numpy as np
import pytest

from bayesattn.diagnostics import screens as S


def _causal_uniform(N, T):
    a = np.tril(np.ones((T, T)))
    return np.broadcast_to(a / a.sum(1, keepdims=True), (N, T, T)).copy()


def _shift(T, lag):
    """(T, T) attention to t - lag (rows t < lag attend to themselves)."""
    a = np.zeros((T, T))
    for t in range(T):
        a[t, t - lag if t >= lag else t] = 1.0
    return a


# ------------------------------------------------------------------------------------------ probe batches
def test_repeated_pair_batch_structure():
    b = S.repeated_pair_batch(40, 64, 500, seed=3, pair_range=(10, 32), baseline="class_free")
    assert b.tokens.shape == (40, 64) and b.queries.tolist() == [63]
    for i in range(b.N):
        row = b.tokens[i]
        p = int(b.targets["duplicate"][i, 0, 0])
        a, bb = row[p], row[p + 1]
        assert 10 <= p < 32 and a != bb and row[-1] == a
        assert np.flatnonzero(row == a).tolist() == [p, 63]
        assert np.flatnonzero(row == bb).tolist() == [p + 1]
        assert b.targets["induction"][i, 0, 0] == p + 1
        assert ((row >= 100) & (row < 500)).all()
        oth = b.others[i, 0]
        tgt = {int(x) for c in S.CLASSES for x in b.targets[c][i, 0]}
        assert len(set(oth.tolist())) == S.N_OTHER  # enough keys: drawn without replacement
        assert not tgt & set(oth.tolist()) and oth.min() >= 1 and oth.max() < 63
    assert b.targets["local"][0, 0].tolist() == [61, 60, 59, 58]
    # deterministic in the seed; the baseline's rule draws after the tokens, so it does not change them
    assert np.array_equal(b.tokens, S.repeated_pair_batch(40, 64, 500, seed=3, pair_range=(10, 32)).tokens)


def test_paper_baseline_is_one_fixed_set_of_positions():
    """The paper's rule: at query t, 50 distinct positions, the same in every sequence, in the order
    RandomState(0).randint(1, t) first yields them outside {0, t, t - 1} and t - 5 .. t - 2; where fewer than 50
    qualify, every qualifying position (repeated to fill the slots)."""
    T = 256
    b = S.repeated_pair_batch(6, T, 5000, seed=0)
    assert b.config["baseline"] == "paper"
    assert (b.others == b.others[0, 0]).all()
    draw, want = np.random.RandomState(0), []
    while len(want) < 50:
        p = int(draw.randint(1, T - 1))
        if p not in (0, T - 1, T - 2, T - 3, T - 4, T - 5, T - 6) and p not in want:
            want.append(p)
    assert b.others[0, 0].tolist() == want
    assert min(want) >= 1 and max(want) <= T - 7
    # a short sequence: queries t = 21 .. 40 have t - 6 <= 34 qualifying positions (1 .. t - 6), all used
    r = S.repeated_sequence_batch(3, 41, 300, seed=1)
    for j, t in enumerate(r.queries):
        assert set(r.others[0, j].tolist()) == set(range(1, t - 5))
        assert (r.others[:, j] == r.others[0, j]).all()
    with pytest.raises(ValueError, match="baseline='bad'"):
        S.repeated_pair_batch(2, 64, 500, baseline="bad")


def test_repeated_sequence_batch_structure():
    b = S.repeated_sequence_batch(5, 41, 300, seed=1, bos=7)
    n = b.config["period"]
    assert n == 20 and b.queries.tolist() == list(range(21, 41))
    assert (b.tokens[:, 0] == 7).all()
    assert np.array_equal(b.tokens[:, 1:21], b.tokens[:, 21:41])
    for i in range(5):
        assert len(set(b.tokens[i, 1:21].tolist())) == 20  # distinct within a copy
        for j, t in enumerate(b.queries):
            d = int(b.targets["duplicate"][i, j, 0])
            assert b.tokens[i, d] == b.tokens[i, t] and d == t - n
            assert b.targets["induction"][i, j, 0] == d + 1


def test_probe_bad_input():
    with pytest.raises(ValueError, match="pair_range"):
        S.repeated_pair_batch(2, 32, 100, pair_range=(20, 30))
    with pytest.raises(ValueError, match="token_range"):
        S.repeated_pair_batch(2, 64, 100, token_range=(50, 200))
    with pytest.raises(ValueError, match="T="):
        S.repeated_sequence_batch(2, 12, 100)


# ------------------------------------------------------------------------------------------ selectivity
def _brute_selectivity(batch, attn):
    """Loops: mean over (sequence, query, target) of attention; divided by the same over the 50 others."""
    N, L, H = attn.shape[:3]
    out = {}
    for name in (*S.CLASSES, "other"):
        idx = batch.others if name == "other" else batch.targets[name]
        tot = np.zeros((L, H))
        cnt = 0
        for n in range(N):
            for qi in range(len(batch.queries)):
                for k in idx[n, qi]:
                    tot += attn[n, :, :, qi, k]
                    cnt += 1
        out[name] = tot / cnt
    return {c: out[c] / out["other"] for c in S.CLASSES}, out


@pytest.mark.parametrize("kind", ["repeated_pair", "repeated_sequence"])
def test_selectivity_matches_loops(kind):
    rng = np.random.default_rng(0)
    b = S.PROBES[kind](6, 32, 200, seed=2, **({"pair_range": (8, 16)} if kind == "repeated_pair" else {}))
    attn = rng.dirichlet(np.ones(32), size=(6, 2, 3, len(b.queries)))
    res = S.screen(b, attn)
    sel, raw = _brute_selectivity(b, attn)
    for c in S.CLASSES:
        np.testing.assert_allclose(res.selectivity[c], sel[c], rtol=1e-12)
        np.testing.assert_allclose(res.attention[c], raw[c], rtol=1e-12)
    # chunked accumulation gives the same
    acc = S.ScreenAccumulator(b)
    acc.add(0, attn[:4])
    acc.add(4, attn[4:])
    np.testing.assert_allclose(acc.result().selectivity["induction"], res.selectivity["induction"], rtol=1e-12)
    with pytest.raises(ValueError, match="in order"):
        S.ScreenAccumulator(b).add(2, attn[:2])


def test_constructed_heads_classified():
    """Layer 0: head 0 a half previous-token head (half uniform), head 1 a perfect BOS head; layer 1: head 0 a
    perfect induction head, head 1 uniform. Selectivities follow in closed form."""
    N, T = 8, 48
    b = S.repeated_pair_batch(N, T, 1000, seed=0, pair_range=(6, 24), baseline="class_free")
    uni = _causal_uniform(N, T)
    attn = np.zeros((N, 2, 2, T, T))
    attn[:, 0, 0] = 0.5 * _shift(T, 1) + 0.5 * uni
    attn[:, 0, 1, :, 0] = 1.0
    for n in range(N):
        attn[n, 1, 0] = _shift(T, 1)
        attn[n, 1, 0, T - 1] = 0.0
        attn[n, 1, 0, T - 1, b.targets["induction"][n, 0, 0]] = 1.0
    attn[:, 1, 1] = uni
    pr_out = np.random.default_rng(1).normal(size=(N, 2, 2, 4))
    res = S.screen_full_attention(b, attn, pr_out)
    # the half previous-token head: (0.5 + 0.5 / T) / (0.5 / T) at the last query (row of T keys)
    assert res.selectivity["previous_token"][0, 0] == pytest.approx((0.5 + 0.5 / T) / (0.5 / T))
    assert res.selectivity["self"][0, 0] == pytest.approx(1.0)
    assert res.selectivity["bos"][0, 1] == pytest.approx(1.0 / S._EPS)
    assert res.selectivity["induction"][1, 0] == pytest.approx(1.0 / S._EPS)
    for c in S.CLASSES:
        assert res.selectivity[c][1, 1] == pytest.approx(1.0)
    heads = res.heads()
    assert heads["previous_token"] == [(0, 0)] and heads["bos"] == [(0, 1)] and heads["induction"] == [(1, 0)]
    recs = {(r["layer"], r["head"]): r for r in res.records()}
    assert recs[(1, 0)]["classes"] == ["induction"] and recs[(1, 0)]["induction_circuit"]
    assert recs[(1, 1)]["classes"] == [] and not recs[(1, 1)]["induction_circuit"]
    # the half previous-token head passes the class at 30x (49x here) but not the 100x circuit threshold; a head
    # with 0.9 on t - 1 reaches (0.9 + 0.1 / T) / (0.1 / T) = 9 T + 1 = 433x and is a previous-token circuit
    assert "previous_token" in recs[(0, 0)]["classes"] and not recs[(0, 0)]["previous_token_circuit"]
    sharp = attn.copy()
    sharp[:, 0, 0] = 0.9 * _shift(T, 1) + 0.1 * uni
    sharp_rec = S.screen_full_attention(b, sharp, pr_out).records()[0]
    assert sharp_rec["previous_token_circuit"] and sharp_rec["selectivity"]["previous_token"] == pytest.approx(
        9 * T + 1
    )
    # detection scores in full: a perfect previous-token head scores 1 on previous_token, the uniform head 1/...
    # rows 1 .. T - 2 on t - 1; row 0 on itself, row T - 1 on the induction target
    assert res.detection["previous_token"][1, 0] == pytest.approx((T - 2) / T)
    assert res.pr.shape == (2, 2)


# ------------------------------------------------------------------------------------------ PR
def test_participation_ratio_known_spectra():
    rng = np.random.default_rng(0)
    U, _ = np.linalg.qr(rng.normal(size=(30, 6)))
    V, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    for s in ([1.0, 0, 0, 0, 0, 0], [1.0] * 6, [3.0, 2.0, 1.0, 0.5, 0.0, 0.0]):
        s = np.asarray(s)
        X = U @ np.diag(s) @ V.T
        p = s**2 / np.sum(s**2)
        p = p[p > 0]
        assert S.participation_ratio(X) == pytest.approx(np.exp(-np.sum(p * np.log(p))), rel=1e-9)
    assert S.participation_ratio(np.outer(rng.normal(size=30), rng.normal(size=6))) == pytest.approx(1.0)
    batched = S.participation_ratio(np.stack([U @ V.T, U[:, :1] @ V[:1]]))
    np.testing.assert_allclose(batched, [6.0, 1.0], rtol=1e-9)


# ------------------------------------------------------------------------------------------ TransformerLens
def _tl_patterns(tokens):
    """TransformerLens head_detector, transcribed to numpy for one sequence: tril of eye shifted down; the
    duplicate pattern with its diagonal zeroed; induction = duplicate rolled right by one, first column 0."""
    T = len(tokens)
    prev = np.zeros((T, T))
    prev[1:, :-1] = np.eye(T - 1)
    prev = np.tril(prev)
    tp = np.tile(tokens, (T, 1))
    eq = np.equal(tp, tp.T).astype(int)
    np.fill_diagonal(eq, 0)
    dup = np.tril(eq.astype(float))
    shifted = np.roll(dup, 1, axis=1)
    ind = np.tril(np.concatenate([np.zeros((T, 1)), shifted[:, 1:]], axis=1))
    return {"previous_token": prev, "duplicate_token": dup, "induction": ind}


def _tl_score(attn, pattern, exclude_bos, exclude_current):
    a = attn.copy()
    if exclude_bos:
        a[:, 0] = 0
    if exclude_current:
        np.fill_diagonal(a, 0)
    return (a * pattern).sum() / a.sum()


@pytest.mark.parametrize("exclude_bos,exclude_current", [(False, False), (True, False), (True, True)])
def test_detection_scores_match_transformerlens(exclude_bos, exclude_current):
    rng = np.random.default_rng(4)
    N, T = 5, 20
    tokens = rng.integers(0, 6, size=(N, T))  # small vocabulary: many duplicates
    mask = np.tril(np.ones((T, T)))
    attn = rng.random((N, 2, 3, T, T)) * mask
    attn /= attn.sum(-1, keepdims=True)
    pats = S.detection_patterns(tokens)
    for kind in S.DETECTIONS:
        ref = np.zeros((2, 3))
        for n in range(N):
            p = _tl_patterns(tokens[n])[kind]
            np.testing.assert_array_equal(pats[kind][n], p)
            for L in range(2):
                for H in range(3):
                    ref[L, H] += _tl_score(attn[n, L, H], p, exclude_bos, exclude_current) / N
        got = S.detection_score(
            attn, pats[kind][:, None, None], exclude_bos=exclude_bos, exclude_current=exclude_current
        ).mean(0)
        np.testing.assert_allclose(got, ref, rtol=1e-12)


def test_best_class():
    sel = {c: np.full((1, 3), 2.0) for c in S.CLASSES}
    sel["bos"][0, 0], sel["self"][0, 0] = 100.0, 40.0
    sel["local"][0, 1] = 29.0
    sel["induction"][0, 2], sel["duplicate"][0, 2] = 60.0, 70.0
    r = S.ScreenResult({}, sel, None, {}, {})
    assert r.best().tolist() == [["bos", None, "duplicate"]]
    recs = r.records()
    assert recs[0]["classes"] == ["bos", "self"] and recs[2]["induction_circuit"] and recs[1]["classes"] == []
