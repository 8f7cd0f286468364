"""Named configs: a TOML file given by path, or by name in one of an experiment's config folders."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO_CONFIGS = Path(__file__).resolve().parents[2] / "phase_diagrams"


def config_dirs(sub: str = "") -> tuple[Path, ...]:
    """phase_diagrams/<sub> in the working directory, then in the source checkout."""
    return (Path("phase_diagrams") / sub, REPO_CONFIGS / sub)


def load_toml(path: str | Path, dirs: tuple[Path, ...]) -> tuple[Path, dict]:
    """(resolved path, parsed TOML) of ``path``, or of the named config ``<dir>/<name>.toml`` in ``dirs``.
    ValueError naming the config and the named configs on offer when there is none, or when it is not TOML."""
    path = Path(path)
    if not path.exists():
        named = [d / f"{path.stem}.toml" for d in dirs if (d / f"{path.stem}.toml").exists()]
        if not named:
            names = ", ".join(sorted({p.stem for d in dirs for p in d.glob("*.toml")}))
            raise ValueError(f"config={str(path)!r}: no such file or named config (named configs: {names})")
        path = named[0]
    with open(path, "rb") as f:
        try:
            return path, tomllib.load(f)
        except tomllib.TOMLDecodeError as e:
            raise ValueError(f"config={str(path)!r}: invalid TOML ({e})") from None


def check_keys(cls, data: dict, path) -> None:
    """ValueError naming the config and the keys of ``data`` that are not fields of the dataclass ``cls``."""
    import dataclasses

    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"config {path}: unknown key(s) {unknown}: expected some of {sorted(known)}")
