"""Models: attention maps (softmax, linear, H heads, masks) and the trainable networks."""

from .attention import ATTENTIONS, ORDER_PARAMETER, attention_weights, linear_attention, softmax_attention

__all__ = ["ATTENTIONS", "ORDER_PARAMETER", "attention_weights", "linear_attention", "softmax_attention"]
