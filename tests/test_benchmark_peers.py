"""The benchmarks' ports of TF-Ranking's losses equal TF-Ranking's, value and gradient."""
import numpy as np
import pytest
import tensorflow as tf

from benchmarks import peers
from support.stack import needs_tf_ranking


def batch(seed):
    rng = np.random.default_rng(seed)
    labels = rng.choice(5, size=(6, 9), p=[0.5, 0.3, 0.1, 0.05, 0.05]).astype(np.float32)
    labels[0, 4:] = -1.0  # padding
    labels[1] = np.where(labels[1] >= 0, 0.0, -1.0)  # no relevant document
    labels[2, :3] = -1.0  # padding first
    return tf.constant(labels), tf.constant(rng.normal(size=(6, 9)) * 3, tf.float32)


@needs_tf_ranking
@pytest.mark.parametrize("name", sorted(peers.PORTS))
@pytest.mark.parametrize("seed", [0, 1])
def test_port_gives_tf_rankings_value_and_gradient(name, seed):
    labels, scores = batch(seed)

    def value_and_grad(loss):
        with tf.GradientTape() as tape:
            tape.watch(scores)
            value = loss(labels, scores)
        return value.numpy(), tape.gradient(value, scores).numpy()

    ported, theirs = value_and_grad(peers.peer_loss(name, ported=True)), value_and_grad(
        peers.peer_loss(name))
    assert type(peers.peer_loss(name)).__module__.startswith("tensorflow_ranking")
    np.testing.assert_allclose(ported[0], theirs[0], rtol=1e-6)
    np.testing.assert_allclose(ported[1], theirs[1], rtol=1e-5, atol=1e-8)
    assert np.abs(theirs[1]).max() > 0  # a real gradient to compare


def test_ports_are_the_peers_without_tf_ranking_and_say_so():
    from tfr_extensions import compat
    if compat.has_tf_ranking():
        assert peers.peer_source().startswith("TF-Ranking 0.5.5")
    else:
        assert isinstance(peers.peer_loss("ApproxNDCG"), peers.PortedApproxNDCGLoss)
        assert "ports of TF-Ranking 0.5.5" in peers.peer_source()


@pytest.mark.parametrize("ported", [pytest.param(False, marks=needs_tf_ranking), True])
@pytest.mark.parametrize("list_size", [None, 4])
def test_elwc_peer_serves_the_queries_in_tf_rankings_format(tmp_path, ported, list_size):
    import tfr_extensions as tfrx
    data = tfrx.data.synthetic(num_queries=12, num_features=3, seed=4, list_size=(2, 7))
    path = str(tmp_path / "data.tfrecord")
    tfrx.data.to_elwc(data, path)
    dataset = peers.peer_elwc_dataset(path, 3, batch_size=4, list_size=list_size, ported=ported)
    queries = {}
    for a, b in zip(data.query_offsets[:-1], data.query_offsets[1:]):
        queries[tuple(np.round(data.features[a], 5))] = (data.features[a:b], data.labels[a:b])
    for features, labels in dataset.take(6):
        assert sorted(features) == ["features", "mask"]
        width = features["features"].shape[1]
        assert labels.shape == (4, width) and (list_size is None or width == list_size)
        for x, mask, y in zip(features["features"].numpy(), features["mask"].numpy(),
                              labels.numpy()):
            want_x, want_y = queries[tuple(np.round(x[0], 5))]  # the list's first document
            n = min(len(want_y), width)
            np.testing.assert_array_equal(mask, np.arange(width) < n)
            np.testing.assert_allclose(x[:n], want_x[:n], rtol=1e-6)
            np.testing.assert_array_equal(y[:n], want_y[:n])
            assert (y[n:] == -1).all()
