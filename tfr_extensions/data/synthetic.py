"""The embedded default dataset.

:func:`synthetic` draws a deterministic LETOR-like dataset: per-query feature
shifts and scales (so query-level normalization matters), a learnable but noisy
relevance signal (linear part plus one interaction), graded labels 0..4 with the
label skew of MSLR-WEB30K (about 51% / 33% / 13% / 2% / 1%), and a fraction of
queries without any relevant document (as MQ2008 has).

:func:`tfr_extensions.data.write_libsvm` writes it (or any
:class:`~tfr_extensions.data.LibSVMData`) as a LETOR file.
"""
from typing import Tuple

import numpy as np

from tfr_extensions.data.libsvm_data import LibSVMData
from tfr_extensions.ops.validation import validate_int, validate_number

#: MSLR-WEB30K's label distribution (grades 0..4), the synthetic target skew.
MSLR_LABEL_PROBS = (0.514, 0.325, 0.134, 0.019, 0.008)


def synthetic(
    num_queries: int = 500,
    num_features: int = 24,
    seed: int = 0,
    *,
    list_size: Tuple[int, int] = (5, 50),
    no_relevant_fraction: float = 0.1,
    noise: float = 0.5,
) -> LibSVMData:
    """A deterministic MSLR-like ranking dataset.

    Args:
      num_queries: Q.
      num_features: F (>= 2).
      seed: everything is drawn from ``np.random.default_rng(seed)``.
      list_size: ``(min, max)`` documents per query, drawn uniformly.
      no_relevant_fraction: share of queries whose labels are all 0.
      noise: standard deviation of the label noise (signal has std about 1).

    Returns:
      :class:`LibSVMData` with qids ``1..Q``.

    >>> data = synthetic(num_queries=20, num_features=5, seed=1)
    >>> data.features.shape[1], data.num_queries, int(data.labels.max()) <= 4
    (5, 20, True)
    """
    num_queries = validate_int(num_queries, "num_queries", minimum=1)
    num_features = validate_int(num_features, "num_features", minimum=2)
    low, high = (int(v) for v in list_size)
    if not 1 <= low <= high:
        raise ValueError(f"`list_size` must be (min, max) with 1 <= min <= max; got {list_size!r}.")
    validate_number(no_relevant_fraction, "no_relevant_fraction", minimum=0.0, maximum=1.0)
    noise = validate_number(noise, "noise", minimum=0.0)
    rng = np.random.default_rng(seed)
    sizes = rng.integers(low, high + 1, size=num_queries)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    query_of_doc = np.repeat(np.arange(num_queries), sizes)
    latent = rng.standard_normal((offsets[-1], num_features))
    weights = rng.standard_normal(num_features) * (rng.random(num_features) < 0.6)
    weights[0] = 1.0  # at least one informative feature
    signal = latent @ weights / np.sqrt(max(np.sum(weights**2), 1e-12))
    signal += 0.5 * latent[:, 0] * latent[:, 1]
    signal += noise * rng.standard_normal(signal.shape)
    thresholds = np.quantile(signal, np.cumsum(MSLR_LABEL_PROBS)[:-1])
    labels = np.digitize(signal, thresholds).astype(np.float32)
    no_relevant = rng.random(num_queries) < no_relevant_fraction
    labels[no_relevant[query_of_doc]] = 0.0
    # Raw features: per-query shift and scale, a few count-like integer features.
    shift = rng.normal(0.0, 2.0, (num_queries, num_features))
    scale = np.exp(rng.normal(0.0, 0.5, (num_queries, num_features)))
    features = latent * scale[query_of_doc] + shift[query_of_doc]
    counts = np.arange(num_features) % 4 == 3
    features[:, counts] = np.round(np.exp(features[:, counts] / 2.0))
    return LibSVMData(features.astype(np.float32), labels,
                      np.arange(1, num_queries + 1, dtype=np.int64)[query_of_doc], offsets)
