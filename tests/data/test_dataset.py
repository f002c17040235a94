"""ranking_dataset and query_zscore against NumPy oracles."""
import numpy as np
import pytest
import tensorflow as tf

from support.oracles_data import pad_lists, zscore_list
from tfr_extensions.data import LibSVMData, query_zscore, ranking_dataset, select_queries, synthetic


def _small(num_queries=7, seed=0):
    return synthetic(num_queries=num_queries, num_features=3, seed=seed, list_size=(2, 9))


def _batches(dataset):
    return [(inputs["features"].numpy(), inputs["mask"].numpy(), labels.numpy())
            for inputs, labels in dataset]


def _lists(data, query):
    start, end = data.query_offsets[query], data.query_offsets[query + 1]
    return data.features[start:end], data.labels[start:end]


def test_pads_to_the_longest_list_of_each_batch():
    data = _small()
    batches = _batches(ranking_dataset(data, batch_size=3, shuffle=False, normalization="none"))
    assert [b[0].shape[0] for b in batches] == [3, 3, 1]
    for number, (features, mask, labels) in enumerate(batches):
        queries = range(3 * number, min(3 * number + 3, data.num_queries))
        lists = [_lists(data, q) for q in queries]
        longest = max(len(lab) for _, lab in lists)
        np.testing.assert_array_equal(features, pad_lists([f for f, _ in lists], longest, 0.0))
        np.testing.assert_array_equal(labels, pad_lists([lab for _, lab in lists], longest, -1.0))
        np.testing.assert_array_equal(mask, labels >= 0)
        assert features.dtype == np.float32 and mask.dtype == bool and labels.dtype == np.float32


def test_query_zscore_option_matches_the_numpy_oracle():
    data = _small()
    data.features[:, 1] = np.round(data.features[:, 1])  # some lists get a constant feature
    batches = _batches(ranking_dataset(data, batch_size=4, shuffle=False))
    for number, (features, mask, _) in enumerate(batches):
        for row, query in enumerate(range(4 * number, min(4 * number + 4, data.num_queries))):
            raw, _ = _lists(data, query)
            np.testing.assert_allclose(features[row, : len(raw)], zscore_list(raw), atol=2e-6)
            assert not features[row, len(raw):].any()


def test_fixed_list_size_shuffles_before_truncating_and_pads_short_lists():
    data = synthetic(num_queries=12, num_features=2, seed=5, list_size=(3, 30))
    dataset = ranking_dataset(data, list_size=8, batch_size=12, shuffle=False,
                              normalization="none", seed=3)
    features, mask, labels = _batches(dataset)[0]
    assert features.shape == (12, 8, 2)
    reordered = 0
    for query in range(12):
        raw, raw_labels = _lists(data, query)
        kept = int(mask[query].sum())
        assert kept == min(8, len(raw_labels))
        assert (labels[query, kept:] == -1).all() and not features[query, kept:].any()
        # Every kept document is a distinct document of the query, label attached.
        rows = [int(np.flatnonzero((raw == f).all(axis=1))[0]) for f in features[query, :kept]]
        assert len(set(rows)) == kept
        np.testing.assert_array_equal(labels[query, :kept], raw_labels[rows])
        reordered += rows != sorted(rows)
    assert reordered >= 6  # documents were shuffled, not just the head of each list


def test_seeded_shuffling_is_reproducible_and_reshuffles_each_epoch():
    data = _small(num_queries=20)

    def epochs_labels(seed, epochs=1, list_size=5):
        dataset = ranking_dataset(data, list_size=list_size, batch_size=20, seed=seed,
                                  normalization="none").repeat(epochs)
        return [labels for _, _, labels in _batches(dataset)]

    np.testing.assert_array_equal(epochs_labels(1)[0], epochs_labels(1)[0])
    assert not np.array_equal(epochs_labels(1)[0], epochs_labels(2)[0])
    epoch_one, epoch_two = epochs_labels(1, epochs=2, list_size=None)
    assert not np.array_equal(epoch_one, epoch_two)
    # Same queries each epoch, in another order.
    np.testing.assert_array_equal(np.sort(epoch_one.sum(axis=1)), np.sort(epoch_two.sum(axis=1)))
    repeated_one, repeated_two = epochs_labels(1, epochs=2, list_size=None)
    np.testing.assert_array_equal(repeated_one, epoch_one)
    np.testing.assert_array_equal(repeated_two, epoch_two)


def test_unshuffled_order_is_the_file_order():
    data = _small(num_queries=6)
    labels = _batches(ranking_dataset(data, batch_size=6, shuffle=False))[0][2]
    for query in range(6):
        _, raw_labels = _lists(data, query)
        np.testing.assert_array_equal(labels[query, : len(raw_labels)], raw_labels)


def test_dropping_options_keep_the_expected_queries():
    data = LibSVMData(np.arange(9, dtype=np.float32)[:, None],
                      np.array([0, 0, 1, 0, 2, 0, 0, 0, 3], np.float32),
                      np.array([1, 1, 2, 2, 2, 3, 3, 3, 4]), np.array([0, 2, 5, 8, 9]))
    assert select_queries(data).tolist() == [0, 1, 2, 3]
    assert select_queries(data, drop_no_relevant=True).tolist() == [1, 3]
    assert select_queries(data, min_list_size=3).tolist() == [1, 2]
    assert select_queries(data, True, 2).tolist() == [1]
    dataset = ranking_dataset(data, batch_size=8, shuffle=False, normalization="none",
                              drop_no_relevant=True)
    features, _, labels = _batches(dataset)[0]
    np.testing.assert_array_equal(labels, [[1, 0, 2], [3, -1, -1]])
    np.testing.assert_array_equal(features[:, :, 0], [[2, 3, 4], [8, 0, 0]])
    assert int(dataset.cardinality()) == 1


def test_long_lists_and_many_rows():
    sizes = np.array([1500, 3, 700])
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    rng = np.random.default_rng(0)
    data = LibSVMData(rng.standard_normal((offsets[-1], 4)).astype(np.float32),
                      rng.integers(0, 3, offsets[-1]).astype(np.float32),
                      np.repeat([1, 2, 3], sizes), offsets)
    features, mask, labels = _batches(ranking_dataset(data, batch_size=3, shuffle=False))[0]
    assert features.shape == (3, 1500, 4)
    np.testing.assert_array_equal(mask.sum(axis=1), sizes)
    np.testing.assert_allclose(features[2, :700], zscore_list(data.features[1503:]), atol=2e-5)


def test_argument_errors():
    data = _small()
    with pytest.raises(ValueError, match="`normalization` must be one of"):
        ranking_dataset(data, normalization="minmax")
    with pytest.raises(ValueError, match="`list_size` must be None or an int >= 1; got 0"):
        ranking_dataset(data, list_size=0)
    with pytest.raises(ValueError, match="`batch_size` must be an int >= 1; got 2.5"):
        ranking_dataset(data, batch_size=2.5)
    with pytest.raises(ValueError, match="`min_list_size` must be an int >= 1"):
        ranking_dataset(data, min_list_size=0)


# --------------------------------------------------------------------------- query_zscore


def test_query_zscore_values_constant_features_and_padding():
    rng = np.random.default_rng(1)
    features = rng.normal(3.0, 2.0, (3, 6, 4))
    features[:, :, 2] = 0.1  # constant: rounding noise must not turn it into +-1
    mask = np.array([[1, 1, 1, 1, 0, 0], [1] * 6, [0] * 6], bool)
    out = query_zscore(tf.constant(features), tf.constant(mask)).numpy()
    assert out.dtype == np.float64
    for row in range(3):
        valid = mask[row]
        if valid.any():
            np.testing.assert_allclose(out[row, valid], zscore_list(features[row, valid]),
                                       atol=1e-12)
        assert not out[row, ~valid].any()
    assert not out[:, :, 2].any()


def test_query_zscore_gradient_is_finite_and_zero_on_padding():
    features = tf.constant([[[1.0, 2.0], [3.0, 2.0], [9.0, 9.0]], [[0.0, 0.0]] * 3], tf.float64)
    mask = tf.constant([[True, True, False], [False] * 3])
    with tf.GradientTape() as tape:
        tape.watch(features)
        out = query_zscore(features, mask)
        loss = tf.reduce_sum(out * tf.constant([[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]] * 2,
                                               tf.float64))
    grad = tape.gradient(loss, features).numpy()
    assert np.isfinite(grad).all()
    assert not grad[0, 2].any() and not grad[1].any() and not grad[0, :, 1].any()


def test_query_zscore_half_precision_and_missing_mask():
    features = tf.constant([[[1.0], [3.0]]], tf.float16)
    out = query_zscore(features)
    assert out.dtype == tf.float32
    np.testing.assert_allclose(out.numpy()[0, :, 0], [-1.0, 1.0])
    with pytest.raises(ValueError, match="`features` must have shape"):
        query_zscore(tf.zeros([2, 3]))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_query_zscore_scores_a_non_finite_document_nan_and_leaves_the_list_as_without_it(bad):
    rng = np.random.default_rng(2)
    features = rng.normal(size=(2, 5, 3))
    features[0, 1, 2] = bad
    mask = np.array([[True] * 5, [True, True, True, False, False]])
    mask_bad_padding = mask.copy()
    features[1, 4, 0] = bad  # a padded document's features are ignored, NaN or not
    out = query_zscore(tf.constant(features), tf.constant(mask_bad_padding)).numpy()
    assert np.isnan(out[0, 1]).all()
    np.testing.assert_allclose(out[0, [0, 2, 3, 4]], zscore_list(features[0, [0, 2, 3, 4]]),
                               atol=1e-12)
    np.testing.assert_allclose(out[1, :3], zscore_list(features[1, :3]), atol=1e-12)
    assert not out[1, 3:].any()


def test_non_finite_features_or_labels_are_refused_when_batching():
    data = synthetic(num_queries=4, num_features=3, seed=1)
    features, labels = data.features.copy(), data.labels.copy()
    features[5, 1] = np.nan
    with pytest.raises(ValueError, match=r"The features of document 5 \(query id \d+\) are not "
                                         r"finite: \[.*nan.*\]"):
        ranking_dataset(LibSVMData(features, data.labels, data.qids, data.query_offsets))
    labels[7] = np.inf
    with pytest.raises(ValueError, match=r"The label of document 7 \(query id \d+\) is not "
                                         r"finite: inf"):
        ranking_dataset(LibSVMData(data.features, labels, data.qids, data.query_offsets))


def test_repeat_streams_seeded_epochs_alike_from_every_iterator():
    data = _small(num_queries=10)
    label_sums = np.array([labels.sum() for labels in np.split(data.labels,
                                                                data.query_offsets[1:-1])])

    def stream(seed=1, **options):
        return ranking_dataset(data, batch_size=4, seed=seed, normalization="none",
                               repeat=True, **options)

    dataset = stream(list_size=3)
    ahead = iter(dataset)
    for _ in range(7):  # an iterator far ahead, past two epochs, does not move another
        next(ahead)
    first = [labels.numpy() for _, labels in dataset.take(9)]
    again = [labels.numpy() for _, labels in stream(list_size=3).take(9)]
    for got, want in zip(first, again):
        np.testing.assert_array_equal(got, want)
    # epochs of 4 + 4 + 2 lists; each epoch serves every query once, in its own order
    epochs = [stream().take(3), stream().skip(3).take(3)]
    per_epoch = [np.concatenate([np.where(labels.numpy() < 0, 0, labels.numpy()).sum(axis=1)
                                 for _, labels in epoch]) for epoch in epochs]
    assert [len(labels) for _, _, labels in _batches(stream().take(3))] == [4, 4, 2]
    for sums in per_epoch:
        np.testing.assert_allclose(np.sort(sums), np.sort(label_sums), rtol=1e-6)
    assert not np.array_equal(per_epoch[0], per_epoch[1])
    assert not np.array_equal(_batches(stream(seed=2).take(1))[0][2],
                              _batches(stream(seed=1).take(1))[0][2])
    unshuffled = _batches(stream(shuffle=False).take(6))
    np.testing.assert_array_equal(unshuffled[0][2], unshuffled[3][2])  # the file order
    with pytest.raises(ValueError, match="`repeat` with `drop_remainder` needs at least"):
        ranking_dataset(data, batch_size=11, repeat=True, drop_remainder=True)
