"""to_elwc: the records parse back through TF-Ranking's own ELWC readers
unchanged (tf215), and through ours (:func:`tfr_extensions.data.elwc.parse_elwc`,
both stacks)."""
import numpy as np
import pytest
import tensorflow as tf

from support.oracles_data import pad_lists
from support.stack import needs_tf_ranking, tfr
from tfr_extensions.data import elwc_feature_specs, synthetic, to_elwc
from tfr_extensions.data.elwc import parse_elwc


def _expected(data):
    lists = [(data.features[a:b], data.labels[a:b])
             for a, b in zip(data.query_offsets[:-1], data.query_offsets[1:])]
    longest = int(data.list_sizes.max())
    return (pad_lists([f for f, _ in lists], longest, 0.0),
            pad_lists([lab for _, lab in lists], longest, -1.0))


@pytest.fixture(scope="module")
def data():
    return synthetic(num_queries=9, num_features=5, seed=2, list_size=(1, 12))


@needs_tf_ranking
def test_round_trip_through_build_ranking_dataset(tmp_path, data):
    path = tmp_path / "data.tfrecord"
    assert to_elwc(data, path) == 9
    context_spec, example_spec = elwc_feature_specs(5)
    dataset = tfr.data.build_ranking_dataset(
        file_pattern=str(path), data_format=tfr.data.ELWC, batch_size=9,
        context_feature_spec=context_spec, example_feature_spec=example_spec,
        reader=tf.data.TFRecordDataset, shuffle=False, num_epochs=1)
    batch = next(iter(dataset))
    features, labels = _expected(data)
    np.testing.assert_array_equal(batch["features"].numpy(), features)
    np.testing.assert_array_equal(batch["relevance"].numpy()[..., 0], labels)
    np.testing.assert_array_equal(batch["query_id"].numpy()[:, 0], data.query_ids)


@pytest.mark.parametrize("parser", [pytest.param("tf_ranking", marks=needs_tf_ranking), "ours"])
def test_round_trip_through_make_parsing_fn_with_custom_names(tmp_path, data, parser):
    path = tmp_path / "data.tfrecord.gz"
    to_elwc(data, path, feature_name="x", label_name="y", qid_name=None, compression="GZIP")
    context_spec, example_spec = elwc_feature_specs(5, "x", "y", qid_name=None)
    assert context_spec == {}
    if parser == "ours":
        def parse(serialized):
            return parse_elwc(serialized, context_spec, example_spec)
    else:
        parse = tfr.data.make_parsing_fn(tfr.data.ELWC, context_feature_spec=context_spec,
                                         example_feature_spec=example_spec)
    records = tf.data.TFRecordDataset(str(path), compression_type="GZIP").batch(9)
    parsed = parse(next(iter(records)))
    features, labels = _expected(data)
    np.testing.assert_array_equal(parsed["x"].numpy(), features)
    np.testing.assert_array_equal(parsed["y"].numpy()[..., 0], labels)


def test_argument_errors(tmp_path, data):
    with pytest.raises(ValueError, match="`feature_name` and `label_name` must differ"):
        to_elwc(data, tmp_path / "x", feature_name="y", label_name="y")
    with pytest.raises(ValueError, match="`compression` must be None, 'GZIP' or 'ZLIB'"):
        to_elwc(data, tmp_path / "x", compression="bz2")
