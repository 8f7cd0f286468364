"""Diagnostics: observables and screens as functions of attention tensors, used by the samplers, the training
loop and the experiments alike."""

from .observables import (
    attention_entropy,
    declared,
    evaluate,
    head_overlap,
    order_parameters,
    pattern_capture,
    pattern_mass,
)

__all__ = [
    "attention_entropy",
    "declared",
    "evaluate",
    "head_overlap",
    "order_parameters",
    "pattern_capture",
    "pattern_mass",
]
