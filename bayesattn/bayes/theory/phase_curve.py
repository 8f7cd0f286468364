"""The result of a phase-curve computation: branches, stable branch, posterior means and the transition over a
grid of P, with its JSON form. Its own module, so that every theory that builds one imports it without a circle."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


@dataclass
class PhaseCurve:
    """Branches, stable branch, posterior means and the transition over a grid of P.

    free energies are T_q * Phi in nats (differences are log posterior odds between the phases).
    """

    attention: str
    P: np.ndarray
    branches: list = field(default_factory=list)
    stable: dict = field(default_factory=dict)
    mean: dict = field(default_factory=dict)
    transition: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        def conv(x):
            if isinstance(x, np.ndarray):
                return [None if (isinstance(v, float) and not math.isfinite(v)) else v for v in x.tolist()]
            if isinstance(x, dict):
                return {k: conv(v) for k, v in x.items()}
            if isinstance(x, (list, tuple)):
                return [conv(v) for v in x]
            if isinstance(x, (np.floating, float)):
                return None if not math.isfinite(float(x)) else float(x)
            if isinstance(x, np.integer):
                return int(x)
            return x

        return {
            "attention": self.attention,
            "P": conv(self.P),
            "branches": conv(self.branches),
            "stable": conv(self.stable),
            "mean": conv(self.mean),
            "transition": conv(self.transition),
            "config": conv(self.config),
        }

    @classmethod
    def from_dict(cls, d: dict) -> PhaseCurve:
        def arr(v):
            return np.array([np.nan if x is None else x for x in v], dtype=np.float64)

        return cls(
            attention=d["attention"],
            P=arr(d["P"]),
            branches=[{k: arr(v) for k, v in b.items()} for b in d["branches"]],
            stable={k: arr(v) for k, v in d["stable"].items()},
            mean={k: arr(v) for k, v in d["mean"].items()},
            transition=dict(d["transition"]),
            config=dict(d.get("config", {})),
        )
