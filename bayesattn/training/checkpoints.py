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
import time
import warnings
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._json import to_plain
from .._validate import brief, check_int
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
    """Write ``net``'s arrays to ``path`` exactly (any name: no suffix is added) and its header to ``path + ".json"``;
    returns the path. ``extra``: more header fields, a dict of JSON values whose keys are not the header's own
    (format, network, step, leaves). ValueError for a ``net`` that is not an Equinox module, a ``step`` that is not
    an integer >= 0 or an ``extra`` that breaks these rules (nothing is written: an earlier checkpoint at ``path``
    stays whole)."""
    if not isinstance(net, eqx.Module):
        raise ValueError(f"net={type(net).__name__}: expected a network (an Equinox module)")
    if step is not None:
        step = check_int("step", step, minimum=0)
    header = {"format": FORMAT, "network": _net_config(net), "step": step, "leaves": _leaf_table(net)}
    if extra is not None:
        if not isinstance(extra, dict):
            raise ValueError(f"extra={brief(extra)}: expected a dict of JSON values, or None")
        if clash := sorted(set(extra) & set(header)):
            raise ValueError(f"extra: keys {clash} are the header's own; expected other names")
        header.update(extra)
    try:
        text = json.dumps(to_plain(header), indent=1)
    except (TypeError, ValueError) as e:
        raise ValueError(f"extra={brief(extra)}: not JSON-serialisable ({e})") from None
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"path={brief(path)}: expected a file name (a str or a path)")
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"path={str(path)!r}: a folder; expected the name of a checkpoint file")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    # a file object, not a name: Equinox appends ".eqx" to a name without a suffix when it reads (not when it writes
    # the ".tmp" name here), so save and load would look at different files
    with open(tmp, "wb") as f:
        eqx.tree_serialise_leaves(f, net)
    tmp_h = path.with_name(path.name + ".json.tmp")
    tmp_h.write_text(text)
    os.replace(tmp, path)  # both files written before either replaces its old version
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
    with open(path, "rb") as f:  # a file object: read ``path`` itself (see save_checkpoint)
        return eqx.tree_deserialise_leaves(f, like)


# ----------------------------------------------------------------------------------------------- a run in parts
LOOP_FORMAT = "bayesattn-loop-1"


def _leaf_specs(leaves) -> list:
    """[[shape], dtype] of each array: what a loop-state file's header records and a resume compares."""
    return [[list(x.shape), str(x.dtype)] for x in leaves]


def save_loop_state(
    path: str | os.PathLike, state, records: dict, fingerprint: str, meta: dict | None = None, step: int | None = None
) -> Path:
    """Write a run's state between two parts (:func:`~bayesattn.training.core.run_loop_in_parts`) to one ``.npz``:
    every leaf of ``state`` (a :class:`~bayesattn.training.core.LoopState`), the records so far and a header
    (``fingerprint``, which names the run; the step; each leaf's shape and dtype; ``meta``, a JSON-serialisable dict
    the caller carries across parts, such as the time spent so far). ``step``: the step the header records, for a
    ``state`` of another kind that has no ``step`` field (default ``state.step``). Written to a temporary name and
    renamed, so a killed process leaves the previous file whole."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    leaves = [np.asarray(x) for x in jax.tree.leaves(state)]
    header = {
        "format": LOOP_FORMAT,
        "fingerprint": fingerprint,
        "step": int(state.step if step is None else step),
        "leaves": _leaf_specs(leaves),
        "records": sorted(records),
        "meta": dict(meta or {}),
    }
    arrays = {f"state_{i}": x for i, x in enumerate(leaves)}
    arrays.update({f"record_{k}": np.asarray(v) for k, v in records.items()})
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        np.savez(f, header=np.asarray(json.dumps(header)), **arrays)
    os.replace(tmp, path)
    return path


def saved_progress(path: str | os.PathLike) -> dict | None:
    """What a state written by :func:`save_loop_state` says of its run, without loading its arrays: ``{"step",
    "meta"}`` (the step it was saved at, and the caller's ``meta``, such as ``wall_s``, the time spent so far);
    None for a file that is not such a state (another kind of checkpoint, or one that cannot be read)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            header = json.loads(str(z["header"]))
    except (OSError, ValueError, KeyError):
        return None
    if not isinstance(header, dict) or header.get("format") != LOOP_FORMAT:
        return None
    return {"step": int(header["step"]), "meta": dict(header.get("meta") or {})}


def load_loop_state(path: str | os.PathLike, like, fingerprint: str, meta: dict | None = None):
    """(state, records) written by :func:`save_loop_state` for the run ``fingerprint``, in the structure of ``like``
    (the run's initial state); None when there is no file. ``meta``: a dict that, when the state loads, is updated
    with the ``meta`` saved beside it. A file that cannot be read, is of another run or whose
    arrays do not match ``like``'s is moved aside (``<name>.corrupt``) with a warning naming it and why, and None is
    returned: the run then starts from its beginning."""
    path = Path(path)
    if not path.exists():
        return None
    want = [np.asarray(x) for x in jax.tree.leaves(like)]
    try:
        with np.load(path, allow_pickle=False) as z:
            header = json.loads(str(z["header"]))
            problem = None
            if header.get("format") != LOOP_FORMAT:
                problem = f"format {header.get('format')!r}, expected {LOOP_FORMAT!r}"
            elif header.get("fingerprint") != fingerprint:
                problem = f"it is of another run ({header.get('fingerprint')!r}, expected {fingerprint!r})"
            elif header["leaves"] != _leaf_specs(want):
                problem = "its arrays do not match the run's state (shapes or dtypes)"
            else:
                leaves = [z[f"state_{i}"] for i in range(len(want))]
                records = {k: z[f"record_{k}"] for k in header["records"]}
    except (OSError, ValueError, KeyError) as e:
        problem = f"it cannot be read ({type(e).__name__}: {e})"
    if problem is not None:
        aside = path.with_name(path.name + ".corrupt")
        os.replace(path, aside)
        warnings.warn(f"{path}: {problem}; moved to {aside.name}, the run starts from its beginning", stacklevel=2)
        return None
    if meta is not None:
        meta.update(header.get("meta", {}))
    treedef = jax.tree.structure(like)
    return jax.tree.unflatten(treedef, [jnp.asarray(x) for x in leaves]), records


class RunClock:
    """A run's training time over every process that ran a part of it, carried as ``wall_s`` in the ``meta`` of its
    saved states (:func:`save_loop_state`): this process's seconds since the clock was made, plus the seconds saved
    with the state it went on from. Unknown (None) once it went on from a state saved without them (by an older
    version): the earlier processes' time is then not known, and this process's alone would undercount it."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.earlier: float | None = 0.0

    def load(self, path: str | os.PathLike, like, fingerprint: str):
        """:func:`load_loop_state`, and when a state loads, the time saved with it counts as the earlier
        processes'."""
        meta: dict = {}
        got = load_loop_state(path, like, fingerprint, meta)
        if got is not None:
            wall = meta.get("wall_s")
            self.earlier = None if wall is None else float(wall)
        return got

    def seconds(self) -> float | None:
        """The run's time so far, None when unknown."""
        return None if self.earlier is None else self.earlier + time.perf_counter() - self.t0

    def meta(self, **extra) -> dict:
        """The ``meta`` to save with a state: ``extra`` and, when known, ``wall_s``."""
        wall = self.seconds()
        return dict(extra) if wall is None else {**extra, "wall_s": wall}
