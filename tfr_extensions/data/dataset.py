"""``tf.data`` ranking datasets from contiguous LETOR arrays.

Elements are ``({"features": float32 [B, L, F], "mask": bool [B, L]}, labels
float32 [B, L])``; padded documents have label ``-1`` (TF-Ranking's padding),
mask False and features 0. ``L`` is the longest list of the batch, or exactly
``list_size``.

The dataset is built over *query indices* (``from_tensor_slices`` over Q
integers); each element slices its rows out of the one features tensor with the
query offsets, so it scales to millions of documents and lists of thousands
without Python per document. Lists longer than ``list_size`` are shuffled, then
truncated (as TF-Ranking's ELWC reader does with ``shuffle_examples``), with
stateless randomness derived from ``seed``.
"""
from typing import Optional

import numpy as np
import tensorflow as tf

from tfr_extensions.data.libsvm import LibSVMData
from tfr_extensions.data.normalization import query_zscore

NORMALIZATIONS = ("query_zscore", "none")
PADDING_LABEL = -1.0  # TF-Ranking's label for padded documents


def _check_int(value, arg: str, minimum: int, allow_none: bool = False) -> Optional[int]:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        kind = f"None or an int >= {minimum}" if allow_none else f"an int >= {minimum}"
        raise ValueError(f"`{arg}` must be {kind}; got {value!r}.")
    return int(value)


def select_queries(data: LibSVMData, drop_no_relevant: bool = False,
                   min_list_size: int = 1) -> np.ndarray:
    """int64 indices of the queries kept by the dropping options.

    >>> data = LibSVMData(np.zeros((5, 1), np.float32), np.array([0, 0, 1, 0, 2], np.float32),
    ...                   np.array([1, 1, 2, 2, 3]), np.array([0, 2, 4, 5]))
    >>> select_queries(data, drop_no_relevant=True).tolist()
    [1, 2]
    >>> select_queries(data, min_list_size=2).tolist()
    [0, 1]
    """
    min_list_size = _check_int(min_list_size, "min_list_size", 1)
    offsets = np.asarray(data.query_offsets)
    keep = np.diff(offsets) >= min_list_size
    if drop_no_relevant:
        relevant = np.asarray(data.labels) > 0
        # Count of relevant documents per query from the cumulative sum at the offsets.
        cumulative = np.concatenate([[0], np.cumsum(relevant)])
        keep &= cumulative[offsets[1:]] > cumulative[offsets[:-1]]
    return np.flatnonzero(keep).astype(np.int64)


def ranking_dataset(
    data: LibSVMData,
    list_size: Optional[int] = None,
    batch_size: int = 32,
    shuffle: bool = True,
    normalization: str = "query_zscore",
    drop_no_relevant: bool = False,
    min_list_size: int = 1,
    seed: int = 0,
    prefetch: bool = True,
    *,
    drop_remainder: bool = False,
) -> tf.data.Dataset:
    """Batches of padded lists for Keras ranking models.

    Args:
      data: a :class:`LibSVMData` (from ``read_libsvm`` or ``synthetic``).
      list_size: None pads to the batch's longest list; an int pads or
        truncates every list to exactly this many documents (lists longer than
        it are shuffled first, seeded).
      batch_size: lists per batch.
      shuffle: shuffle the queries (seeded, a new order every epoch). Use False
        for evaluation.
      normalization: ``"query_zscore"`` (:func:`query_zscore` over each list's
        valid documents, the seeds' protocol) or ``"none"`` (raw features; the
        models normalize inside, so exported models take raw features).
      drop_no_relevant: drop queries without a document of label > 0
        (training only: evaluation must keep them).
      min_list_size: drop queries with fewer documents than this.
      seed: the seed of query shuffling and of the shuffle before truncation.
      prefetch: ``prefetch(tf.data.AUTOTUNE)`` at the end.
      drop_remainder: drop the last, smaller batch.

    Returns:
      A ``tf.data.Dataset`` of ``({"features": [B, L, F], "mask": [B, L]}, labels)``.

    >>> from tfr_extensions.data.synthetic import synthetic
    >>> batch = next(iter(ranking_dataset(synthetic(num_queries=8, num_features=3),
    ...                                   list_size=10, batch_size=4)))
    >>> batch[0]["features"].shape.as_list(), batch[1].shape.as_list()
    ([4, 10, 3], [4, 10])
    """
    list_size = _check_int(list_size, "list_size", 1, allow_none=True)
    batch_size = _check_int(batch_size, "batch_size", 1)
    seed = _check_int(seed, "seed", 0)
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"`normalization` must be one of {list(NORMALIZATIONS)}; "
                         f"got {normalization!r}.")
    queries = select_queries(data, drop_no_relevant, min_list_size)
    num_features = data.features.shape[1]
    features = tf.convert_to_tensor(np.asarray(data.features, np.float32))
    labels = tf.convert_to_tensor(np.asarray(data.labels, np.float32))
    offsets = tf.convert_to_tensor(np.asarray(data.query_offsets, np.int64))

    def take_list(query, doc_seed):
        start, end = offsets[query], offsets[query + 1]
        list_features, list_labels = features[start:end], labels[start:end]
        if list_size is not None:
            # Shuffle, then truncate: a random subset when the list is too long.
            keys = tf.random.stateless_uniform(tf.shape(list_labels), seed=doc_seed)
            order = tf.argsort(keys, stable=True)[:list_size]
            list_features = tf.gather(list_features, order)
            list_labels = tf.gather(list_labels, order)
        mask = tf.ones(tf.shape(list_labels), tf.bool)
        return list_features, mask, list_labels

    dataset = tf.data.Dataset.from_tensor_slices(queries)
    if shuffle and queries.size:
        dataset = dataset.shuffle(queries.size, seed=seed, reshuffle_each_iteration=True)
    # One stateless seed per element; new ones every epoch when shuffling.
    doc_seeds = tf.data.Dataset.random(seed=seed + 1, rerandomize_each_iteration=shuffle)
    doc_seeds = doc_seeds.batch(2, drop_remainder=True)
    dataset = tf.data.Dataset.zip((dataset, doc_seeds))
    dataset = dataset.map(take_list, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    dataset = dataset.padded_batch(
        batch_size,
        padded_shapes=([list_size, num_features], [list_size], [list_size]),
        padding_values=(0.0, False, PADDING_LABEL),
        drop_remainder=drop_remainder)

    def to_inputs(batch_features, mask, batch_labels):
        if normalization == "query_zscore":
            batch_features = query_zscore(batch_features, mask)
        return {"features": batch_features, "mask": mask}, batch_labels

    dataset = dataset.map(to_inputs, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if prefetch:
        dataset = dataset.prefetch(tf.data.AUTOTUNE)
    return dataset
