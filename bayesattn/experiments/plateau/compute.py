"""The plateau experiment's points: the theory's curve per case, and the training runs of one (case, method,
seed) over all of the case's P (one program; the seed's data and init come from its seed alone)."""

from __future__ import annotations

import time

import numpy as np

from .config import DIFFRAX_METHODS, FLOW_METHODS, TRANSITION_NAME

RULE = (
    "t_plateau: the first time |m| reaches m_half, half-way between 1/T (softmax) or 0 (linear) and the copy "
    "branch's m at that P (the zero-temperature theory's), linearly interpolated between records; gd and sgld: in flow "
    "time lr x steps; adam: in steps"
)


def case_objects(point: dict):
    """(task, prior, attention) of a point's case."""
    from ...bayes.posterior import Prior
    from ...tasks import CopyTask

    case = point["case"]
    return CopyTask(T=case["T"], d=point["d"]), Prior(**point["prior"]), case["attention"]


def transition_P(task, prior, attention: str, P_ref: float) -> tuple[float, str]:
    """(P_star, what it is): the small init's transition (:func:`bayesattn.theory.small_init_transition`: the
    softmax spinodal "P_s" or the linear critical point "P_c"), or ``P_ref`` for a softmax crossover."""
    from ...bayes import theory

    P_star = theory.small_init_transition(task, prior, attention)
    if P_star is None:
        return float(P_ref), "P_ref"
    return P_star, TRANSITION_NAME[attention]


def case_P(point: dict, P_star: float) -> list[int]:
    """The case's P values: round(P_over x P_star), distinct."""
    return sorted({max(1, int(round(f * P_star))) for f in point["case"]["P_over"]})


def crossing(t: np.ndarray, m: np.ndarray, level: float) -> float | None:
    """The first t where m reaches ``level``, linearly interpolated between records; None when it never does."""
    if not np.isfinite(level):
        return None
    above = np.nonzero(m >= level)[0]
    if len(above) == 0:
        return None
    i = int(above[0])
    if i == 0:
        return float(t[0])
    f = (level - m[i - 1]) / (m[i] - m[i - 1])
    return float(t[i - 1] + f * (t[i] - t[i - 1]))


def theory_point(point: dict) -> dict:
    from ...bayes import theory

    task, prior, attention = case_objects(point)
    case = point["case"]
    P_star, what = transition_P(task, prior, attention, case["P_ref"])
    P = case_P(point, P_star)
    lo = P_star * (1.0 + 1e-3) if what != "P_ref" else min(P)
    grid = np.unique(np.concatenate([np.geomspace(lo, max(P), point["theory_points"]), P]))
    curve = theory.plateau_curve(task, prior, attention, grid, init_scale=point["init_scale"])
    return {"P_star": P_star, "P_star_is": what, "P_runs": P, "curve": curve}


def case_runs(point: dict):
    """(task, prior, attention, P_star, what it is, the case's P values, m_half at each): what every run of a
    case needs before it trains."""
    from ...bayes import theory

    task, prior, attention = case_objects(point)
    P_star, what = transition_P(task, prior, attention, point["case"]["P_ref"])
    P = case_P(point, P_star)
    m_half = theory.plateau_curve(task, prior, attention, P, init_scale=point["init_scale"])["m_half"]
    return task, prior, attention, P_star, what, P, m_half


def run_record(P_star, what, P, m_half, t, m, time_unit: str, failures: list, clock: tuple, **extra) -> dict:
    """A run point's result: per P the plateau by :data:`RULE` on |m| (P rows, records) at times t, and the curves
    thinned to at most 120 records. clock: (perf_counter, process_time) at the run's start."""
    rows = [
        {"P": int(p), "m_half": float(m_half[i]), "t_plateau": crossing(t, m[i], m_half[i]), "m_final": float(m[i, -1])}
        for i, p in enumerate(P)
    ]
    thin = np.unique(np.linspace(0, len(t) - 1, min(len(t), 120)).astype(int))
    return {
        "P_star": P_star,
        "P_star_is": what,
        "t_max": float(t[-1]),
        "time_unit": time_unit,
        "rule": RULE,
        "rows": rows,
        "t": t[thin].tolist(),
        "m": m[:, thin].tolist(),
        "failures": failures,
        **extra,
        "cpu_s": time.process_time() - clock[1],
        "wall_s": time.perf_counter() - clock[0],
    }


def run_point(point: dict, progress: bool = False) -> dict:
    import jax

    from ...training import train_sweep

    task, prior, attention, P_star, what, P, m_half = case_runs(point)
    method, lr, steps = point["method"], point["lr"], point["steps"]
    every = max(1, steps // point["records"])
    clock = time.perf_counter(), time.process_time()
    # seeds=[seed]: the data key is fold_in(key(0), seed) and the run key follows from it, so a seed's runs are
    # its own whatever else runs (and every method sees the same data and init)
    noise = {"temperature": point["temperature"]} if method == "sgld" else {}
    sw = train_sweep(
        task,
        prior,
        attention,
        P,
        [point["seed"]],
        jax.random.key(0),
        optimizer="langevin" if method == "sgld" else method,
        **noise,
        lr=lr,
        steps=steps,
        init="small",
        init_scale=point["init_scale"],
        record_every=every,
        objective="marginal",
    )
    step = np.asarray(sw.history["step"], float)[0, 0]
    flow = method in FLOW_METHODS
    t = step * lr if flow else step
    m = np.abs(np.asarray(sw.history["m"], float)[:, 0])
    return run_record(P_star, what, P, m_half, t, m, "lr x steps" if flow else "steps", sw.failures, clock)


def seed_start(task, attention: str, seed: int, P_max: int, init_scale: float):
    """(sequences, L0, V0) of seed ``seed`` exactly as :func:`bayesattn.train_sweep` with key(0) draws them: k =
    fold_in(key(0), seed), (data, run) = split(k), the run key split off the test key, then (init, noise); the
    run at P uses the first P sequences. So a flow and the gradient-descent run of one seed start from the same
    point on the same data (a test checks it against train_sweep's recorded start)."""
    import jax

    from ...models.networks import SingleLayer, SingleLayerConfig

    data_key, run_key = jax.random.split(jax.random.fold_in(jax.random.key(0), seed))
    run_key = jax.random.split(run_key)[1]
    init_key = jax.random.split(run_key)[0]
    net = SingleLayer(SingleLayerConfig.for_task(task, attention, init_scale=init_scale), init_key)
    return task.sample(data_key, P_max), net.L, net.V


def flow_point(point: dict) -> dict:
    """Gradient flow (diffrax) of one seed at every P of its case, on the marginal objective ("flow") or the joint
    one ("flow_joint"), saved at ``records`` times up to gd_lr x gd_steps; t_plateau by the same rule."""
    from ...bayes.posterior import Posterior
    from ...dynamics.flow import gradient_flow
    from ...tasks import Dataset

    task, prior, attention, P_star, what, P, m_half = case_runs(point)
    clock = time.perf_counter(), time.process_time()
    seqs, L0, V0 = seed_start(task, attention, point["seed"], max(P), point["init_scale"])
    ts = np.linspace(0.0, point["lr"] * point["steps"], point["records"] + 1)
    objective = "joint" if point["method"] == "flow_joint" else "marginal"
    flows = [
        gradient_flow(
            Posterior(Dataset(seqs.X[:p], seqs.Y[:p], task), attention, prior), L0, ts, V0=V0, objective=objective
        )
        for p in P
    ]
    m = np.abs(np.asarray([f["m"] for f in flows]))
    ok = all(f["ok"] for f in flows)
    failures = [] if ok else ["the flow's solver stopped before the end (max_steps)"]
    return run_record(
        P_star, what, P, m_half, ts, m, "flow time", failures, clock, solver_steps=[f["num_steps"] for f in flows]
    )


def compute_point(point: dict, progress: bool = False) -> dict:
    if point["kind"] == "theory":
        return theory_point(point)
    if point["method"] in DIFFRAX_METHODS:
        return flow_point(point)
    return run_point(point, progress)
