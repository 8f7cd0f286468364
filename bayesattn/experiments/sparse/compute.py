"""What one point of the sparse-pattern experiment computes: the training of one seed (computed with the other
seeds of its aligned block in one vmapped program: :func:`train_block`), NUTS on the surrogate's posterior at one
(S, s, P, init), and the s-source theory at one (S, s)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..._batching import seed_blocks
from ...bayes.posterior import Posterior
from ...bayes.sampling import sample
from ...bayes.theory.common import first_crossing
from ...models.attention import hot_logits
from ...tasks.sparse import SparseRegressionTask
from .config import BayesSparseConfig, SparseTrainConfig
from .training import train_seeds

KEEP_EVERY = 10  # histories are stored every 10 steps (t* is computed at full resolution before)
transitions = first_crossing


def train_block(points: list[dict], progress: bool = False) -> list[dict]:
    """The training of the seeds of ``points`` (one training config, one aligned block of ``seeds_per_program``
    seeds): the whole block trains in one vmapped program, whichever of its seeds are asked for, so that a seed's
    result depends on its seed and its config alone. Per seed, each cut at the seed's own stop step: t*, plateau,
    final IoU / entropy, the histories every KEEP_EVERY steps (accuracy as the 10-step trailing mean), the final
    head-mean attention and the seed's row supports (its own map A when ``A = "per_seed"``); the automaton's loss
    per predicted state."""
    p0 = points[0]
    cfg = SparseTrainConfig.from_point(p0["train"])
    ((block, _),) = seed_blocks([p["seed"] for p in points], p0["seeds_per_program"])
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(
            total=cfg.steps,
            desc=f"S={cfg.S} s={cfg.s} {cfg.model} seeds {block[0]}..{block[-1]}",
            unit="step",
            leave=False,
        )
    try:
        r = train_seeds(cfg, block, jax.random.key(p0["key"]), progress=bar)
    finally:
        if bar is not None:
            bar.close()
    acc = np.asarray(r["acc"])
    trail = np.stack([np.convolve(a, np.ones(10) / 10, mode="full")[: a.size] for a in acc])
    rec_step = np.asarray(r["record_step"])
    out = []
    for p in points:
        i = block.index(p["seed"])
        stop = int(r["stop_step"][i])  # this seed's own end: its results do not depend on the other seeds
        keep = np.arange(KEEP_EVERY - 1, stop, KEEP_EVERY)
        nrec = int(np.sum(rec_step <= stop))
        out.append(
            {
                "seed": p["seed"],
                "t_star": r["t_star"][i],
                "plateau": r["plateau"][i],
                "steps_run": stop,
                "budget": cfg.steps,
                "train_wall_s": r["wall_s"],
                "iou_final": float(r["iou"][i, nrec - 1]),
                "entropy_final": float(r["entropy"][i, nrec - 1]),
                "history": {
                    "step": (keep + 1).tolist(),
                    "loss": r["loss"][i, keep].tolist(),
                    "acc10": trail[i, keep].tolist(),
                },
                "records": {
                    "step": rec_step[:nrec].tolist(),
                    "iou": r["iou"][i, :nrec].tolist(),
                    "entropy": r["entropy"][i, :nrec].tolist(),
                },
                "attention": r["attention"][i].tolist(),
                "support": np.asarray(r["row_supports"][i]).tolist(),
                "A": cfg.A,
                # the automaton's loss per predicted state at the stop step (x_1 .. x_k, on the probe sequences)
                **({"state_loss": r["state_loss"][i].tolist()} if cfg.task == "cellular_automaton" else {}),
            }
        )
    return out


def bayes_point(point: dict) -> dict:
    """NUTS on the surrogate's closed-form posterior at one (S, s, P, init). Mass on the support
    M = s m (m: the order parameter against the pattern A / s), normalised overlap u_s = s u (1 at the pattern)."""
    b = BayesSparseConfig.load(point["bayes"], source="point")
    S, s, P = point["S"], point["s"], point["P"]
    task = SparseRegressionTask(S=S, s=s, dim=b.dim, seed=point["task_seed"], normalize=b.normalize)
    prior = b.prior.make()
    k_data, k_mcmc = jax.random.split(jax.random.key(point["key"]))
    post = Posterior(task.sample(k_data, P), "softmax", prior)
    init = "cold"
    if point["init"] == "hot":
        # logits c on the support with s e^c / (s e^c + S - s) = 0.9: 90% of every row's mass on its support
        c = float(np.log(9.0 * max(S - s, 1) / s))
        init = jnp.asarray(hot_logits(task.support, task.key_mask, "softmax", c))
    smp = sample(
        post,
        k_mcmc,
        num_chains=b.mcmc.num_chains,
        num_warmup=b.mcmc.num_warmup,
        num_samples=b.mcmc.num_samples,
        init=init,
    )
    m = np.asarray(smp.order_parameters["m"]).reshape(b.mcmc.num_chains, -1)
    u = np.asarray(smp.order_parameters["u"]).reshape(b.mcmc.num_chains, -1)
    return {
        "mass": float(s * m.mean()),
        "mass_chains": (s * m.mean(1)).tolist(),
        "mass_std": float(s * m.std()),
        "u_s": float(s * u.mean()),
        "diagnostics": smp.summary()["diagnostics"],
    }


def theory_point(point: dict) -> dict:
    """The order-parameter theory's stable excess mass over a fine grid of P, and its P_c (excess = 1/2)."""
    from ...bayes.theory.sparse import excess_curve

    b = BayesSparseConfig.load(point["bayes"], source="point")
    P = np.geomspace(min(point["P"]), 2 * max(point["P"]), b.theory_P)
    r = excess_curve(
        point["S"],
        point["s"],
        P,
        normalize=b.normalize,
        sigma_A2=b.prior.sigma_A2,
        seed=point["key"],
        d=b.dim,
        sigma2=b.prior.sigma2,
        sigma_V2=b.prior.sigma_V2,
    )
    r["P_c"] = transitions(P, np.asarray(r["excess"]), 0.5)
    return r
