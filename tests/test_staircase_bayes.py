"""The H-head sampler on the multi-lag copy task: it recovers the known solved configuration (one head per lag)
on a tiny problem, from a cold start and from the swapped hot start; the transition finder."""

import jax
import numpy as np

import bayesattn as ba
from bayesattn.experiments.staircase import hot_init, transitions


def test_two_heads_recover_one_lag_each():
    task = ba.MultiLagCopyTask(T=4, d=3, spans=((1,), (2,)), weights=(1.0, 0.8), rotations="orthogonal", seed=1)
    prior = ba.Prior(4.0, 100.0, 1.0)
    post = ba.Posterior(task.sample(jax.random.key(0), 400), "softmax", prior, heads=2)
    hot = hot_init(task, 2, "softmax", prior)[::-1]  # head 0 on lag 2, head 1 on lag 1: the label-swapped solution
    for init in ["cold", hot]:
        s = ba.sample(post, jax.random.key(1), num_chains=2, num_warmup=150, num_samples=100, init=init)
        op = {k: np.asarray(v) for k, v in s.order_parameters.items()}
        # label free: each lag is carried by some head with most of its mass
        assert op["mass_max:lag1"].mean() > 0.8 and op["mass_max:lag2"].mean() > 0.8
        # and by different heads in every chain (the cooperative, solved configuration)
        for c in range(2):
            h1 = np.argmax([op[f"mass_h{h}:lag1"][c].mean() for h in range(2)])
            h2 = np.argmax([op[f"mass_h{h}:lag2"][c].mean() for h in range(2)])
            assert h1 != h2
    # the exact optimum has the readout [w_1 U_1, w_2 U_2]: its posterior mean at the hot pattern is close to it
    L = hot_init(task, 2, "softmax", prior) * 3
    mean, _ = post.readout_posterior(L)
    np.testing.assert_allclose(np.asarray(mean).reshape(task.readout().shape), np.asarray(task.readout()), atol=0.15)


def test_transitions_log_interpolates():
    P = np.array([100.0, 1000.0, 10000.0])
    assert np.isclose(transitions(P, np.array([0.1, 0.3, 0.9]), 0.2), 10**2.5, rtol=1e-12)
    assert transitions(P, np.array([0.1, 0.1, 0.1]), 0.2) is None
