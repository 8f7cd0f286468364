"""The suite runs with little XLA optimisation (tests/conftest.py): the numbers it checks are those of the fully
optimised programs users run, up to rounding. Checked here on the closed form's log density and gradient, computed
in two fresh processes, one at the suite's level and one at JAX's default level."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
import numpy as np

SCRIPT = """
import json, sys
import jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
import bayesattn as ba
out = {}
for attention in ("softmax", "linear"):
    task = ba.CopyTask(T=8, d=4)
    post = ba.Posterior(task.sample(jax.random.key(0), 40), attention, ba.Prior(1.0, 10.0, 4.0))
    L = jax.random.normal(jax.random.key(1), (3, 8, 8), jnp.float64)
    value, grad = jax.vmap(jax.value_and_grad(post.log_density))(L)
    out[attention] = {"value": value.tolist(), "grad": grad.tolist(), "flag": jax.config.read("jax_disable_most_optimizations")}
json.dump(out, sys.stdout)
"""


def run(level: str) -> dict:
    env = os.environ | {"JAX_DISABLE_MOST_OPTIMIZATIONS": level, "BAYESATTN_CACHE_DIR": "off"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def test_the_suites_optimisation_level_changes_numbers_only_by_rounding():
    low, full = run("1"), run("0")
    for attention in ("softmax", "linear"):
        assert low[attention]["flag"] is True and full[attention]["flag"] is False
        for name in ("value", "grad"):
            a, b = np.asarray(low[attention][name]), np.asarray(full[attention][name])
            assert np.all(np.isfinite(a)) and np.abs(b).max() > 0
            np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-11 * np.abs(b).max(), err_msg=f"{attention} {name}")


def test_the_suite_itself_runs_at_the_low_level_unless_told_otherwise():
    expected = os.environ.get("JAX_DISABLE_MOST_OPTIMIZATIONS", "1").lower() in ("1", "true", "yes", "on")
    assert jax.config.read("jax_disable_most_optimizations") is expected
