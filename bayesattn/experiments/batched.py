"""Phase-diagram MCMC points of one shape computed together: :func:`mcmc_points` and :func:`mcmc_batch`.

MCMC points that differ only in P share the statistics' shapes (fixed by T and d), so their chains run as one
compiled program (:func:`bayesattn.bayes.batched.sample_many`): vmapped over the points on a GPU, one after
another inside the program on a CPU. Each point's data and keys are those of :func:`copy_head.mcmc_point`
(folded from the seed and the point's own P and init index), so a batched point's result is that of the point
computed alone (on a CPU bit for bit, timings aside: ``tests/test_scaleout.py``)."""

from __future__ import annotations

import json

import jax

from ..bayes.batched import BATCHED_METHODS, sample_many
from ..bayes.posterior import Posterior
from ..sweep import Batch, to_jsonable
from .copy_head import MCMC, _point_config, chain_summary, data_record, held_out_error, point_data, point_keys


def mcmc_group_key(point: dict) -> str | None:
    """Points with the same key (everything but P) can be sampled together; None: not batchable."""
    mcmc = point.get("mcmc", {})
    if mcmc.get("backend", "blackjax") != "blackjax" or mcmc.get("method", "nuts") not in BATCHED_METHODS:
        return None
    return json.dumps(to_jsonable({k: v for k, v in point.items() if k != "P"}), sort_keys=True)


def mcmc_points(points: list[dict]) -> list[dict]:
    """``[mcmc_point(p) for p in points]`` for points of one :func:`mcmc_group_key`, one program per init."""
    if len({mcmc_group_key(p) for p in points}) != 1 or mcmc_group_key(points[0]) is None:
        raise ValueError("points: expected batchable points that differ only in P (mcmc_group_key)")
    cfg = _point_config(points[0])
    att, Ps = points[0]["attention"], [int(p["P"]) for p in points]
    datas = [point_data(cfg.make_task(), cfg.seed, P) for P in Ps]
    posts = [Posterior(d, attention=att, prior=cfg.make_prior()) for d in datas]
    alphas = [jax.jit(jax.vmap(jax.vmap(post.attention_weights))) for post in posts]
    errors = [held_out_error(cfg, post, P) for post, P in zip(posts, Ps)]
    inits: list[dict] = [{} for _ in points]
    for i, init in enumerate(cfg.mcmc.inits):
        samples = sample_many(
            posts,
            [point_keys(cfg.seed, MCMC, P, i) for P in Ps],
            method=cfg.mcmc.method,
            num_chains=cfg.mcmc.num_chains,
            num_warmup=cfg.mcmc.num_warmup,
            num_samples=cfg.mcmc.num_samples,
            init=init,
        )
        for j, s in enumerate(samples):
            inits[j][init] = chain_summary(s, alphas[j], att, errors[j])
    return [{"data": data_record(d), "inits": ini} for d, ini in zip(datas, inits)]


def mcmc_batch(size: int) -> Batch | None:
    """The sweep's batching of MCMC points, ``size`` per program (None for 1: one point per call)."""
    return Batch(key=mcmc_group_key, many=mcmc_points, size=size) if size > 1 else None
