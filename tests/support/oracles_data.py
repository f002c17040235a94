"""NumPy oracles for the data layer: per-list z-score and padding."""
import numpy as np


def zscore_list(features: np.ndarray) -> np.ndarray:
    """scikit-learn StandardScaler over one list's documents [n, F] (ddof=0,
    constant features -> 0), written independently of the TF code."""
    features = np.asarray(features, np.float64)
    if features.shape[0] == 0:
        return features
    mean = features.mean(axis=0)
    std = features.std(axis=0)
    constant = features.max(axis=0) == features.min(axis=0)
    out = (features - mean) / np.where(constant, 1.0, std)
    out[:, constant] = 0.0
    return out


def pad_lists(lists, length, fill):
    """Stacks arrays [n_i, ...] into [len(lists), length, ...] padded with ``fill``."""
    first = np.asarray(lists[0])
    out = np.full((len(lists), length) + first.shape[1:], fill, first.dtype)
    for i, values in enumerate(lists):
        out[i, : len(values)] = values
    return out
