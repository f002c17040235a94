"""``tf.data`` ranking datasets from contiguous LETOR arrays.

Elements are ``({"features": float32 [B, L, F], "mask": bool [B, L]}, labels
float32 [B, L])``; padded documents have label ``-1`` (TF-Ranking's padding),
mask False and features 0. ``L`` is the longest list of the batch, or exactly
``list_size``.

How a batch is made (no Python and no ``map`` per query or per document):

1. once, when the dataset is built, the features are laid out as a *table*
   ``[N + 1, F]``: z-scored per query (:func:`query_zscore_rows`, vectorized
   over blocks of queries) or copied raw, plus one last all-zero row that
   every padded position points at (labels get a ``-1`` row);
2. the dataset runs over *query positions*; they are shuffled and batched
   first, then one small function turns a batch of ``B`` positions into its
   ``[B, L]`` row indices (a random order within each list when ``list_size``
   truncates) and gathers ``[B, L, F]`` features and ``[B, L]`` labels from
   the tables, one ``tf.gather`` each.

So a batch costs one gather, whatever the normalization, and it scales to
millions of documents and lists of thousands. Lists longer than ``list_size``
are shuffled, then truncated (as TF-Ranking's ELWC reader does with
``shuffle_examples``), with stateless randomness derived from ``seed``. The
z-score is the query's: over all its documents (the papers' "z-score at a
query level"), also when ``list_size`` keeps only some of them.
"""
from typing import Optional, Tuple

import numpy as np
import tensorflow as tf

from tfr_extensions.data.dense import (NORMALIZATIONS, check_finite, check_options,  # noqa: F401
                                       feature_table, query_zscore_rows, select_queries)
from tfr_extensions.data.libsvm_data import LibSVMData
from tfr_extensions.ops.lists import PADDING_LABEL, RNG_ALG


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
    feature_key: str = "features",
    mask_feature_name: str = "mask",
    repeat: bool = False,
) -> tf.data.Dataset:
    """Batches of padded lists for Keras ranking models.

    Args:
      data: a :class:`LibSVMData` (from ``read_libsvm`` or ``synthetic``).
      list_size: None pads to the batch's longest list; an int pads or
        truncates every list to exactly this many documents (the documents of
        each list are shuffled first, seeded, so a long list gives a random
        subset).
      batch_size: lists per batch.
      shuffle: shuffle the queries (seeded, a new order every epoch). Use False
        for evaluation.
      normalization: ``"query_zscore"`` (:func:`query_zscore_rows` over all
        documents of each query, the papers' protocol) or ``"none"`` (raw features; the
        models normalize inside, so exported models take raw features).
      drop_no_relevant: drop queries without a document of label > 0
        (training only: evaluation must keep them).
      min_list_size: drop queries with fewer documents than this.
      seed: the seed of query shuffling and of the shuffle before truncation.
      prefetch: ``prefetch(tf.data.AUTOTUNE)`` at the end.
      drop_remainder: drop the last, smaller batch.
      feature_key, mask_feature_name: the keys of the features and the mask in
        the input dict (TF-Ranking pipelines name the mask ``"list_mask"``).
      repeat: an endless stream of epochs (each ends with its smaller last batch,
        as ``.repeat()`` gives), that every iterator of the dataset yields alike:
        epoch ``k`` is shuffled with the stateless seed ``(seed, k)``, and the
        per-batch seeds run on across epochs. ``.repeat()`` of a shuffled dataset
        reshuffles from a seed generator that all its iterators share, so a
        second iterator open at once (the one Keras 3's ``fit`` opens to build
        the model under a distribution strategy, which prefetches) races the
        training one for the seeds, and the order of a seeded run changes from
        one run to the next. Use it for training streams.

    Returns:
      A ``tf.data.Dataset`` of ``({"features": [B, L, F], "mask": [B, L]}, labels)``.

    Raises:
      ValueError: for a bad option, when no query is left to serve, or when a
        feature or label is NaN or infinite (naming the first such document).

    >>> from tfr_extensions.data.synthetic import synthetic
    >>> batch = next(iter(ranking_dataset(synthetic(num_queries=8, num_features=3),
    ...                                   list_size=10, batch_size=4)))
    >>> batch[0]["features"].shape.as_list(), batch[1].shape.as_list()
    ([4, 10, 3], [4, 10])
    """
    list_size, batch_size, seed = check_options(list_size, batch_size, seed, normalization)
    if feature_key == mask_feature_name:
        raise ValueError(f"`feature_key` and `mask_feature_name` must differ; both are "
                         f"{feature_key!r}.")
    queries = select_queries(data, drop_no_relevant, min_list_size)
    if queries.size == 0:
        raise ValueError(
            f"No query to serve: {data.num_queries} queries, none left after "
            f"`drop_no_relevant={drop_no_relevant}` and `min_list_size={min_list_size}`.")
    offsets = np.asarray(data.query_offsets, np.int64)
    num_documents = data.num_documents
    # Row indices are int32 where they fit (faster gathers), int64 beyond.
    index_dtype = np.int32 if num_documents < 2**31 - 1 else np.int64
    # [Q', 2]: first row and length of each served query, one gather per batch.
    spans = tf.constant(np.stack([offsets[queries], offsets[queries + 1] - offsets[queries]],
                                 axis=1).astype(index_dtype))
    check_finite(data)
    table = tf.convert_to_tensor(feature_table(data, normalization))
    label_table = tf.convert_to_tensor(
        np.append(np.asarray(data.labels, np.float32), np.float32(PADDING_LABEL)))
    padding_row = tf.constant(num_documents, index_dtype)

    def make_batch(positions, batch_seed):
        """``[B]`` query positions -> one padded batch."""
        span = tf.gather(spans, positions)
        start, length = span[:, :1], span[:, 1:]  # [B, 1] each; lengths >= 1
        longest = tf.reduce_max(length)
        column = tf.range(longest, dtype=length.dtype)[None, :]  # [1, W]
        if list_size is None:
            valid = column < length  # [B, W]
            offset = column
        else:
            # A random order within each list (padding sorts last); the first
            # list_size positions are kept.
            keys = tf.random.stateless_uniform(
                tf.stack([tf.size(positions), tf.cast(longest, tf.int32)]), seed=batch_seed)
            keys = tf.where(column < length, keys, 2.0)
            order = tf.cast(tf.argsort(keys, axis=1, stable=True)[:, :list_size], length.dtype)
            order = tf.pad(order, [[0, 0], [0, list_size - tf.shape(order)[1]]])
            offset = tf.ensure_shape(order, [None, list_size])
            valid = tf.range(list_size, dtype=length.dtype)[None, :] < length
        rows = tf.where(valid, start + offset, padding_row)  # [B, L]
        return ({feature_key: tf.gather(table, rows), mask_feature_name: valid},
                tf.gather(label_table, rows))

    if repeat and drop_remainder and queries.size < batch_size:
        raise ValueError(f"`repeat` with `drop_remainder` needs at least `batch_size` "
                         f"({batch_size}) queries per epoch; {queries.size} are served.")
    if repeat:
        dataset = _epochs_of_positions(queries.size, batch_size, shuffle, seed, drop_remainder)
    else:
        dataset = tf.data.Dataset.range(queries.size)
        if shuffle and queries.size:
            dataset = dataset.shuffle(queries.size, seed=seed, reshuffle_each_iteration=True)
        dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    # One stateless seed per batch; new ones every epoch when shuffling (one
    # endless sequence with ``repeat``).
    batch_seeds = tf.data.Dataset.random(seed=seed + 1,
                                         rerandomize_each_iteration=shuffle and not repeat)
    batch_seeds = batch_seeds.batch(2, drop_remainder=True)
    dataset = tf.data.Dataset.zip((dataset, batch_seeds))
    dataset = dataset.map(make_batch, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if prefetch:
        dataset = dataset.prefetch(tf.data.AUTOTUNE)
    return dataset



def _epochs_of_positions(num_queries: int, batch_size: int, shuffle: bool, seed: int,
                         drop_remainder: bool) -> tf.data.Dataset:
    """Endless batches of query positions ``int64 [B]``, epoch after epoch; epoch ``k``
    in the order of ``stateless_shuffle`` with seed ``(seed, k)`` (or in order).
    Stateless, so every iterator yields the same stream."""
    def epoch(index):
        positions = tf.range(num_queries, dtype=tf.int64)
        if shuffle:
            positions = tf.random.experimental.stateless_shuffle(
                positions, seed=tf.stack([tf.constant(seed, tf.int64), index]), alg=RNG_ALG)
        return tf.data.Dataset.from_tensor_slices(positions).batch(
            batch_size, drop_remainder=drop_remainder)
    return tf.data.Dataset.counter().flat_map(epoch)


def numeric_masks(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """``dataset`` with every bool tensor of its elements cast to int8 (1 = True).

    For Keras 3's ``fit`` under a strategy of several replicas (``MirroredStrategy``,
    ``MultiWorkerMirroredStrategy``): before the first step it averages a batch
    across the replicas to build the model, and bool tensors (the ``"mask"`` of
    :func:`ranking_dataset`) cannot be averaged (``AddN`` has no bool kernel).
    The scorers of :mod:`tfr_extensions.models` and IRGAN read any non-zero mask
    as True, so they train on the result unchanged; Keras 2 needs none of this.

    >>> ds = tf.data.Dataset.from_tensors(({"mask": tf.constant([True, False])}, 1.0))
    >>> next(iter(numeric_masks(ds)))[0]["mask"].numpy().tolist()
    [1, 0]
    """
    def cast(*element):  # a tuple element arrives as several arguments
        element = tf.nest.map_structure(
            lambda t: tf.cast(t, tf.int8) if t.dtype == tf.bool else t, element)
        return element if len(element) > 1 else element[0]
    return dataset.map(cast, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
