# %% [markdown]
# # The posterior of your own data
#
# Any arrays X (P, T, d) and targets Y (P, T, d_out) enter through `Dataset.from_arrays` with a task that says
# which keys each query may attend to and which pattern is the copy head. Here the "user data" are noisy copies of
# the previous token; the closed-form posterior over the attention logits is sampled with NUTS, and the draws go to
# ArviZ for its summary and trace plots.

# %%
# notebook progress bars would need ipywidgets; the runs below show none
import warnings

warnings.filterwarnings("ignore", message="IProgress not found")
# ArviZ announces a coming refactor on import (a FutureWarning about its own API, not about this code)
warnings.filterwarnings("ignore", category=FutureWarning, module="arviz")
import arviz as az
import jax
import numpy as np

import bayesattn as ba

rng = np.random.default_rng(0)
P, T, d = 400, 6, 4
X = rng.standard_normal((P, T, d))
Y = np.roll(X, 1, axis=1) + 0.3 * rng.standard_normal((P, T, d))  # the previous token, plus noise
task = ba.CopyTask(T=T, d=d)  # cyclic: every query attends to every key; the copy pattern is one step back
data = ba.Dataset.from_arrays(X, Y, task)
post = ba.Posterior(
    data, "softmax", ba.Prior(sigma_A2=1.0, sigma_V2=100.0, sigma2=0.1)
)  # noise variance: the targets have 0.09
samples = ba.sample(post, jax.random.key(1), num_chains=2, num_warmup=300, num_samples=300)
m = samples.summary()["m"]
print(f"m = {m['mean']:.4f} +- {m['se']:.4f}, ESS {m['ess_bulk']:.0f}, R-hat {m['r_hat']:.3f}")

# %% [markdown]
# `Samples.to_arviz()` gives an `InferenceData` with the order parameters and L in `posterior` and the per-draw
# sampler statistics (log density, acceptance, divergences, energy, step size) in `sample_stats`:

# %%
idata = samples.to_arviz()
az.summary(idata, var_names=["m", "q", "u"])

# %%
az.plot_trace(idata, var_names=["m", "u"])

# %% [markdown]
# The readout's posterior given one sampled attention matrix, and what it predicts on new sequences:

# %%
L = samples.L[0, -1]
mean_V, cov_V = post.readout_posterior(L)
print(mean_V.shape, cov_V.shape)
