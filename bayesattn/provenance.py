"""What produced a result: the package versions, the git commit of the code, the platform and the JAX backend.
Recorded in every point file and summary."""

from __future__ import annotations

import functools
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = ("bayesattn", "jax", "jaxlib", "numpy", "numpyro", "blackjax", "optax", "scipy", "matplotlib")


def package_versions() -> dict[str, str]:
    """Versions of the packages that determine the numbers, plus Python's."""
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


@functools.cache
def code_version() -> dict[str, Any]:
    """The git commit of the bayesattn source that runs, and whether its tracked files differ from it.

    Only when the imported package is the ``bayesattn/`` folder of a git checkout (an editable install or
    PYTHONPATH); otherwise, e.g. an installed wheel, both are "unknown"."""
    pkg = Path(__file__).resolve().parent
    unknown = {"git_commit": "unknown", "git_dirty": "unknown"}

    def git(*args):
        return subprocess.run(["git", "-C", str(pkg), *args], capture_output=True, text=True, timeout=10)

    try:
        top = git("rev-parse", "--show-toplevel")
        if top.returncode or Path(top.stdout.strip()).resolve() / pkg.name != pkg:
            return unknown  # not a checkout, or a checkout that merely contains an installed copy
        commit = git("rev-parse", "HEAD")
        status = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return unknown
    if commit.returncode or status.returncode:
        return unknown
    return {"git_commit": commit.stdout.strip(), "git_dirty": bool(status.stdout.strip())}


@functools.cache
def cpu_model() -> str:
    """The processor's model name ("unknown" where the system does not say): a float32 training's last bits, and
    so a long training's path, may differ between CPUs (vector widths, fused multiply-adds), so records say which
    one computed them."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def provenance() -> dict[str, Any]:
    """What produced a result: code version (git), platform, JAX backend and devices, package versions."""
    import jax

    return {
        **code_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": cpu_model(),
        "hostname": platform.node(),
        "jax_backend": jax.default_backend(),
        "jax_devices": [f"{d.platform}:{d.device_kind}" for d in jax.devices()],
        "versions": package_versions(),
    }


COMPUTED_ON_KEYS = ("git_commit", "git_dirty", "cpu", "jax_backend", "jax_devices")


def computed_on(records: list[dict]) -> list[dict[str, Any]]:
    """Where a summary's points were computed: the distinct combinations of commit, CPU, JAX backend and devices
    and the jax and jaxlib versions over the point records (each record's own ``provenance`` and ``versions``),
    with the number of points of each, most points first. A summary made from points computed elsewhere (a GPU
    run summarised on a laptop, points taken with ``--reuse``) names their machines here, not only its own."""
    groups: dict[str, dict[str, Any]] = {}
    for r in records:
        prov, versions = r.get("provenance") or {}, r.get("versions") or {}
        row = {k: prov.get(k) for k in COMPUTED_ON_KEYS} | {k: versions.get(k) for k in ("jax", "jaxlib")}
        key = repr(sorted(row.items()))
        groups.setdefault(key, {**row, "points": 0})["points"] += 1
    return sorted(groups.values(), key=lambda g: -g["points"])
