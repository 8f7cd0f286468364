"""The joint (L, V) reference model and its sampler, numpyro NUTS on L and V together."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from .._validate import brief, check_bool, check_key, check_real_array
from ..models.attention import AttentionModel
from ..tasks import Dataset, Task, check_dataset
from .posterior import Posterior, Prior
from .samplers.numpyro_nuts import run_numpyro_mcmc
from .samples import Samples, assemble_samples, check_counts, key_data, problem_config


def joint_model(X, Y, task, attention, prior, heads: int | None = None):
    """numpyro model of the joint posterior of (L, V) given the data, written from the model's definition
    (docs/model.md section 1): L^h_ts ~ N(0, sigma_A2), V_ij ~ N(0, sigma_V2/d), y ~ N(V z, sigma2 I) on query rows,
    z = [z^1, ..., z^H] the concatenated head outputs. X: (P, T, d), Y: (P, T, d_out); L: (T, T) or (H, T, T),
    V: (d_out, H d). ``attention``: a kind string (with ``heads``) or an AttentionModel."""
    model = AttentionModel.coerce(attention, heads)
    if not isinstance(task, Task):
        raise ValueError(f"task={brief(task)}: expected a bayesattn Task (the data's, dataset.task)")
    if not isinstance(prior, Prior):
        raise ValueError(f"prior={brief(prior)}: expected a bayesattn Prior")
    X = jnp.asarray(check_real_array("X", X, (None, task.T, task.d)))  # NaN, or another T, failed inside numpyro
    Y = jnp.asarray(check_real_array("Y", Y, (X.shape[0], task.T, task.d_out)))
    T, d, H = task.T, task.d, model.heads
    L = numpyro.sample(
        "L",
        dist.Normal(0.0, math.sqrt(prior.sigma_A2))
        .expand(list(model.logit_shape(T)))
        .to_event(len(model.logit_shape(T))),
    )
    V = numpyro.sample("V", dist.Normal(0.0, math.sqrt(prior.sigma_V2 / d)).expand([task.d_out, H * d]).to_event(2))
    rows = np.flatnonzero(task.query_mask)
    alpha = model.weights(L, task.key_mask).reshape(H, T, T)[:, rows]
    Z = jnp.einsum("hts,psi->pthi", alpha, X).reshape(X.shape[0], len(rows), H * d)
    numpyro.sample("Y", dist.Normal(Z @ V.T, math.sqrt(prior.sigma2)).to_event(3), obs=Y[:, rows])


def sample_joint(
    dataset: Dataset,
    key: jax.Array,
    *,
    attention="softmax",
    prior: Prior | None = None,
    heads: int | None = None,
    num_chains: int = 4,
    num_warmup: int = 500,
    num_samples: int = 1000,
    thin: int = 1,
    progress: bool = False,
) -> Samples:
    """Reference sampler: numpyro NUTS on :func:`joint_model` (L and V together; cost grows with P).
    Returns the L draws as :class:`Samples` (method "joint_nuts"), with the same observables as
    :func:`~bayesattn.sample`."""
    check_key("key", key)
    dataset = check_dataset("dataset", dataset)
    prior = Prior() if prior is None else prior
    post = Posterior(dataset, attention, prior, heads=heads)  # only for the observables and validation
    num_chains, num_warmup, num_samples, thin = check_counts(num_chains, num_warmup, num_samples, thin)
    progress = check_bool("progress", progress)
    kernel = numpyro.infer.NUTS(joint_model)
    samples, diag, stats = run_numpyro_mcmc(
        kernel,
        key,
        None,
        num_chains=num_chains,
        num_warmup=num_warmup,
        num_samples=num_samples,
        thin=thin,
        progress=progress,
        model_kwargs=dict(X=dataset.X, Y=dataset.Y, task=dataset.task, attention=post.model, prior=prior),
    )
    L = np.asarray(samples["L"])
    logdens = np.zeros(L.shape[:2])  # finiteness of L is what is checked for the reference
    config = {
        "method": "joint_nuts",
        "backend": "numpyro",
        "num_chains": num_chains,
        "num_warmup": num_warmup,
        "num_samples": num_samples,
        "thin": thin,
        "key": key_data(key),
        **problem_config(post),
    }
    return assemble_samples(post, L, logdens, diag, "joint_nuts", config, sample_stats=stats)
