"""NumPy oracles of the scorers (:mod:`tfr_extensions.models`), in float64, written from
the definitions and not from the package: the per-query z-score, dense layers, batch
normalization (inference: moving statistics; training: moments over the valid documents
of the batch), the activations and the notations' architectures.

Loops over queries and documents where that reads closer to the definition than
vectorized NumPy would; the inputs are small.
"""
import math
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

#: Keras's BatchNormalization defaults
BATCH_NORM_EPSILON = 1e-3
BATCH_NORM_MOMENTUM = 0.99


def architecture(notation: str, hidden_units: int) -> Tuple[List[int], str, bool]:
    """``(hidden widths, activation, output activated)`` of the notations the tests use
    (the papers: ``R4.L`` = 4 ReLU hidden layers + a linear output; ``CE5``/``GE5`` = 4
    hidden layers + an activated 1-unit output; Bruch et al.'s ``B64`` = ReLU 64, 32, 16
    + a linear output)."""
    table = {"R4.L": ([hidden_units] * 4, "relu", False),
             "CE4.L": ([hidden_units] * 4, "celu", False),
             "R5": ([hidden_units] * 4, "relu", True),
             "CE5": ([hidden_units] * 4, "celu", True),
             "GE5": ([hidden_units] * 4, "gelu", True),
             "B64": ([64, 32, 16], "relu", False)}
    return table[notation]


def query_zscore(features, mask=None) -> np.ndarray:
    """Per list and feature, ``(x - mean) / std`` over the valid documents with finite
    features (population std); a feature constant over them gives 0, padded documents
    0, a valid document with a non-finite feature NaN in every feature."""
    features = np.asarray(features, np.float64)
    batch, list_size, num_features = features.shape
    mask = np.ones((batch, list_size), bool) if mask is None else np.asarray(mask) != 0
    out = np.zeros_like(features)
    for q in range(batch):
        finite = [d for d in range(list_size)
                  if mask[q, d] and np.isfinite(features[q, d]).all()]
        broken = [d for d in range(list_size)
                  if mask[q, d] and not np.isfinite(features[q, d]).all()]
        for f in range(num_features):
            values = features[q, finite, f]
            if len(values) and values.max() > values.min():
                mean = sum(values) / len(values)
                std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
                out[q, finite, f] = (values - mean) / std
        out[q, broken, :] = np.nan
    return out


def relu(x):
    return np.maximum(x, 0.0)


def celu(x):
    """CELU, alpha = 1: x for x > 0, e^x - 1 otherwise."""
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0.0)))


def gelu(x):
    """GELU, exact: x Phi(x) = x / 2 (1 + erf(x / sqrt 2))."""
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


ACTIVATIONS = {"relu": relu, "celu": celu, "gelu": gelu}


def batch_norm(hidden, mask, gamma, beta, moving_mean, moving_variance, training: bool,
               epsilon: float = BATCH_NORM_EPSILON):
    """``(gamma (h - mean) / sqrt(var + eps) + beta, (mean, var))``: the moments of the
    valid documents of the whole batch in training (population variance), the moving
    statistics in inference."""
    if training:
        rows = hidden[np.asarray(mask, bool)]  # [valid documents, units]
        mean = rows.sum(axis=0) / len(rows)
        variance = ((rows - mean) ** 2).sum(axis=0) / len(rows)
    else:
        mean = np.asarray(moving_mean, np.float64)
        variance = np.asarray(moving_variance, np.float64)
    return gamma * (hidden - mean) / np.sqrt(variance + epsilon) + beta, (mean, variance)


def scorer_scores(features, mask, hidden_layers: Sequence[Dict], output_layer: Tuple,
                  activation: str, output_activation: bool, training: bool,
                  normalization: bool = True):
    """Scores ``[B, L]`` of a scorer and the batch moments of each batch normalization.

    Args:
      features: ``[B, L, F]``; mask: bool ``[B, L]`` (None = all valid).
      hidden_layers: per hidden layer ``{"kernel": [in, out], "bias": [out]}`` and, with
        batch normalization, ``"batch_norm": (gamma, beta, moving_mean, moving_variance)``.
      output_layer: ``(kernel [in, 1], bias [1])``.
      activation: ``"relu"``, ``"celu"`` or ``"gelu"``; output_activation: whether the
        1-unit output goes through it too.
      training: batch normalization with the batch's moments (else the moving ones).
      normalization: the per-query z-score first.

    Returns:
      ``(scores [B, L], [(mean, variance) per batch normalization])``.
    """
    features = np.asarray(features, np.float64)
    mask = (np.ones(features.shape[:2], bool) if mask is None else np.asarray(mask) != 0)
    act = ACTIVATIONS[activation]
    hidden = query_zscore(features, mask) if normalization else features
    moments: List[Optional[Tuple]] = []
    for layer in hidden_layers:
        hidden = hidden @ np.asarray(layer["kernel"], np.float64) + np.asarray(layer["bias"],
                                                                               np.float64)
        if "batch_norm" in layer:
            gamma, beta, moving_mean, moving_variance = (np.asarray(v, np.float64)
                                                         for v in layer["batch_norm"])
            hidden, stats = batch_norm(hidden, mask, gamma, beta, moving_mean, moving_variance,
                                       training)
            moments.append(stats)
        hidden = act(hidden)
    kernel, bias = (np.asarray(v, np.float64) for v in output_layer)
    scores = (hidden @ kernel + bias)[..., 0]
    if output_activation:
        scores = act(scores)
    return scores, moments
