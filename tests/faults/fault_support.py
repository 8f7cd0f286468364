import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ENV = {
    **os.environ,
    "JAX_PLATFORMS": "cpu",
    "BAYESATTN_CACHE_DIR": "off",
    "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE), os.environ.get("PYTHONPATH", "")]),
}
VOLATILE = ("wall_time_s", "finished_at", "provenance", "versions", "checksum")


def use_toy(monkeypatch):
    """Register the toy experiment for this test's in-process command line (undone with ``monkeypatch``)."""
    if str(HERE) not in sys.path:
        monkeypatch.syspath_prepend(str(HERE))
    from toy import Toy

    from bayesattn.experiments import EXPERIMENTS

    monkeypatch.setitem(EXPERIMENTS, "toy", Toy)
    return Toy


def toy_command(*args: str) -> list[str]:
    """A child process running ``bayesattn run toy ARGS`` (the toy registered first), as the command does."""
    code = "import sys, toy; toy.register()\nfrom bayesattn.cli import main\nsys.exit(main())"
    return [sys.executable, "-c", code, "run", "toy", *args]


def folder_state(out: Path) -> dict:
    """{relative path: content} of every point file, volatile fields dropped (what must survive any fault)."""
    state = {}
    for p in sorted((out / "points").rglob("*.json")):
        rec = json.loads(p.read_text())
        if isinstance(rec, dict) and "point" in rec:
            state[str(p.relative_to(out))] = {k: v for k, v in rec.items() if k not in VOLATILE}
    return state
