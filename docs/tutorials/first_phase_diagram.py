# %% [markdown]
# # Your first phase diagram, from Python
#
# The copy head's transition in the number of training sequences P, three ways: the order-parameter theory
# (`ba.theory`), exact-posterior MCMC (`ba.sample`) and a whole experiment run through the toolkit's contract
# (`run_experiment`), whose result folder the command line would write too. Small sizes: this page is executed
# every time the documentation is built.

# %%
# notebook progress bars would need ipywidgets; the runs below show none
import warnings

warnings.filterwarnings("ignore", message="IProgress not found")
import jax
import matplotlib.pyplot as plt
import numpy as np

import bayesattn as ba

task, prior = ba.CopyTask(T=32, d=8), ba.Prior(1.0, 100.0, 400.0)  # beta = P d / (2 sigma2) = P / 100
P = np.linspace(300, 2000, 120)
softmax = ba.theory.phase_curve(task, prior, "softmax", P)
linear = ba.theory.phase_curve(task, prior, "linear", np.geomspace(300, 4000, 120))
print(softmax.transition["order"], round(softmax.transition["P_c"]))
print(linear.transition["order"], round(linear.transition["P_c"]))

# %% [markdown]
# Softmax attention jumps (a first-order transition: two minima of the free energy exchange stability at P_c);
# linear attention leaves u = 0 continuously (second order). The stable branch and the posterior mean:

# %%
fig, ax = plt.subplots(1, 2, figsize=(9, 3.4))
ax[0].plot(softmax.P, softmax.stable["m"], "k-", label="stable branch")
ax[0].plot(softmax.P, softmax.mean["m"], color="0.5", label="posterior mean")
ax[0].set(xlabel="P", ylabel="copy weight m", title="softmax")
ax[1].plot(linear.P, linear.mean["u"], color="tab:orange", label="posterior mean")
ax[1].set(xlabel="P", ylabel="alignment u", title="linear", xscale="log")
for a in ax:
    a.legend(fontsize=8)
fig.tight_layout()

# %% [markdown]
# ## Exact MCMC at a few P
#
# The closed-form posterior over the attention logits L (the readout V integrated out) at T = 8, where a short
# NUTS run is quick, against the theory's posterior mean of m.

# %%
small = ba.CopyTask(T=8, d=8)
prior8 = ba.Prior(1.0, 100.0, 800.0)
Ps = [500, 1000, 2000]
theory8 = ba.theory.phase_curve(small, prior8, "softmax", np.asarray(Ps, float))
for i, P_ in enumerate(Ps):
    data = small.sample(jax.random.key(i), P_)
    post = ba.Posterior(data, "softmax", prior8)
    s = ba.sample(post, jax.random.key(100 + i), num_chains=2, num_warmup=200, num_samples=300)
    m = s.summary()["m"]
    print(
        f"P = {P_}: MCMC m = {m['mean']:.3f} +- {m['se']:.3f} (R-hat {m['r_hat']:.3f}); theory {theory8.mean['m'][i]:.3f}"
    )

# %% [markdown]
# ## The same as an experiment
#
# Every system of the toolkit is an experiment of one contract: a config, a grid of points, a summary and
# figures. `run_experiment` computes every missing point (one file each, atomic and resumable), then the summary
# and the figures; `bayesattn run phase-diagram` does exactly this from the command line.

# %%
import tempfile
from pathlib import Path

from bayesattn.experiments import get_experiment
from bayesattn.sweep import run_experiment

PhaseDiagram = get_experiment("phase-diagram")
config = PhaseDiagram.load_config("default", ["methods=theory", "theory.vary_name="])
folder = Path(tempfile.mkdtemp()) / "run"
summary = run_experiment(PhaseDiagram(), config, folder, progress=False)
print(sorted(p.name for p in (folder / "figures").glob("*.png")))
