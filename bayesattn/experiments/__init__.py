"""Experiments: one module per published system, each with its config, what one grid point computes and
its summary. The only layer that knows several methods at once."""

from .copy_head import (
    ADAM,
    DATA,
    MCMC,
    METHODS,
    RunConfig,
    build_points,
    data_record,
    describe,
    point_data,
    point_keys,
    run_phase_diagram,
    summarize,
)

__all__ = [
    "ADAM",
    "DATA",
    "MCMC",
    "METHODS",
    "RunConfig",
    "build_points",
    "data_record",
    "describe",
    "point_data",
    "point_keys",
    "run_phase_diagram",
    "summarize",
]
