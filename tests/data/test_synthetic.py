"""synthetic: deterministic, MSLR-like skew, queries without relevant documents, learnable."""
import numpy as np
import pytest

from support.oracles_data import zscore_list
from tfr_extensions.data import synthetic
from tfr_extensions.data.synthetic import MSLR_LABEL_PROBS


def _ndcg10(labels, scores):
    order = np.argsort(-scores, kind="stable")[:10]
    discount = 1.0 / np.log2(np.arange(2, order.size + 2))
    dcg = np.sum((2.0 ** labels[order] - 1) * discount)
    ideal = np.sum((2.0 ** np.sort(labels)[::-1][:10] - 1) * discount)
    return dcg / ideal if ideal > 0 else 0.0


def test_deterministic_per_seed():
    a, b, c = synthetic(seed=3), synthetic(seed=3), synthetic(seed=4)
    for name in ("features", "labels", "qids", "query_offsets"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.labels, c.labels)


def test_shapes_dtypes_and_list_sizes():
    data = synthetic(num_queries=50, num_features=9, list_size=(3, 11))
    assert data.features.shape == (data.query_offsets[-1], 9)
    assert data.features.dtype == np.float32 and data.labels.dtype == np.float32
    assert data.list_sizes.min() >= 3 and data.list_sizes.max() <= 11
    np.testing.assert_array_equal(data.query_ids, np.arange(1, 51))


def test_mslr_like_label_skew_and_queries_without_relevant_documents():
    data = synthetic(num_queries=2000, seed=0)
    shares = np.bincount(data.labels.astype(int), minlength=5) / data.labels.size
    assert set(np.unique(data.labels)) <= {0.0, 1.0, 2.0, 3.0, 4.0}
    assert np.all(np.diff(shares) < 0)  # 0 most frequent, 4 rarest
    np.testing.assert_allclose(shares[1:], np.array(MSLR_LABEL_PROBS[1:]) * 0.9, atol=0.03)
    relevant = np.add.reduceat(data.labels > 0, data.query_offsets[:-1])
    assert 0.07 < np.mean(relevant == 0) < 0.14


def test_signal_is_learnable_after_query_normalization():
    data = synthetic(num_queries=400, seed=1)
    normalized = np.concatenate([zscore_list(data.features[a:b]) for a, b in
                                 zip(data.query_offsets[:-1], data.query_offsets[1:])])
    half = data.query_offsets[200]
    weights, *_ = np.linalg.lstsq(normalized[:half], data.labels[:half], rcond=None)
    scores = normalized @ weights
    rng = np.random.default_rng(0)
    learned, random = [], []
    for a, b in zip(data.query_offsets[200:-1], data.query_offsets[201:]):
        if data.labels[a:b].max() > 0:
            learned.append(_ndcg10(data.labels[a:b], scores[a:b]))
            random.append(_ndcg10(data.labels[a:b], rng.random(b - a)))
    assert np.mean(learned) > np.mean(random) + 0.15


def test_argument_errors():
    with pytest.raises(ValueError, match="`num_queries` must be an int >= 1; got 0"):
        synthetic(num_queries=0)
    with pytest.raises(ValueError, match="`num_features` must be an int >= 2; got 1"):
        synthetic(num_features=1)
    with pytest.raises(ValueError, match="`num_queries` must be an int >= 1; got True"):
        synthetic(num_queries=True)
    with pytest.raises(ValueError, match="`list_size` must be"):
        synthetic(list_size=(5, 2))
    with pytest.raises(ValueError, match=r"`no_relevant_fraction` must be a finite number in \[0, 1\]"):
        synthetic(no_relevant_fraction=1.5)
    with pytest.raises(ValueError, match=r"`noise` must be a finite number in \[0, inf\); got -1"):
        synthetic(noise=-1)
