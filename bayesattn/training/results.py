"""Training results (:class:`TrainResult`, :class:`SweepResult`) and when an order parameter emerges."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._json import to_plain
from .._validate import check_int, check_positive, check_real_dtype


def _crossing(steps: np.ndarray, frac: np.ndarray, level: float) -> float:
    """First step where frac reaches level, linearly interpolated between records."""
    above = np.flatnonzero(frac >= level)
    if above.size == 0:
        return float("nan")
    i = int(above[0])
    if i == 0:
        return float(steps[0])
    f0, f1 = frac[i - 1], frac[i]
    return float(steps[i - 1] + (level - f0) / (f1 - f0) * (steps[i] - steps[i - 1]))


def emergence(history: dict, key: str = "m", min_rise: float = 0.05) -> dict:
    """When the order parameter ``key`` rises: step where it crosses half-way between its initial and final
    values, and the sharpness = steps from 10% to 90% of the rise (linear interpolation between records).

    Returns {"emerged", "step", "sharpness", "step_10", "step_90", "initial", "final", "rise"}; "emerged" is
    False (and the steps NaN) when |final - initial| < min_rise (a positive number). ValueError for a history with a
    NaN or inf step or ``key`` value (no rise can be read from it; the training loops record finite values only)
    or with steps that do not increase.
    """
    min_rise = check_positive("min_rise", min_rise)
    if not isinstance(key, str):
        raise ValueError(f"key={key!r}: expected the name of a record, e.g. 'm'")
    if not isinstance(history, dict) or "step" not in history or key not in history:
        known = sorted(history) if isinstance(history, dict) else type(history).__name__
        raise ValueError(f"key={key!r}: expected a record of the history (it has {known}), with its 'step'")
    steps = np.asarray(check_real_dtype("history['step']", history["step"]), dtype=float)
    x = np.asarray(check_real_dtype(f"history[{key!r}]", history[key]), dtype=float)
    if steps.ndim != 1 or x.shape != steps.shape or steps.size < 2:
        raise ValueError(f"history: expected 1-D 'step' and '{key}' of equal length >= 2, got {steps.shape}, {x.shape}")
    for name, v in (("step", steps), (key, x)):
        if not np.all(np.isfinite(v)):
            bad = int(v.size - np.count_nonzero(np.isfinite(v)))
            raise ValueError(f"history[{name!r}] contains {bad} NaN or inf value(s): expected finite numbers")
    if np.any(np.diff(steps) <= 0):
        raise ValueError("history['step']: expected increasing steps (the records in the order they were taken)")
    x0, x1 = float(x[0]), float(x[-1])
    rise = x1 - x0
    out = {"initial": x0, "final": x1, "rise": rise, "emerged": bool(abs(rise) >= min_rise)}
    if not out["emerged"]:
        return {
            **out,
            "step": float("nan"),
            "sharpness": float("nan"),
            "step_10": float("nan"),
            "step_90": float("nan"),
        }
    frac = (x - x0) / rise
    s10, s50, s90 = (_crossing(steps, frac, lv) for lv in (0.1, 0.5, 0.9))
    return {**out, "step": s50, "sharpness": s90 - s10, "step_10": s10, "step_90": s90}


def _thin_L(L: np.ndarray, max_records: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices and L matrices of at most max_records evenly spaced records (first and last kept)."""
    idx = np.unique(np.linspace(0, L.shape[0] - 1, min(max_records, L.shape[0])).round().astype(int))
    return idx, L[idx]


def _sweep_index(sweep, i_P, i_seed) -> tuple[int, int]:
    """(i_P, i_seed) checked against a sweep's grid: a negative index would pick a run from the end silently."""
    return (
        check_int("i_P", i_P, minimum=0, maximum=len(sweep.P_values) - 1),
        check_int("i_seed", i_seed, minimum=0, maximum=len(sweep.seeds) - 1),
    )


@dataclass
class TrainResult:
    """One training run.

    history: numpy arrays over the recorded steps: "step", "loss" (train squared error per output coordinate),
    "test_loss" (the same on fresh sequences), "objective" (J, with the decay), "m", "q", "u" and "L"
    (records, T, T). final_params: (L (T, T), V (d_out, d)). failure: None or a message naming seed, P, step.
    """

    history: dict
    final_order_parameters: dict
    final_params: tuple
    config: dict
    failure: str | None = None
    failed_at: int | None = None

    def emergence(self, key: str = "m") -> dict:
        return emergence(self.history, key=key)

    def to_dict(self, max_L_records: int = 11) -> dict:
        """JSON-serialisable summary; the L history is thinned to at most ``max_L_records`` records."""
        hist = {k: v for k, v in self.history.items() if k != "L"}
        idx, Ls = _thin_L(self.history["L"], max_L_records)
        hist["L_steps"] = self.history["step"][idx]
        hist["L"] = Ls
        key = "m"
        return to_plain(
            {
                "config": self.config,
                "history": hist,
                "final_order_parameters": self.final_order_parameters,
                "final_L": self.final_params[0],
                "final_V": self.final_params[1],
                "emergence": self.emergence(key),
                "emergence_key": key,
                "failure": self.failure,
                "failed_at": self.failed_at,
            },
            nonfinite="none",
        )


@dataclass
class SweepResult:
    """A grid of runs: axis 0 over ``P_values``, axis 1 over ``seeds``.

    history: numpy arrays (nP, nS, records, ...) with the keys of :class:`TrainResult`; final_order_parameters:
    dict of (nP, nS) arrays; final_L: (nP, nS, T, T); final_V: (nP, nS, d_out, d); failures: list of dicts
    {"seed", "P", "step", "message"} of runs that hit a NaN / divergence and were frozen there.
    """

    P_values: np.ndarray
    seeds: np.ndarray
    history: dict
    final_order_parameters: dict
    final_L: np.ndarray
    final_V: np.ndarray
    failures: list = field(default_factory=list)
    config: dict = field(default_factory=dict)

    def run(self, i_P: int, i_seed: int) -> TrainResult:
        """The (P_values[i_P], seeds[i_seed]) run as a :class:`TrainResult` (indices from 0; no negative ones)."""
        i_P, i_seed = _sweep_index(self, i_P, i_seed)
        P, s = int(self.P_values[i_P]), int(self.seeds[i_seed])
        fail = [f for f in self.failures if f["P"] == P and f["seed"] == s]
        return TrainResult(
            history={k: v[i_P, i_seed] for k, v in self.history.items()},
            final_order_parameters={k: float(v[i_P, i_seed]) for k, v in self.final_order_parameters.items()},
            final_params=(self.final_L[i_P, i_seed], self.final_V[i_P, i_seed]),
            config={**self.config, "P": P, "seed": s},
            failure=fail[0]["message"] if fail else None,
            failed_at=fail[0]["step"] if fail else None,
        )

    def emergence(self, key: str = "m") -> dict:
        """Emergence step and sharpness of every run: dict of (nP, nS) arrays (NaN where none).

        The default is m for both attentions: for a trained (point-estimate) linear attention u is the cosine
        of a matrix that starts near zero, so it jumps to ~1 within the first steps whatever P is, while m
        rises with |L| (the copy weight actually learnt)."""
        if key not in self.history or key in ("step", "L"):
            known = sorted(k for k in self.history if k not in ("step", "L"))
            raise ValueError(f"key={key!r}: expected a recorded order parameter, one of {known}")
        out = {
            "step": np.full(self.final_L.shape[:2], np.nan),
            "sharpness": np.full(self.final_L.shape[:2], np.nan),
            "rise": np.zeros(self.final_L.shape[:2]),
        }
        for i in range(len(self.P_values)):
            for j in range(len(self.seeds)):
                e = emergence({"step": self.history["step"][i, j], key: self.history[key][i, j]}, key=key)
                out["rise"][i, j] = e["rise"]
                if e["emerged"]:
                    out["step"][i, j], out["sharpness"][i, j] = e["step"], e["sharpness"]
        return out

    def to_dict(self, max_L_records: int = 0) -> dict:
        """JSON-serialisable; the L history is omitted unless ``max_L_records`` > 0 (then thinned)."""
        hist = {k: v for k, v in self.history.items() if k != "L"}
        if max_L_records > 0:
            idx, Ls = _thin_L(np.moveaxis(self.history["L"], 2, 0), max_L_records)
            hist["L_steps"] = self.history["step"][0, 0][idx]
            hist["L"] = np.moveaxis(Ls, 0, 2)
        return to_plain(
            {
                "config": self.config,
                "P_values": self.P_values,
                "seeds": self.seeds,
                "history": hist,
                "final_order_parameters": self.final_order_parameters,
                "final_L": self.final_L,
                "emergence": self.emergence(),
                "failures": self.failures,
            },
            nonfinite="none",
        )


def can_sample(task) -> bool:
    """Whether ``task`` draws fresh data (it overrides ``Task._sample``); a task that only describes user data
    cannot, so no test set or online data can be drawn from it."""
    from ..tasks import Task

    return type(task)._sample is not Task._sample


def _json_default(obj):
    import dataclasses

    if dataclasses.is_dataclass(obj):
        return dataclasses.asdict(obj)
    return repr(obj)


@dataclass
class FitResult:
    """One network trained by :func:`bayesattn.training.fitting.fit`.

    history: numpy arrays over the recorded steps ("step", "loss", "test_loss" if any, "objective", the
    declared observables); network: the final Equinox module; config: plain data (network config, task,
    optimizer, mode, test set); failure / failed_at: None, or the divergence message (seed, P, step) and step;
    checkpoints: [(step, network)] at the log-spaced checkpoint steps.
    """

    history: dict
    network: object
    config: dict
    failure: str | None = None
    failed_at: int | None = None
    checkpoints: list = field(default_factory=list)

    @property
    def final(self) -> dict:
        """The last record of every quantity in the history."""
        return {k: float(v[-1]) for k, v in self.history.items() if k != "step"}

    def save(self, directory) -> Path:
        """Write history.npz, result.json, network.eqx (+ header) and checkpoints/step_<n>.eqx into directory.

        Nothing non-finite is written silently: a frozen run's records are finite and its failure is in
        result.json; a non-finite value in the history raises."""
        import json
        from pathlib import Path

        from .checkpoints import save_checkpoint

        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        bad = [k for k, v in self.history.items() if not np.all(np.isfinite(v))]
        if bad:
            raise ValueError(f"history {bad}: non-finite records; refusing to write them to {d}")
        np.savez(d / "history.npz", **self.history)
        save_checkpoint(d / "network.eqx", self.network, step=int(self.history["step"][-1]))
        steps = []
        for step, net in self.checkpoints:
            save_checkpoint(d / "checkpoints" / f"step_{int(step):08d}.eqx", net, step=int(step))
            steps.append(int(step))
        meta = {
            "config": self.config,
            "failure": self.failure,
            "failed_at": self.failed_at,
            "checkpoint_steps": steps,
            "final": self.final,
        }
        (d / "result.json").write_text(json.dumps(to_plain(meta, nonfinite="string"), indent=1, default=_json_default))
        return d

    @classmethod
    def load(cls, directory) -> FitResult:
        """The result :meth:`save` wrote (networks rebuilt from the config in their headers)."""
        import json
        from pathlib import Path

        from .checkpoints import load_checkpoint

        d = Path(directory)
        meta = json.loads((d / "result.json").read_text())
        with np.load(d / "history.npz") as z:
            history = {k: z[k] for k in z.files}
        net = load_checkpoint(d / "network.eqx")
        ckpts = [(s, load_checkpoint(d / "checkpoints" / f"step_{s:08d}.eqx", net)) for s in meta["checkpoint_steps"]]
        return cls(history, net, meta["config"], meta["failure"], meta["failed_at"], ckpts)


@dataclass
class FitSweepResult:
    """A grid of :func:`~bayesattn.training.fitting.fit_sweep` runs: axis 0 over ``P_values``, axis 1 over ``seeds``.

    history: arrays (nP, nS, records); params: the final trainable arrays of every run, leading axes (nP, nS)
    (``run(i, j)`` combines them with a freshly built network); failures: dicts {"seed", "P", "step", "message"}.
    """

    P_values: np.ndarray
    seeds: np.ndarray
    history: dict
    params: object
    failures: list = field(default_factory=list)
    config: dict = field(default_factory=dict)

    def run(self, i_P: int, i_seed: int) -> FitResult:
        """The (P_values[i_P], seeds[i_seed]) run as a :class:`FitResult` (indices from 0; no negative ones)."""
        import equinox as eqx
        import jax

        from ..models.networks import network_from_config

        i_P, i_seed = _sweep_index(self, i_P, i_seed)
        like = network_from_config(self.config["network"], jax.random.key(0))
        static = eqx.partition(like, eqx.is_inexact_array)[1]
        net = eqx.combine(jax.tree.map(lambda a: a[i_P, i_seed], self.params), static)
        P, s = int(self.P_values[i_P]), int(self.seeds[i_seed])
        fail = [f for f in self.failures if f["seed"] == s and f["P"] in (P, None)]
        return FitResult(
            {k: v[i_P, i_seed] for k, v in self.history.items()},
            net,
            {**self.config, "P": P, "seed": s},
            fail[0]["message"] if fail else None,
            fail[0]["step"] if fail else None,
        )
