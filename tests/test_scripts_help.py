"""Every script in benchmarks/ and scripts/ still starts: its ``--help`` exits 0 (argparse runs after the script's
imports and its parser's construction, which is where a renamed name of the package breaks a script first). All of
them run in one child process, so jax is imported once, and the package is imported afresh for each; a script that needs a tool installed elsewhere (the
mutation test's cosmic-ray) must then say so in one line, without a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted([*ROOT.glob("benchmarks/*.py"), *ROOT.glob("scripts/*.py")])

_DRIVER = """
import contextlib, io, json, os, runpy, sys, traceback
out = {}
for path in sys.argv[1:]:
    for name in [m for m in sys.modules if m.split(".")[0] == "bayesattn" or m.startswith("bench_")]:
        del sys.modules[name]  # each script imports the package afresh, as in its own process
    sys.argv = [path, "--help"]
    sys.path.insert(0, os.path.dirname(path))  # as `python path` puts the script's folder first
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            runpy.run_path(path, run_name="__main__")
        out[path] = ["no exit", buf.getvalue()[:300]]
    except SystemExit as e:
        out[path] = [e.code if e.code is None or isinstance(e.code, int) else str(e.code), buf.getvalue()[:300]]
    except BaseException:
        out[path] = ["raised", traceback.format_exc()[-600:]]
    sys.path.pop(0)
print(json.dumps(out))
"""


def test_every_script_answers_help():
    assert len(SCRIPTS) >= 20
    r = subprocess.run(
        [sys.executable, "-c", _DRIVER, *map(str, SCRIPTS)], capture_output=True, text=True, cwd=ROOT, timeout=600
    )
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    for path, (code, text) in got.items():
        name = Path(path).name
        if code in (0, None) and "usage:" in text:
            continue
        assert name == "mutation_test.py" and isinstance(code, str) and "cosmic-ray" in code, (name, code, text)
