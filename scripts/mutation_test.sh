#!/usr/bin/env bash
# Mutation testing of the core modules (cosmic-ray); not part of the default test run. See tests/README.md.
#
# From a fresh clone, after the test install (python3 -m venv .venv && .venv/bin/pip install -e '.[test]'):
#     scripts/mutation_test.sh [--per-module N] [--seed S] [--modules path ...]
# cosmic-ray goes into its own virtual environment (.venv-mutation/, ignored by git), so the project's
# environment stays as installed; the tests run with the project's Python (PYTHON, default .venv/bin/python).
# Mutants are applied to a scratch copy of the work tree under .mutation/ (ignored); the report is
# .mutation/report.md.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
TOOL_VENV="${MUTATION_VENV:-.venv-mutation}"
COSMIC_RAY_VERSION="8.7.0"
if [ ! -x "$TOOL_VENV/bin/cosmic-ray" ]; then
    python3 -m venv "$TOOL_VENV"
    "$TOOL_VENV/bin/pip" install -q "cosmic-ray==$COSMIC_RAY_VERSION"
fi
exec "$TOOL_VENV/bin/python" scripts/mutation_test.py --python "$PYTHON" "$@"
