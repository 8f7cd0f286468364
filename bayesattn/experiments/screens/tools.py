"""Circuit screens of whole models (docs/results/screens.md): a pretrained llama read from GGUF (SmolLM2), a trained
:class:`~bayesattn.models.transformer.Transformer`, or every checkpoint in a directory.

:func:`screen_llama` runs the model on the probe batch in chunks (attention rows at the queries, head outputs at
the last query and the detection scores are reduced inside the forward pass, so the (T, T) attention of 270
heads is never kept); :func:`screen_transformer` keeps the full attention of a small network.
"""

from __future__ import annotations

import time
from pathlib import Path

import jax
import numpy as np

from ...diagnostics.screens import (
    CLASSES,
    PROBES,
    ProbeBatch,
    ScreenAccumulator,
    ScreenResult,
    detection_patterns,
    screen_full_attention,
)
from ...models.trace import transformer_trace


def probe_batch(kind: str, N: int, T: int, vocab: int, seed: int, *, context: int | None = None, **kw) -> ProbeBatch:
    """A probe batch of ``kind`` ("repeated_pair" or "repeated_sequence"); ValueError when T exceeds the
    model's ``context``."""
    if kind not in PROBES:
        raise ValueError(f"probe={kind!r}: expected one of {', '.join(map(repr, PROBES))}")
    if context is not None and T > context:
        raise ValueError(f"T={T}: probe sequences longer than the model's context ({context} positions)")
    return PROBES[kind](N, T, vocab, seed, **kw)


def screen_llama(model, batch: ProbeBatch, chunk: int = 8, progress=None) -> ScreenResult:
    """Screen every head of a :class:`~bayesattn.models.llama.Llama` on ``batch`` (``chunk`` sequences per
    forward pass)."""
    if batch.T > model.config.context:
        raise ValueError(f"T={batch.T}: probe sequences longer than the model's context ({model.config.context})")
    acc = ScreenAccumulator(batch)
    for start in range(0, batch.N, chunk):
        tok = batch.tokens[start : start + chunk]
        tr = model.trace(tok, batch.queries, detection_patterns(tok))
        acc.add(start, tr["attn"], tr["outputs"], tr["detection"])
        if progress:
            progress(min(start + chunk, batch.N), batch.N)
    return acc.result()


def _inputs(net, tokens):
    c = net.config
    if c.vocab is not None:
        return jax.numpy.asarray(tokens)
    if tokens.max() >= c.d_in:
        raise ValueError(f"tokens up to {tokens.max()}: the network reads one-hot vectors of d_in={c.d_in}")
    return jax.nn.one_hot(tokens, c.d_in, dtype=jax.numpy.float64)


def transformer_forward(net, tokens):
    """(logits (N, T, d_out), attention (N, L, H, T, T), head outputs (N, L, T, H, dh)) of int tokens (N, T)."""
    if tokens.shape[1] > net.config.T:
        raise ValueError(f"T={tokens.shape[1]}: probe sequences longer than the model's context ({net.config.T})")
    return jax.vmap(lambda x: transformer_trace(net, x))(_inputs(net, np.asarray(tokens)))


def screen_transformer(net, batch: ProbeBatch) -> tuple[ScreenResult, np.ndarray]:
    """(screen, per-position next-token loss (N, T - 1)) of a Transformer on ``batch``."""
    y, attn, heads = transformer_forward(net, batch.tokens)
    outputs = np.asarray(heads)[:, :, batch.queries[-1]]  # (N, L, H, dh)
    logp = jax.nn.log_softmax(y[:, :-1], axis=-1)
    nll = -np.take_along_axis(np.asarray(logp), batch.tokens[:, 1:, None], axis=-1)[..., 0]
    return screen_full_attention(batch, np.asarray(attn), outputs), nll


def copy_losses(nll: np.ndarray, batch: ProbeBatch) -> dict:
    """Mean next-token loss on the first and on the second copy of a repeated-sequence batch (rows predicting
    a token of that copy, except its first)."""
    n, off = batch.config["period"], 1 if batch.config.get("bos") is not None else 0
    return {
        "first_copy": float(nll[:, off : off + n - 1].mean()),
        "second_copy": float(nll[:, off + n : off + 2 * n - 1].mean()),
    }


# ------------------------------------------------------------------------------------- checkpoint directories
def checkpoint_files(directory) -> list[Path]:
    """The checkpoints of a directory, by step: step_*.eqx in it or in its checkpoints/ (as FitResult.save
    writes them), else its network.eqx. ValueError when there are none."""
    d = Path(directory)
    if not d.is_dir():
        raise ValueError(f"checkpoint directory={str(d)!r}: no such directory")
    files = sorted(d.glob("step_*.eqx")) or sorted((d / "checkpoints").glob("step_*.eqx"))
    if not files and (d / "network.eqx").exists():
        files = [d / "network.eqx"]
    if not files:
        raise ValueError(
            f"checkpoint directory={str(d)!r}: no checkpoints (expected step_*.eqx, "
            f"checkpoints/step_*.eqx or network.eqx with their .json headers)"
        )
    return files


def load_checkpoints(directory) -> list[tuple[int | None, object]]:
    """[(step, network)] of :func:`checkpoint_files` (networks rebuilt from their headers)."""
    from ...training.checkpoints import checkpoint_header, load_checkpoint

    out = []
    for f in checkpoint_files(directory):
        net = load_checkpoint(f)
        if not hasattr(net, "blocks"):
            raise ValueError(f"checkpoint={str(f)!r}: a {type(net).__name__}; screens read Transformer networks")
        out.append((checkpoint_header(f).get("step"), net))
    return out


def vocab_of(net) -> int:
    c = net.config
    return int(c.vocab if c.vocab is not None else c.d_in)


# --------------------------------------------------------------------------------------- checkpoint series
def series_steps(names, steps=None) -> list[int]:
    """Training steps of a series of checkpoints given as files: ``steps`` if given (one per file, increasing),
    else the last number in each file name (``ckpt_step1000.gguf`` -> 1000), else 0, 1, 2, ..."""
    names = [str(n) for n in names]
    if steps is not None:
        steps = [int(x) for x in steps]
        if len(steps) != len(names):
            raise ValueError(f"steps={steps}: expected one step per checkpoint ({len(names)})")
    else:
        import re

        found = [re.findall(r"\d+", Path(n).stem) for n in names]
        steps = [int(f[-1]) for f in found] if all(found) else list(range(len(names)))
    if len(steps) > 1 and any(b <= a for a, b in zip(steps, steps[1:])):
        raise ValueError(f"steps={steps}: checkpoints must come in increasing step order, one step each")
    return steps


def series_ranking(runs) -> dict:
    """The paper's PR-integral ranking over a checkpoint series [(step, ScreenResult)] (two or more): heads in
    order of the integral of max(PR - 1, 0) over steps, with the integral, the PR spread and the elbow."""
    from ...diagnostics.ranking import pr_integral_ranking

    steps = [int(s) for s, _ in runs]
    shapes = {r.pr.shape for _, r in runs}
    if len(shapes) != 1:
        raise ValueError(f"checkpoints with different head layouts {sorted(shapes)}: a series must be one model")
    return {"steps": steps, **pr_integral_ranking(np.stack([r.pr for _, r in runs]), steps)}


# ------------------------------------------------------------------------------------------- reporting
def summarize_heads(result: ScreenResult, threshold: float) -> list[str]:
    """Lines: per class, the heads passing (L<l>H<h> x<selectivity>) and the count per layer."""
    lines = []
    L = result.shape[0]
    for c, heads in result.heads(threshold).items():
        per_layer = np.bincount([lh[0] for lh in heads], minlength=L)
        shown = ", ".join(f"L{a}H{b} {result.selectivity[c][a, b]:.0f}x" for a, b in heads[:20])
        more = f" (+{len(heads) - 20} more)" if len(heads) > 20 else ""
        lines.append(f"{c}: {len(heads)} heads{': ' + shown + more if heads else ''}")
        if heads:
            lines.append(f"  per layer: {' '.join(f'{l}:{n}' for l, n in enumerate(per_layer) if n)}")
    best = result.best(threshold)
    lines.append("best class per head (the paper's classification), heads per layer:")
    for c in (*CLASSES, None):
        per_layer = np.sum(best == c, axis=1) if c else np.sum(best == None, axis=1)  # noqa: E711
        lines.append(
            f"  {c or 'unclassified'}: {int(per_layer.sum())} ("
            f"{' '.join(f'{l}:{n}' for l, n in enumerate(per_layer) if n) or 'none'})"
        )
    return lines


def timed(fn, *a, **kw):
    t0 = time.perf_counter()
    out = fn(*a, **kw)
    return out, time.perf_counter() - t0


__all__ = [
    "CLASSES",
    "model_point",
    "probe_batch",
    "screen_llama",
    "screen_transformer",
    "transformer_forward",
    "copy_losses",
    "checkpoint_files",
    "load_checkpoints",
    "vocab_of",
    "summarize_heads",
    "series_steps",
    "series_ranking",
]


# ------------------------------------------------------------------------------------------- pretrained models
def screen_pretrained(cfg, progress: bool = False):
    """Screen the pretrained models of ``cfg`` (a :class:`.config.ModelScreen`: ``smollm2`` or GGUF files; several: a
    checkpoint series) on one probe batch. Returns ([(step, ScreenResult)], the probe batch, one info dict per
    model)."""
    from ...models.gguf_llama import load_model

    series = len(cfg.models) > 1  # a checkpoint series: one probe batch, the PR-integral ranking over steps
    steps = series_steps(cfg.models, cfg.steps) if series else [cfg.steps[0] if cfg.steps else None]
    batch, runs, models = None, [], []
    for name, step in zip(cfg.models, steps):
        model = load_model(name)
        if batch is None:
            T = cfg.T or min(256, model.config.context)
            V = model.config.vocab
            batch = probe_batch(
                cfg.probe,
                cfg.N,
                T,
                V,
                cfg.seed,
                context=model.config.context,
                token_range=(min(100, V // 4), min(10000, V)),
                bos=model.config.bos_token_id if cfg.bos else None,
                baseline=cfg.baseline,
            )
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=batch.N, desc=f"screening {model.config.name}", unit="seq", leave=False)
        update = (lambda done, total: bar.update(done - bar.n)) if bar else None
        res, wall = timed(screen_llama, model, batch, cfg.chunk, progress=update)
        if bar:
            bar.close()
        runs.append((step, res))
        models.append(
            {"name": model.config.name, "step": step, "heads": int(res.shape[0] * res.shape[1]), "wall_s": wall}
        )
        del model
    return runs, batch, models


def report_runs(runs, threshold: float) -> tuple[list[dict], list[str], dict | None]:
    """(one record per head and checkpoint, the per-class lines, the PR-integral ranking of a series or None) of
    screened checkpoints [(step or None, ScreenResult)]."""
    records, lines = [], []
    for step, res in runs:
        if len(runs) > 1 or step is not None:
            lines.append(f"-- checkpoint step {step}")
        lines += summarize_heads(res, threshold)
        records += [({"step": step} if step is not None else {}) | r for r in res.records(threshold)]
    ranking = series_ranking(runs) if len(runs) > 1 and all(s is not None for s, _ in runs) else None
    return records, lines, ranking


def ranking_line(ranking: dict) -> str:
    top = ", ".join(f"L{l}H{h} {v:.3g}" for (l, h), v in zip(ranking["order"][:10], ranking["integral"]))
    return (
        f"PR-integral ranking over steps {ranking['steps'][0]}..{ranking['steps'][-1]} (elbow at rank "
        f"{ranking['elbow_k'] + 1}): {top}"
    )


def model_point(point: dict, progress: bool = False) -> dict:
    """Screen the pretrained models of ``point["model"]`` (a :class:`.config.ModelScreen`): one record per head (and
    checkpoint), the per-class lines, and for a series the PR-integral ranking."""
    from .config import ModelScreen

    runs, batch, models = screen_pretrained(ModelScreen.load(point["model"], source="point"), progress)
    records, lines, ranking = report_runs(runs, point["model"]["threshold"])
    return {"models": models, "probe": batch.config, "records": records, "lines": lines, "ranking": ranking}
