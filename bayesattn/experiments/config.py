"""One config system for every experiment: typed sections (pydantic v2), named configs shipped as package data,
dotted-key overrides, and one error path.

Every section is a :class:`Section`: unknown keys are rejected at every level, values are checked strictly (an
integer field takes an integer, not ``"4"`` or ``4.0``; a float field takes an integer too), and defaults pass
the same checks as given values, so a config reads the same however it was built (a file, ``--set``, Python).
A bad value raises :class:`ConfigError`, a ``ValueError`` whose one-line message names the field, the value and
what is allowed, before any work starts.

This module imports neither JAX nor NumPy: ``bayesattn list`` and ``--help`` answer at once.

>>> class Demo(Section):
...     T: PositiveInt = 32
>>> Demo(T=8).T
8
>>> Demo.load({"T": 0})
Traceback (most recent call last):
...
bayesattn.experiments.config.ConfigError: T=0: Input should be greater than or equal to 1
"""

from __future__ import annotations

import re
import tomllib
import types
import typing
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Self, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

PositiveInt = Annotated[int, Field(ge=1)]
NonNegativeInt = Annotated[int, Field(ge=0)]
PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegativeFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]
SeqLength = Annotated[int, Field(ge=2)]  # a sequence length T
_Item = TypeVar("_Item")
NonEmpty = Annotated[list[_Item], Field(min_length=1)]  # NonEmpty[X]: a list of at least one X
PositiveInts = NonEmpty[PositiveInt]  # such as a P grid
Probability = Annotated[float, Field(gt=0, lt=1)]
# counts that multiply the number of points: bounded, so that a typo (seeds = 10**9) is refused before any work
# instead of building a list of points larger than memory
MAX_SEEDS = 4096
MAX_GRID = 10_000
SeedCount = Annotated[int, Field(ge=1, le=MAX_SEEDS)]
# a seed: keys are folded from it as 32-bit words, so larger ones would wrap onto smaller ones (2**32 onto 0); the
# bound leaves room for the seeds counted up from it
MAX_SEED = 2**31 - 1
Seed = Annotated[int, Field(ge=0, le=MAX_SEED)]
GridCount = Annotated[int, Field(ge=1, le=MAX_GRID)]
Attention = Literal["softmax", "linear"]  # the attention kinds (bayesattn.models.attention.ATTENTIONS)


def _repeated(values: list) -> list:
    """The values given more than once, in order (lists too: a grid of [S, s] pairs)."""
    out = []
    for i, v in enumerate(values):
        if v in values[:i] and v not in out:
            out.append(v)
    return out


def _distinct(values: list) -> list:
    if repeated := _repeated(values):
        raise PydanticCustomError(
            "distinct", "expected distinct values ({repeated} repeated)", {"repeated": ", ".join(map(repr, repeated))}
        )
    return values


def _increasing(values: list) -> list:
    if any(not a < b for a, b in zip(values, values[1:])):
        raise PydanticCustomError("increasing", "expected strictly increasing values (sorted, no repeats)")
    return values


# list checks, as Annotated[list[X], Distinct]; a failure reads "field=[4, 4]: expected distinct values (4 repeated)"
Distinct = AfterValidator(_distinct)  # no value twice: a repeated one would make the same points twice
Increasing = AfterValidator(_increasing)  # a grid the theory takes as it is (bayes.theory.common.check_grid)
NonEmptyDistinct = Annotated[list[_Item], Field(min_length=1), Distinct]  # NonEmptyDistinct[X]


class ConfigError(ValueError):
    """A config that cannot be used: one line naming the field, the value and what is allowed."""


class Section(BaseModel):
    """Base of every config section: unknown keys rejected, strict types, defaults validated, immutable.

    A tuple given for a list field (from Python) is taken as that list."""

    model_config = ConfigDict(extra="forbid", strict=True, validate_default=True, frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _tuples_as_lists(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {
                k: list(v) if isinstance(v, tuple) and _is_list(cls.model_fields.get(k)) else v for k, v in data.items()
            }
        return data

    @model_validator(mode="after")
    def _distinct_choices(self):
        """A list of choices (attention kinds, methods, parts, inits) names each at most once: a repeated one
        would make the same points twice: :data:`Distinct` on every such field, without annotating each."""
        for name, field in type(self).model_fields.items():
            if not _is_list(field) or typing.get_origin(typing.get_args(_unwrap(field.annotation))[0]) is not Literal:
                continue
            values = getattr(self, name) or []
            try:
                _distinct(values)
            except PydanticCustomError as e:  # raised here after validation: named as a section's own check
                raise ValueError(f"{name}={values!r}: {e}") from None
        return self

    @classmethod
    def load(cls, data: Any, source: str = "") -> Self:
        """Build from a plain dict (a parsed TOML file); ConfigError with one line on any bad value."""
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            raise ConfigError(describe_error(cls, e, source)) from None

    def replace(self, **changes: Any) -> Self:
        """A validated copy with ``changes`` applied (``model_copy`` would skip the checks)."""
        return type(self).load({**self.model_dump(), **changes})

    def to_dict(self) -> dict:
        return self.model_dump()

    # fields added after result folders were made, with the value those runs had: a point dict leaves such a field
    # out while it holds that value, so that the point's file name (a hash of the dict) is unchanged and old
    # folders resume
    LEGACY_DEFAULTS: ClassVar[dict[str, Any]] = {}

    def point_dict(self) -> dict:
        """This section as a point's dict: :meth:`to_dict` without the fields at their ``LEGACY_DEFAULTS`` value."""
        d = self.model_dump()
        for k, v in self.LEGACY_DEFAULTS.items():
            if d[k] == v:
                del d[k]
        return d

    @classmethod
    def from_point(cls, d: dict) -> Self:
        """The section of a point's dict (:meth:`point_dict`'s inverse)."""
        return cls.load({**cls.LEGACY_DEFAULTS, **d}, source="point")


def _is_list(field) -> bool:
    return field is not None and typing.get_origin(_unwrap(field.annotation)) is list


def _unwrap(annotation):
    """The annotation without Annotated[...] and without an optional None (``list[str] | None`` -> list[str])."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(args) != 1:
                return annotation
            annotation = args[0]
        else:
            return annotation


def describe_error(cls: type[BaseModel], error: ValidationError, source: str = "") -> str:
    """One line for the first error of a validation: ``[source: ]field.path=value: what is allowed``."""
    err = error.errors(include_url=False)[0]
    loc = ".".join(str(x) for x in err["loc"] if x != "[key]") or "top level"
    where = f"{source}: " if source else ""
    if err["type"] == "extra_forbidden":
        known = _known_keys(cls, err["loc"][:-1])
        return f"{where}{loc}: unknown key (known here: {', '.join(known)})"
    if err["type"] == "missing":
        return f"{where}{loc}: missing (required)"
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] in ("value_error", "assertion_error"):  # a section's own check: its message names the field
        return f"{where}{loc + '.' if err['loc'] else ''}{msg}"
    return f"{where}{loc}={err['input']!r}: {msg}"


def _known_keys(cls: type[BaseModel], loc: tuple) -> list[str]:
    """The fields of the (nested) section at ``loc``."""
    model: Any = cls
    for part in loc:
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            return []
        model = _unwrap(field.annotation)
    return sorted(getattr(model, "model_fields", {}))


# ------------------------------------------------------------------------------------------ overrides
def parse_value(text: str) -> Any:
    """A ``--set`` value: a TOML literal (``4``, ``1e-3``, ``true``, ``[1, 2]``, ``"x"``); else a flat list in
    brackets whose items are bare strings (``[theory,mcmc]``: each item parsed alone); else the bare string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        text = text.strip()
        inner = text[1:-1]
        if text[:1] == "[" and text[-1:] == "]" and "[" not in inner and "]" not in inner:
            return [parse_value(item) for item in inner.split(",")] if inner.strip() else []
        return text


def apply_overrides(cls: type[BaseModel], data: dict, items: Iterable[str]) -> dict:
    """``data`` (a parsed config) with each ``section.key=value`` of ``items`` set; ConfigError naming a bad item.

    A string given for a list field is split at commas (``--set mcmc.inits=cold,hot``). An entry of a list is
    named by its index from 0 (``--set cases.0.T=16``; the list is the config's, or its default)."""
    data = _deep_copy(data)
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE (e.g. --set mcmc.num_chains=4)")
        dotted, text = (s.strip() for s in item.split("=", 1))
        path = dotted.split(".")
        node: dict | list = data
        model: Any = cls
        for i in range(len(path)):
            key, field, model = _override_step(dotted, path, i, node, model)
            if i == len(path) - 1:
                value = parse_value(text)
                if isinstance(value, str) and _is_list(field):
                    value = [parse_value(v) for v in value.split(",") if v.strip()]
                node[key] = value
                break
            child = node[key] if isinstance(node, list) else node.get(key)
            if child is None and _is_list(field):  # the default list, to set one of its entries
                child = field.get_default(call_default_factory=True)
            if isinstance(child, BaseModel):
                child = child.model_dump()
            elif isinstance(child, list):
                child = [e.model_dump() if isinstance(e, BaseModel) else e for e in child]
            elif child is None:
                child = {}
            elif not isinstance(child, dict):
                raise ConfigError(f"--set {dotted}: {'.'.join(path[: i + 1])} is a value, not a section")
            node[key] = child
            node = child
    return data


def _override_step(dotted: str, path: list[str], i: int, node: dict | list, model: Any):
    """(key or index into ``node``, its field or None, the model of what it holds) of ``path[i]``, where ``node``
    holds values of ``model`` (a section, or a list's entries): ConfigError for an unknown key or a bad index."""
    part, where = path[i], ".".join(path[:i]) or "the top level"
    if isinstance(node, list):
        if not part.isdigit() or int(part) >= len(node):
            raise ConfigError(
                f"--set {dotted}: {where} has {len(node)} entries; expected an index in 0..{len(node) - 1}, not {part!r}"
            )
        return int(part), None, model
    fields = getattr(model, "model_fields", None)
    if fields is None:
        return part, None, None  # below a value: refused by the caller as a value, not a section
    if part not in fields:
        raise ConfigError(f"--set {dotted}: unknown key {part!r} in {where} (known: {', '.join(sorted(fields))})")
    field = fields[part]
    held = _unwrap(field.annotation)
    if typing.get_origin(held) is list:
        held = _unwrap(typing.get_args(held)[0])
    return part, field, held


def _deep_copy(data):
    if isinstance(data, dict):
        return {k: _deep_copy(v) for k, v in data.items()}
    return [_deep_copy(v) for v in data] if isinstance(data, list) else data


# ------------------------------------------------------------------------------------------ named configs
class ExperimentConfig(Section):
    """Base of an experiment's top-level config: its ``name`` names the default output folder."""

    name: str = "default"
    description: ClassVar[str] = ""

    @model_validator(mode="after")
    def _folder_name(self):
        """The name is the default output folder's, under results/: a plain folder name, never a path."""
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,99}", self.name):
            raise ValueError(
                f"name={self.name!r}: expected a plain folder name (up to 100 letters, digits, '_', '.', '+' or "
                "'-', starting with a letter or digit)"
            )
        return self


def packaged_configs(package: str) -> dict[str, Path]:
    """{name: path} of the TOML files shipped in ``<package>/configs/`` (package data: found after a wheel
    install, from any directory)."""
    folder = resources.files(package) / "configs"
    if not folder.is_dir():
        return {}
    return {Path(p.name).stem: Path(str(p)) for p in folder.iterdir() if p.name.endswith(".toml")}


def read_toml(path: Path) -> dict:
    """Parse a TOML file; ConfigError naming it when it is not valid TOML or cannot be read."""
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config={str(path)!r}: invalid TOML ({e})") from None
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"config={str(path)!r}: not UTF-8 text, as TOML must be ({e.reason} at byte {e.start})"
        ) from None
    except OSError as e:
        raise ConfigError(f"config={str(path)!r}: cannot be read ({e.strerror or e})") from None


def find_config(package: str, name_or_path: str | Path) -> Path:
    """The TOML file of a named config of ``package``, or an existing file path; ConfigError listing the names."""
    named = packaged_configs(package)
    text = str(name_or_path)
    if text in named:
        return named[text]
    path = Path(text)
    if path.is_file():
        return path
    if path.is_dir():
        raise ConfigError(
            f"config={text!r}: is a folder; expected a TOML file or a named config ({', '.join(sorted(named))})"
        )
    raise ConfigError(f"config={text!r}: no such file or named config (named configs: {', '.join(sorted(named))})")
