"""A NumPy oracle of the context-aware scorer ``SA<n>`` (:mod:`tfr_extensions.models`),
in float64, written from the definitions (Vaswani et al.'s encoder with allRank's
pre-norm residuals) and not from the package: one list at a time, over its valid
documents only, so padding cannot enter by construction.

Inference only (no dropout; batch normalization with its moving statistics). The
weights are read from the Keras layers by name as arrays: ``weights_of(model)``.
"""
import math
from typing import Dict, List

import numpy as np

from support.oracles_models import BATCH_NORM_EPSILON, query_zscore

#: allRank's LayerNorm epsilon (the package's attention.LAYER_NORM_EPSILON)
LAYER_NORM_EPSILON = 1e-6


def layer_norm(x, gamma, beta):
    """Per row: ``gamma * (x - mean) / sqrt(var + eps) + beta`` (population variance)."""
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return gamma * (x - mean) / np.sqrt(var + LAYER_NORM_EPSILON) + beta


def multi_head_attention(x, w: Dict[str, np.ndarray]):
    """Self-attention of the rows of ``x`` ``[n, d]`` over each other: per head h,
    ``softmax(Q_h K_h^T / sqrt(k)) V_h``, concatenated and projected back to ``d``.
    ``w``: ``query/key/value_kernel [d, H, k]``, ``..._bias [H, k]``,
    ``output_kernel [H, k, d]``, ``output_bias [d]``."""
    heads, key_dim = w["query_bias"].shape
    out = np.zeros_like(x) + w["output_bias"]
    for h in range(heads):
        q = x @ w["query_kernel"][:, h] + w["query_bias"][h]
        k = x @ w["key_kernel"][:, h] + w["key_bias"][h]
        v = x @ w["value_kernel"][:, h] + w["value_bias"][h]
        logits = q @ k.T / math.sqrt(key_dim)
        weights = np.exp(logits - logits.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        out += (weights @ v) @ w["output_kernel"][h]
    return out


def encoder_block(x, w: Dict[str, np.ndarray]):
    """``x + MHA(LN(x))``, then ``+ W2 relu(W1 LN(x) + b1) + b2``."""
    x = x + multi_head_attention(layer_norm(x, w["attention_gamma"], w["attention_beta"]), w)
    normed = layer_norm(x, w["feed_forward_gamma"], w["feed_forward_beta"])
    hidden = np.maximum(normed @ w["hidden_kernel"] + w["hidden_bias"], 0.0)
    return x + hidden @ w["output_dense_kernel"] + w["output_dense_bias"]


def scores(features, mask, weights: Dict) -> np.ndarray:
    """``[B, L]`` scores of the valid documents (NaN at padding): z-score, projection,
    batch normalization (moving statistics, when present), the blocks, the final layer
    norm and the linear output, each list alone."""
    features = query_zscore(features, mask)
    out = np.full(mask.shape, np.nan)
    for q in range(features.shape[0]):
        x = features[q, mask[q]] @ weights["projection_kernel"] + weights["projection_bias"]
        if "batch_norm" in weights:
            gamma, beta, mean, var = weights["batch_norm"]
            x = gamma * (x - mean) / np.sqrt(var + BATCH_NORM_EPSILON) + beta
        for block in weights["blocks"]:
            x = encoder_block(x, block)
        x = layer_norm(x, *weights["final_norm"])
        out[q, mask[q]] = (x @ weights["score_kernel"] + weights["score_bias"])[:, 0]
    return out


def weights_of(model, to_numpy) -> Dict:
    """The oracle's weights from a built ``SA<n>`` scorer (``to_numpy``: the backend's
    array conversion)."""
    def arrays(layer) -> List[np.ndarray]:
        return [np.asarray(to_numpy(v), np.float64) for v in layer.weights]

    projection = arrays(model.dense_layers[0])
    weights = {"projection_kernel": projection[0], "projection_bias": projection[1],
               "final_norm": arrays(model.encoder_norm), "blocks": []}
    if model.norm_layers:
        weights["batch_norm"] = arrays(model.norm_layers[0])
    score = arrays(model.output_layer)
    weights["score_kernel"], weights["score_bias"] = score
    for block in model.encoder_blocks:
        attention = block.attention
        named = {}
        for part, layer in (("query", attention._query_dense), ("key", attention._key_dense),
                            ("value", attention._value_dense),
                            ("output", attention._output_dense)):
            named[f"{part}_kernel"], named[f"{part}_bias"] = arrays(layer)
        named["attention_gamma"], named["attention_beta"] = arrays(block.attention_norm)
        named["feed_forward_gamma"], named["feed_forward_beta"] = arrays(block.feed_forward_norm)
        named["hidden_kernel"], named["hidden_bias"] = arrays(block.feed_forward_hidden)
        named["output_dense_kernel"], named["output_dense_bias"] = arrays(
            block.feed_forward_output)
        weights["blocks"].append(named)
    return weights
