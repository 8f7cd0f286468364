"""The experiment contract: what every published system gives the command line, the sweep, ``list`` and
``figures``.

An experiment is a subclass of :class:`Experiment` in its own subpackage ``bayesattn/experiments/<system>/``,
registered by one line in :mod:`bayesattn.experiments`. It says

- ``name``, ``description`` (one line) and ``Config`` (an :class:`~bayesattn.experiments.config.ExperimentConfig`);
- its shipped configs, the TOML files in ``<subpackage>/configs/`` (package data);
- ``points(config)``: {part: [point, ...]}, every grid point a JSON-able dict holding exactly what its result
  depends on (its file name is a hash of it, so a changed setting recomputes exactly the affected points);
- ``compute(point)``: one point's result (a JSON-able dict), a pure function of the point;
- ``batch(config, part)``: optionally, how points of one part are computed together (:class:`~bayesattn._batching.Batch`);
- ``summarize(config, records)``: the summary, from the saved records alone;
- ``describe(summary)``: the lines printed at the end of a run;
- ``figures(folder)``: the figures, drawn from the saved files alone;
- ``part_figures(folder, part)``: optionally, the figures one finished part can draw already, so that a long
  run shows its first results before its last part ends (``figures`` draws them all again at the end).

:func:`bayesattn.sweep.run_experiment` runs any experiment: it computes every missing point through
:func:`bayesattn.sweep.run_sweep` (atomic, resumable, one file per point), then writes ``summary.json`` and the
figures. A skeleton for a new system is ``docs/architecture.md``'s "Adding an experiment".
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np

from .config import ExperimentConfig, apply_overrides, find_config, packaged_configs, read_toml


class Experiment:
    """Base class of an experiment (see the module docstring). Subclasses set the class attributes and
    override ``points``, ``compute`` and ``summarize``; ``describe``, ``figures`` and ``batch`` are optional.

    ``progress`` is set by the runner: True when a point may show its own progress bar (training steps).
    ``default_threads``: the command line's executor when none is asked for (no ``--executor``, ``--workers`` or
    ``--scheduler``, and the config's ``workers`` at 1): 0 runs the points one after another; N > 0 runs them on N
    threads of the process (at most the machine's cores), for an experiment whose point files are checked to be
    the same on every executor."""

    name: ClassVar[str]
    description: ClassVar[str]
    Config: ClassVar[type[ExperimentConfig]]
    default_config: ClassVar[str] = "default"
    default_threads: ClassVar[int] = 0
    progress: bool = False

    # --- configs -----------------------------------------------------------------------------------
    @classmethod
    def package(cls) -> str:
        """The subpackage that holds the experiment and its ``configs/``."""
        return cls.__module__.rsplit(".", 1)[0] if cls.__module__.count(".") > 2 else cls.__module__

    @classmethod
    def configs(cls) -> dict[str, Path]:
        """{name: path} of the shipped named configs."""
        return packaged_configs(cls.package())

    @classmethod
    def load_config(cls, name_or_path: str | Path | None = None, sets: Sequence[str] = ()) -> ExperimentConfig:
        """The config of a named config or TOML path (None: the default named config), with ``--set``
        overrides applied. ConfigError (one line) for an unknown name, bad TOML, an unknown key or a bad value."""
        name = cls.default_config if name_or_path is None else name_or_path
        path = find_config(cls.package(), name)
        data = apply_overrides(cls.Config, read_toml(path), sets)
        return cls.Config.load(data, source=f"config {path.name} with --set" if sets else f"config {path.name}")

    def check(self, config: ExperimentConfig) -> None:
        """Checks of a config that need more than its own fields (run before any work); default: none."""

    # --- the grid ----------------------------------------------------------------------------------
    def points(self, config: ExperimentConfig) -> dict[str, list[dict]]:
        raise NotImplementedError

    def compute(self, point: dict) -> dict:
        raise NotImplementedError

    def batch(self, config: ExperimentConfig, part: str):
        """How the points of ``part`` are computed together (a :class:`~bayesattn._batching.Batch`), or None."""
        return None

    # --- results -----------------------------------------------------------------------------------
    def summarize(self, config: ExperimentConfig, records: dict[str, list[dict]]) -> dict:
        raise NotImplementedError

    def describe(self, summary: dict) -> list[str]:
        return []

    def figures(self, folder: Path) -> list[Path]:
        return []

    def part_figures(self, folder: Path, part: str) -> list[Path]:
        """The figures that ``part``'s saved points alone can draw, drawn as soon as it finishes; default: none."""
        return []

    def __repr__(self) -> str:
        return f"<experiment {self.name}: {self.description}>"


def draw_figures(folder, table: dict, parts=None) -> list[str]:
    """Draw, under ``folder/figures``, every figure that ``table`` ({part: [(file name, drawer(folder, path) ->
    path or None)]}) lists for ``parts`` (None: every key of the table), each file once; the paths drawn (a
    drawer returns None when its points are missing). The one helper behind the experiments' ``figures`` and
    ``part_figures``."""
    figs = Path(folder) / "figures"
    figs.mkdir(parents=True, exist_ok=True)
    made, seen = [], set()
    for part in table if parts is None else parts:
        for name, draw in table.get(part, ()):
            if name not in seen:
                seen.add(name)
                path = draw(folder, figs / name)
                if path is not None:
                    made.append(str(path))
    return made


def number(x) -> str:
    """A number as the printed summaries show it: '-' for None, a whole number from 1000 on, else 4 significant
    digits (626.9, 12660; not 626.9432629506033 or 1.266e+04)."""
    return "-" if x is None else f"{x:.0f}" if abs(x) >= 1000 else f"{x:.4g}"


def common_P(per_seed: Sequence[Sequence[dict]]) -> list[float]:
    """The values of P that every seed's point records have, increasing."""
    return sorted(set.intersection(*({float(r["point"]["P"]) for r in recs} for recs in per_seed)))


def seed_matrix(per_seed: Sequence[Sequence[dict]], grid: Sequence[float], value) -> tuple[np.ndarray, np.ndarray]:
    """(values, standard errors), each (seeds, P), at the P of ``grid``: ``value(record) -> (value, its standard
    error)`` reads one point record; every seed must have a record at every P of ``grid`` (:func:`common_P`)."""
    vals, ses = np.empty((len(per_seed), len(grid))), np.empty((len(per_seed), len(grid)))
    for i, recs in enumerate(per_seed):
        at = {float(r["point"]["P"]): r for r in recs}
        for j, P in enumerate(grid):
            vals[i, j], ses[i, j] = value(at[P])
    return vals, ses


def registry(*experiments: type[Experiment]) -> dict[str, type[Experiment]]:
    """{name: experiment class}; each subpackage's ``__init__`` imports no JAX, so building it is fast."""
    out: dict[str, type[Experiment]] = {}
    for cls in experiments:
        if cls.name in out:
            raise ValueError(f"experiment {cls.name!r} is registered twice")
        out[cls.name] = cls
    return out
