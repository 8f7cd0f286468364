"""Models: attention maps (softmax, linear, H heads, masks) and the trainable networks (Equinox modules that
return their attention tensors: ``y, attn = net(x)``, attn: (layers, heads, T, T))."""

from .attention import (
    ATTENTION_KINDS,
    ATTENTIONS,
    ORDER_PARAMETER,
    AttentionKind,
    AttentionModel,
    attention_kind,
    attention_weights,
    hot_logits,
    linear_attention,
    softmax_attention,
)
from .networks import (
    NETWORKS,
    MultiHeadAttention,
    MultiHeadConfig,
    NetworkConfig,
    SingleLayer,
    SingleLayerConfig,
    network_config,
    network_from_config,
    register_network,
)
from .transformer import CausalMixer, MixerConfig, Transformer, TransformerConfig

__all__ = [
    "ATTENTIONS",
    "ATTENTION_KINDS",
    "ORDER_PARAMETER",
    "AttentionKind",
    "AttentionModel",
    "attention_kind",
    "attention_weights",
    "hot_logits",
    "linear_attention",
    "softmax_attention",
    "NETWORKS",
    "NetworkConfig",
    "network_config",
    "network_from_config",
    "register_network",
    "SingleLayer",
    "SingleLayerConfig",
    "MultiHeadAttention",
    "MultiHeadConfig",
    "Transformer",
    "TransformerConfig",
    "CausalMixer",
    "MixerConfig",
]
