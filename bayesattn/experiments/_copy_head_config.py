"""The phase-diagram job's typed config (``RunConfig`` and its sections), read from TOML or a dict, with the
checks that give one clear error per bad field. Re-exported by :mod:`bayesattn.experiments.copy_head`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

import numpy as np

from .._validate import check_choice, check_int, check_positive
from ..bayes.posterior import Prior
from ..bayes.sampling import BACKENDS, SAMPLER_INITS
from ..bayes.sampling import METHODS as SAMPLERS
from ..models.attention import ATTENTIONS
from ..tasks import CopyTask
from ..training import TRAIN_INITS
from ._configs import config_dirs, load_toml

METHODS = ("theory", "mcmc", "adam")
# named configs: phase_diagrams/NAME.toml in the working directory, else in the source checkout
CONFIG_DIRS = config_dirs()


# ----------------------------------------------------------------------------------------------- config
@dataclass
class GridConfig:
    """P values: explicit ``values``, or ``num`` points from ``start`` to ``stop`` (log- or linearly spaced)."""

    start: float = 200.0
    stop: float = 4000.0
    num: int = 12
    spacing: str = "log"
    values: list[int] = field(default_factory=list)

    def grid(self) -> np.ndarray:
        if self.values:
            P = np.asarray(self.values, dtype=int)
        else:
            check_int("P.num", self.num, minimum=1)
            check_choice("P.spacing", self.spacing, ("log", "linear"))
            if not (0 < self.start <= self.stop):
                raise ValueError(f"P.start={self.start}, P.stop={self.stop}: expected 0 < start <= stop")
            f = np.geomspace if self.spacing == "log" else np.linspace
            P = np.unique(np.round(f(self.start, self.stop, self.num)).astype(int))
        if P.size == 0 or np.any(P < 1) or np.any(np.diff(P) <= 0):
            raise ValueError(f"P={P.tolist()}: expected a non-empty increasing list of positive integers")
        return P


@dataclass
class TheoryConfig:
    num_P: int = 200  # dense grid for the theory curves
    vary_name: str = "T"  # "sigma_A2" or "T": also compute the (P, vary) plane ("": none)
    vary_values: list[float] = field(default_factory=lambda: [8.0, 16.0, 32.0, 64.0])
    T_values: list[int] = field(default_factory=list)  # finite-size scaling


@dataclass
class MCMCConfig:
    method: str = "nuts"
    backend: str = "blackjax"
    num_chains: int = 2
    num_warmup: int = 300
    num_samples: int = 500
    inits: list[str] = field(default_factory=lambda: ["cold", "hot"])
    # per-attention overrides of the fields above: [mcmc.by_attention.softmax] method = "chees", ...
    by_attention: dict[str, dict] = field(default_factory=dict)

    def effective(self, attention: str) -> dict:
        """The sampler settings of ``attention``'s points: the fields above with its overrides applied (what an
        MCMC point carries; without overrides exactly the fields, so the points keep their names)."""
        out = {k: v for k, v in dataclasses.asdict(self).items() if k != "by_attention"}
        return {**out, **self.by_attention.get(attention, {})}


def _coerce_by_attention(key: str, value: Any) -> dict:
    """``mcmc.by_attention``: {attention: {field: value}}, each value coerced like the field of MCMCConfig."""
    if not isinstance(value, dict):
        raise ValueError(f"{key}={value!r}: expected a table of attention kinds ({', '.join(ATTENTIONS)})")
    hints = get_type_hints(MCMCConfig)
    fields = [f.name for f in dataclasses.fields(MCMCConfig) if f.name != "by_attention"]
    out = {}
    for att, table in value.items():
        check_choice(key, att, ATTENTIONS)
        if not isinstance(table, dict):
            raise ValueError(f"{key}.{att}={table!r}: expected a table of sampler settings ({', '.join(fields)})")
        unknown = sorted(set(table) - set(fields))
        if unknown:
            raise ValueError(f"{key}.{att}: unknown key(s) {unknown} (known: {fields})")
        out[att] = {k: _coerce(f"{key}.{att}.{k}", table[k], hints[k]) for k in fields if k in table}
    return out


@dataclass
class AdamConfig:
    seeds: int = 4
    steps: int = 3000
    lr: float = 0.01
    inits: list[str] = field(default_factory=lambda: ["small", "hot"])
    record_every: int = 50
    log_records: int = 0  # also record at this many log-spaced steps (resolves the fast early rise)


@dataclass
class RunConfig:
    """Everything a phase-diagram run depends on. Override from the CLI with ``--set section.key=value``."""

    name: str = "default"
    attention: list[str] = field(default_factory=lambda: ["softmax", "linear"])
    methods: list[str] = field(default_factory=lambda: ["theory", "mcmc", "adam"])
    seed: int = 0
    workers: int = 1
    # the task and prior dataclasses themselves are the config sections (validated when built)
    task: CopyTask = field(default_factory=lambda: CopyTask(T=32, d=8))
    prior: Prior = field(default_factory=Prior)
    P: GridConfig = field(default_factory=GridConfig)
    theory: TheoryConfig = field(default_factory=TheoryConfig)
    mcmc: MCMCConfig = field(default_factory=MCMCConfig)
    adam: AdamConfig = field(default_factory=AdamConfig)

    # --- construction ---
    @classmethod
    def from_dict(cls, data: dict) -> RunConfig:
        return _from_dict(cls, data, "")

    @classmethod
    def from_toml(cls, path: str | Path) -> RunConfig:
        return cls.from_dict(load_toml(path, CONFIG_DIRS)[1])

    def override(self, dotted: str, value: Any) -> RunConfig:
        """Return a copy with ``section.key`` (or ``key``) set to ``value`` (coerced to the field's type)."""
        data = dataclasses.asdict(self)
        *path, last = dotted.split(".")
        node = data
        for i, part in enumerate(path):
            if path[:i] == ["mcmc", "by_attention"] and part not in node:  # a new per-attention table
                check_choice(f"--set {dotted}: attention", part, ATTENTIONS)
                node[part] = {}
            if not isinstance(node.get(part), dict):
                raise ValueError(f"--set {dotted}: unknown section {part!r}")
            node = node[part]
        if path[:2] == ["mcmc", "by_attention"] and len(path) == 3:  # a per-attention override: any field
            node[last] = value
            return RunConfig.from_dict(data)
        if last not in node:
            raise ValueError(f"--set {dotted}: unknown key {last!r} (known: {', '.join(node)})")
        node[last] = value
        return RunConfig.from_dict(data)

    def validate(self) -> RunConfig:
        if not self.attention:
            raise ValueError(f"attention=[]: expected at least one of {', '.join(map(repr, ATTENTIONS))}")
        for a in self.attention:
            check_choice("attention", a, ATTENTIONS)
        if not self.methods:
            raise ValueError(f"methods=[]: expected at least one of {', '.join(map(repr, METHODS))}")
        for m in self.methods:
            check_choice("methods", m, METHODS)
        check_int("seed", self.seed, minimum=0)
        check_int("workers", self.workers, minimum=1)
        self.P.grid()
        for where, m in [("mcmc", dataclasses.asdict(self.mcmc))] + [
            (f"mcmc.by_attention.{a}", self.mcmc.effective(a)) for a in self.mcmc.by_attention
        ]:
            check_choice(f"{where}.method", m["method"], SAMPLERS)
            check_choice(f"{where}.backend", m["backend"], BACKENDS)
            for i in m["inits"]:
                check_choice(f"{where}.inits", i, SAMPLER_INITS)
            for k in ("num_chains", "num_warmup", "num_samples"):
                check_int(f"{where}.{k}", m[k], minimum=1)
            if not m["inits"]:
                raise ValueError(f"{where}.inits=[]: expected at least one initialisation")
        for i in self.adam.inits:
            check_choice("adam.inits", i, TRAIN_INITS)
        check_int("adam.seeds", self.adam.seeds, minimum=1)
        check_int("adam.steps", self.adam.steps, minimum=1)
        check_int("adam.record_every", self.adam.record_every, minimum=1)
        check_positive("adam.lr", self.adam.lr)
        if not self.adam.inits:
            raise ValueError("adam.inits=[]: expected at least one initialisation")
        check_int("theory.num_P", self.theory.num_P, minimum=2)
        if self.theory.vary_name:
            check_choice("theory.vary_name", self.theory.vary_name, ("sigma_A2", "T"))
        return self

    def make_task(self) -> CopyTask:
        return self.task

    def make_prior(self) -> Prior:
        return self.prior

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _from_dict(cls, data: dict, where: str):
    if not isinstance(data, dict):
        raise ValueError(f"config section {where or 'top level'!r}: expected a table, got {data!r}")
    hints = get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(data) - names
    if unknown:
        raise ValueError(f"config {where or 'top level'}: unknown key(s) {sorted(unknown)} (known: {sorted(names)})")
    kwargs = {}
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        if f.name in data:
            value = data[f.name]
        else:  # a default goes through the same coercion as a given value, so that a config reads the same
            # however it was built (from a file, by --set or --workers) and its points keep their names
            value = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            if value is dataclasses.MISSING or value is None:
                continue
            if dataclasses.is_dataclass(value):
                value = dataclasses.asdict(value)
        key = f"{where}.{f.name}" if where else f.name
        if cls is MCMCConfig and f.name == "by_attention":
            kwargs[f.name] = _coerce_by_attention(key, value)
        elif dataclasses.is_dataclass(hint):
            kwargs[f.name] = _from_dict(hint, value, key)
        else:
            kwargs[f.name] = _coerce(key, value, hint)
    return cls(**kwargs)


def _coerce(key: str, value: Any, hint) -> Any:
    """Coerce CLI strings and TOML values to the field type; ValueError naming the key otherwise."""
    origin = getattr(hint, "__origin__", None)
    try:
        if origin is list:
            (inner,) = hint.__args__
            if isinstance(value, str):
                value = [v for v in value.split(",") if v.strip()]
            return [_coerce(key, v, inner) for v in value]
        if hint is bool:
            if isinstance(value, str):
                return {"true": True, "1": True, "false": False, "0": False}[value.lower()]
            return bool(value)
        if hint is int:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            return int(value)
        if hint is float:
            return float(value)
        return str(value).strip()
    except (ValueError, TypeError, KeyError):
        raise ValueError(f"{key}={value!r}: expected {getattr(hint, '__name__', hint)}") from None
