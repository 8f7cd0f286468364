"""Checkpoints of trainable networks: the arrays by ``eqx.tree_serialise_leaves``, a JSON header beside them.

Why not orbax-checkpoint: the networks here are single-host and small (kB to MB), written a few dozen times per
run at log-spaced steps after the run's jit program returns. Equinox's own serialisation writes them
synchronously with no extra dependency (orbax brings tensorstore and an async manager built for sharded
multi-host state), and the structure to read into is rebuilt from the network's typed config. The header
records that config, the step and every leaf's path, shape and dtype, so a checkpoint that does not match the
network it is loaded into is refused with a ``ValueError`` naming the first difference, instead of
Equinox's failure deep inside deserialisation. Files are written to a temporary name and renamed (atomic).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import equinox as eqx
import jax
import numpy as np

from .._json import to_plain
from ..models.networks import NetworkConfig, network_config, network_from_config

FORMAT = "bayesattn-eqx-1"


def _leaf_table(net) -> list[dict]:
    flat = jax.tree_util.tree_flatten_with_path(eqx.filter(net, eqx.is_array))[0]
    return [
        {
            "path": jax.tree_util.keystr(p),
            "shape": list(np.shape(x)),
            "dtype": str(np.asarray(x).dtype) if not hasattr(x, "dtype") else str(x.dtype),
        }
        for p, x in flat
    ]


def _net_config(net) -> dict | None:
    cfg = getattr(net, "config", None)
    return cfg.config() if isinstance(cfg, NetworkConfig) else None


def save_checkpoint(
    path: str | os.PathLike, net: eqx.Module, *, step: int | None = None, extra: dict | None = None
) -> Path:
    """Write ``net``'s arrays to ``path`` and its header to ``path + ".json"``; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = {"format": FORMAT, "network": _net_config(net), "step": step, "leaves": _leaf_table(net), **(extra or {})}
    tmp = path.with_name(path.name + ".tmp")
    eqx.tree_serialise_leaves(tmp, net)
    os.replace(tmp, path)
    tmp_h = path.with_name(path.name + ".json.tmp")
    tmp_h.write_text(json.dumps(to_plain(header), indent=1))
    os.replace(tmp_h, path.with_name(path.name + ".json"))
    return path


def checkpoint_header(path: str | os.PathLike) -> dict:
    """The JSON header of a checkpoint (network config, step, leaf table)."""
    hp = Path(str(path) + ".json")
    if not hp.exists():
        raise ValueError(f"checkpoint={str(path)!r}: no header {hp.name} beside it (not written by save_checkpoint)")
    header = json.loads(hp.read_text())
    if header.get("format") != FORMAT:
        raise ValueError(f"checkpoint={str(path)!r}: format={header.get('format')!r}, expected {FORMAT!r}")
    return header


def load_checkpoint(path: str | os.PathLike, like: eqx.Module | NetworkConfig | dict | None = None) -> eqx.Module:
    """Read a checkpoint into the structure of ``like`` (a network, or a config to build one from; None: the
    config in the header). ValueError when the checkpoint does not match: another network config, or any
    leaf with another path, shape or dtype."""
    header = checkpoint_header(path)
    if like is None:
        if header["network"] is None:
            raise ValueError(f"checkpoint={str(path)!r}: its header has no network config; pass like=")
        like = header["network"]
    if not isinstance(like, eqx.Module):
        like = network_from_config(network_config(like), jax.random.key(0))
    want_cfg = _net_config(like)
    if header["network"] is not None and want_cfg is not None and header["network"] != to_plain(want_cfg):
        diff = sorted(
            k for k in set(want_cfg) | set(header["network"]) if header["network"].get(k) != to_plain(want_cfg).get(k)
        )
        raise ValueError(
            f"checkpoint={str(path)!r} is of another network: {diff} differ "
            f"(file {[header['network'].get(k) for k in diff]}, network {[want_cfg.get(k) for k in diff]})"
        )
    have, want = header["leaves"], _leaf_table(like)
    if len(have) != len(want):
        raise ValueError(f"checkpoint={str(path)!r} has {len(have)} arrays: the network expects {len(want)}")
    for h, w in zip(have, want):
        if h != w:
            raise ValueError(
                f"checkpoint={str(path)!r}: array {h['path']} {tuple(h['shape'])} {h['dtype']} in the "
                f"file, the network expects {w['path']} {tuple(w['shape'])} {w['dtype']}"
            )
    return eqx.tree_deserialise_leaves(path, like)
