"""The minibatch training loss is an unbiased estimate of the full-batch objective J (squared error from the
sufficient statistics plus the prior's weight decay): averaged over many batches it equals J, and dropping the prior
term (or subsampling it) would move the average by many standard errors."""

import jax
import jax.numpy as jnp
import numpy as np

import bayesattn as ba
from bayesattn.training.objective import joint_loss, minibatch_loss, prior_decay


def test_minibatch_loss_averages_to_the_full_batch_objective():
    task = ba.CopyTask(T=6, d=3)
    prior = ba.Prior(0.5, 4.0, 30.0)  # a large sigma2: the prior decay is a large part of J
    data = task.sample(jax.random.key(0), 40)
    post = ba.Posterior(data, "softmax", prior)
    kL, kV, kb = jax.random.split(jax.random.key(1), 3)
    L = 1.5 * jax.random.normal(kL, (6, 6))
    V = 1.5 * jax.random.normal(kV, (3, 3))
    full = float(joint_loss(post, L, V))
    # the reference: the objective of ba.training_objective, recomputed as a sum over sequences and rows
    alpha = jax.nn.softmax(L, axis=-1)
    F = jnp.einsum("ts,psi,ji->ptj", alpha, data.X, V)
    sq = float(jnp.sum((data.Y - F) ** 2))
    decay = float(prior_decay(prior, 3, post.n, L, V))
    assert np.isclose(full, 0.5 * sq / post.n + decay, rtol=1e-10)
    B, draws = 5, 4000
    idx = jax.random.randint(kb, (draws, B), 0, data.P)
    est = np.asarray(jax.vmap(lambda i: minibatch_loss(post, L, V, data.X[i], data.Y[i], data.P))(idx))
    mean, se = est.mean(), est.std(ddof=1) / np.sqrt(draws)
    assert abs(mean - full) < 4 * se, (mean, full, se)
    assert decay > 20 * se  # without its prior term the estimate would be off by this much
