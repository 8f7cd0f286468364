"""Nested R-hat (bayesattn.bayes.samples.nested_r_hat) against a loop-by-loop transcription of Margossian et al.
(2023)'s definition, against its two limiting cases computed by other libraries (one chain per superchain:
numpyro's classic R-hat, up to the paper's 1/N term; one draw per chain: blackjax's superchain splitR), and
against the population value for superchains with shifted means."""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import pytest
from blackjax.diagnostics import splitR
from numpyro.diagnostics import gelman_rubin

from bayesattn.bayes.samples import nested_r_hat


def brute_force(x, labels):
    """The paper's sums written out: superchain means, between-superchain variance (K - 1), and per superchain
    the variance of its chain means (M - 1; 0 for M = 1) plus the mean within-chain variance (N - 1; 0 for N = 1)."""
    K = sorted(set(labels.tolist()))
    N = x.shape[1]
    sc_means, within = [], []
    for k in K:
        chains = [x[c] for c in range(x.shape[0]) if labels[c] == k]
        M = len(chains)
        cmeans = [sum(ch) / N for ch in chains]
        sc_mean = sum(cmeans) / M
        b = sum((cm - sc_mean) ** 2 for cm in cmeans) / (M - 1) if M > 1 else 0.0
        w = sum(sum((v - cm) ** 2 for v in ch) / (N - 1) for ch, cm in zip(chains, cmeans)) / M if N > 1 else 0.0
        sc_means.append(sc_mean)
        within.append(b + w)
    mean = sum(sc_means) / len(K)
    B = sum((s - mean) ** 2 for s in sc_means) / (len(K) - 1)
    return math.sqrt(1 + B / (sum(within) / len(K)))


@pytest.mark.parametrize("K, M, N", [(4, 8, 30), (3, 1, 50), (5, 4, 1), (2, 2, 2)])
def test_nested_r_hat_is_the_papers_formula(K, M, N):
    rng = np.random.default_rng(K * 100 + M * 10 + N)
    shift = np.repeat(rng.normal(0, 0.3, K), M)[:, None]
    x = rng.normal(size=(K * M, N)) + shift
    labels = np.repeat(rng.permutation(K) * 7, M)  # labels need not be 0..K-1
    assert nested_r_hat(x, labels) == pytest.approx(brute_force(x, labels), rel=1e-12)


def test_one_chain_per_superchain_is_classic_r_hat_plus_one_over_n():
    # the paper's footnote: with M = 1, nR-hat^2 = R-hat^2 + 1/N (classic R-hat has the (N - 1)/N factor)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(6, 40)) + rng.normal(0, 0.2, (6, 1))
    assert nested_r_hat(x, np.arange(6)) ** 2 == pytest.approx(float(gelman_rubin(x)) ** 2 + 1 / 40, rel=1e-12)


def test_one_draw_per_chain_is_blackjax_superchain_split_r():
    # N = 1: blackjax.diagnostics.splitR on the chains' last states, superchains of consecutive chains
    rng = np.random.default_rng(2)
    x = rng.normal(size=(32, 1)) + np.repeat(rng.normal(0, 0.5, 4), 8)[:, None]
    ref = splitR(jnp.asarray(x), 32, 8, func_for_splitR=lambda v: v)
    assert nested_r_hat(x, np.repeat(np.arange(4), 8)) == pytest.approx(float(ref[0]), rel=1e-10)


def test_nested_r_hat_detects_shifted_superchains():
    rng = np.random.default_rng(3)
    labels = np.repeat(np.arange(8), 16)
    iid = rng.normal(size=(128, 200))
    assert 1.0 <= nested_r_hat(iid, labels) < 1.005
    # superchain means shifted by delta_k: nR-hat^2 - 1 -> var(delta) / (1 + var of chain means) ~ var(delta)
    delta = np.linspace(-0.5, 0.5, 8)
    r = nested_r_hat(iid + delta[labels][:, None], labels)
    assert r**2 - 1 == pytest.approx(np.var(delta, ddof=1), rel=0.15)
    assert math.isnan(nested_r_hat(iid, np.zeros(128)))  # one superchain: undefined
    with pytest.raises(ValueError, match="superchains"):
        nested_r_hat(iid, labels[:10])
