# %% [markdown]
# # The three transitions
#
# Three objects of the same model have a transition in P, at three different places: the mode of the joint
# density p(L, V | D) (what Adam on the network finds), the mode of the marginal p(L | D) (Adam with the readout
# integrated out: the readout's Occam term added) and the posterior itself (the entropy of L added too). The
# zero-temperature theory gives the two modes, the order-parameter theory the posterior. The full experiment,
# with Adam and NUTS measuring each, is `bayesattn three-transitions` (docs: results/three_transitions).

# %%
# notebook progress bars would need ipywidgets; the runs below show none
import warnings

warnings.filterwarnings("ignore", message="IProgress not found")
import matplotlib.pyplot as plt
import numpy as np

import bayesattn as ba

task, prior = ba.CopyTask(T=32, d=8), ba.Prior(1.0, 100.0, 400.0)
P = np.arange(150.0, 1200.0, 4.0)
joint = ba.theory.mode_curve(task, prior, "softmax", P, objective="joint")
marginal = ba.theory.mode_curve(task, prior, "softmax", P, objective="marginal")
posterior = ba.theory.phase_curve(task, prior, "softmax", P)
for name, c in (("joint mode", joint), ("marginal mode", marginal), ("posterior", posterior)):
    tr = c.transition
    print(f"{name}: {tr['order']} transition at P = {tr.get('P_c') or tr.get('P_steepest'):.0f}")

# %%
fig, ax = plt.subplots(figsize=(6, 3.4))
ax.plot(joint.P, joint.stable["m"], label="joint mode (Adam)")
ax.plot(marginal.P, marginal.stable["m"], label="marginal mode (Occam term)")
ax.plot(posterior.P, posterior.mean["m"], label="posterior mean (and entropy)")
ax.set(xlabel="P", ylabel="copy weight m")
ax.legend(fontsize=8)
fig.tight_layout()
