"""The cache of compiled sampler programs (bayesattn.bayes.program): bounded, least recently used first out,
thread-safe, and a cache only (evicting a program changes no number).

References: the toy programs' outputs are checked against the arithmetic they stand for (x * scale); a sampler's
draws after its program was evicted and compiled again are compared with the draws of its first compilation.
"""

from __future__ import annotations

import threading
import time

import jax
import jax.numpy as jnp
import numpy as np

import bayesattn as ba
from bayesattn.bayes import program

BUILT = []  # the static keys the toy builders were called with, in order


def scaled(scale):
    """A toy program builder: x -> scale * x; records each build (= each compilation)."""
    BUILT.append(scale)
    return lambda x: x * scale


def slow_scaled(scale):
    BUILT.append(scale)
    time.sleep(0.3)  # long enough for a second thread to arrive while this one compiles
    return lambda x: x * scale


def test_cache_is_a_bounded_lru_and_recompiles_what_it_dropped(monkeypatch):
    monkeypatch.setattr(program, "MAX_COMPILED", 3)
    BUILT.clear()
    x = jnp.arange(4.0)
    for s in (1.0, 2.0, 3.0, 4.0, 5.0):  # five programs through a cache of three
        fn, _ = program.compiled_program(scaled, (s,), x)
        np.testing.assert_array_equal(np.asarray(fn(x)), s * np.arange(4.0))
    assert BUILT == [1.0, 2.0, 3.0, 4.0, 5.0]
    fn, seconds = program.compiled_program(scaled, (5.0,), x)  # the newest three are still there
    assert seconds == 0.0 and len(BUILT) == 5
    fn, seconds = program.compiled_program(scaled, (3.0,), x)  # touching 3 makes 4 the least recently used
    assert seconds == 0.0 and len(BUILT) == 5
    fn, seconds = program.compiled_program(scaled, (1.0,), x)  # the oldest was dropped: compiled again
    assert seconds > 0.0 and BUILT[-1] == 1.0 and len(BUILT) == 6
    np.testing.assert_array_equal(np.asarray(fn(x)), np.arange(4.0))
    program.compiled_program(scaled, (3.0,), x)
    program.compiled_program(scaled, (5.0,), x)
    assert len(BUILT) == 6  # 3 and 5 survived the insertion of 1; 4 did not
    program.compiled_program(scaled, (4.0,), x)
    assert BUILT[-1] == 4.0 and len(BUILT) == 7
    # the bound counts programs, not builders or static keys: the same key at another shape is another program
    program.compiled_program(scaled, (4.0,), jnp.arange(5.0))
    assert len(BUILT) == 8


def test_threads_wait_for_one_compilation():
    BUILT.clear()
    x = jnp.arange(3.0)
    out = []
    threads = [
        threading.Thread(target=lambda: out.append(program.compiled_program(slow_scaled, (7.0,), x))) for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert BUILT == [7.0]  # one compilation for three threads
    assert all(fn is out[0][0] for fn, _ in out)
    np.testing.assert_array_equal(np.asarray(out[0][0](x)), 7.0 * np.arange(3.0))


def test_sampler_draws_do_not_depend_on_the_cache(monkeypatch):
    """A sampler program dropped from the cache is compiled again when needed, with the same draws."""
    monkeypatch.setattr(program, "MAX_COMPILED", 1)
    data = ba.CopyTask(T=3, d=2).sample(jax.random.key(0), P=10)
    post = ba.Posterior(data, "softmax", ba.Prior(1.0, 100.0, 10.0))
    run = dict(method="mala", num_chains=2, num_samples=8)
    first = ba.sample(post, jax.random.key(1), num_warmup=10, **run)
    ba.sample(post, jax.random.key(1), num_warmup=11, **run)  # another program: evicts the first
    again = ba.sample(post, jax.random.key(1), num_warmup=10, **run)
    assert again.diagnostics["compile_time_s"] > 0.0  # compiled again, not reused
    np.testing.assert_array_equal(again.L, first.L)
    np.testing.assert_array_equal(again.order_parameters["m"], first.order_parameters["m"])
