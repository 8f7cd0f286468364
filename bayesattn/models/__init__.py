"""Models: attention maps (softmax, linear, H heads, masks) and the trainable networks."""

from .attention import (ATTENTIONS, ORDER_PARAMETER, AttentionModel, attention_weights, hot_logits, linear_attention,
                        softmax_attention)

__all__ = ["ATTENTIONS", "ORDER_PARAMETER", "AttentionModel", "hot_logits", "attention_weights", "linear_attention", "softmax_attention"]
