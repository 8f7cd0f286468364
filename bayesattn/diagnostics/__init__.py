"""Diagnostics: observables and screens as functions of attention tensors, used by the samplers, the training
loop and the experiments alike."""

from .observables import order_parameters

__all__ = ["order_parameters"]
