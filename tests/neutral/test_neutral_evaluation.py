"""The evaluation protocol (:mod:`tfr_extensions.evaluation`) on every Keras 3 backend,
with or without TensorFlow: ``evaluate`` against :mod:`support.oracles_evaluation` on
queries with ties, of many lengths (padded inside) and without relevant documents,
under each ``no_relevant`` rule; ``predict_scores`` and ``evaluate_model`` with a small
Keras model over ``{"features", "mask"}``; ``BestEpochCallback`` inside ``model.fit``,
and its ``snapshot``/``load_snapshot`` round trip through a file.

Imports numpy, keras, pytest, tfr_extensions and ``support`` only.
"""
import json

import numpy as np
import pytest

from tfr_extensions import backend

if not backend.IS_KERAS_3:
    pytest.skip("Keras 2: tests/test_evaluation.py covers evaluation there; this suite is "
                "Keras 3's, on each of its backends", allow_module_level=True)

import keras  # noqa: E402

import tfr_extensions as tfrx  # noqa: E402
from tfr_extensions import evaluation  # noqa: E402
from tfr_extensions.data import LibSVMData  # noqa: E402
from tfr_extensions.ops import vocabulary  # noqa: E402
from support.oracles_evaluation import ORACLES  # noqa: E402

#: query sizes: a single document, lists shorter and longer than the cutoffs, one long
SIZES = (1, 4, 7, 3, 12, 2, 30, 5)


def make_queries(seed=0, sizes=SIZES, num_features=3):
    """``LibSVMData`` with tied scores inside queries (quantized features), queries
    without relevant documents (the 2nd and the 6th) and qids 101, 102, ..."""
    rng = np.random.default_rng(seed)
    n = int(np.sum(sizes))
    features = np.round(rng.normal(size=(n, num_features)), 1).astype(np.float32)
    labels = rng.choice(5, size=n, p=[0.5, 0.25, 0.15, 0.07, 0.03]).astype(np.float32)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    for q in (1, 5):
        labels[offsets[q]:offsets[q + 1]] = 0.0
    labels[offsets[2]] = 3.0  # relevant documents in the others
    labels[offsets[4] + 1] = 1.0
    qids = np.repeat(np.arange(101, 101 + len(sizes)), sizes)
    return LibSVMData(features, labels, qids, offsets)


DATA = make_queries()
KERNEL = np.array([[1.0], [-0.5], [0.25]], np.float32)


def oracle_frame(labels, scores, offsets, metrics, topns, no_relevant):
    """``{column: per-query values}`` by the oracles and the rule."""
    columns = {}
    for metric in metrics:
        prefix = vocabulary.column_prefix(metric)
        for k in topns:
            values = []
            for a, b in zip(offsets[:-1], offsets[1:]):
                y, s = labels[a:b], scores[a:b]
                if not (y > 0).any() and no_relevant != "zero":
                    values.append(np.nan if no_relevant == "exclude" else 1.0)
                else:
                    values.append(ORACLES[prefix](y, s, k))
            columns[f"{prefix}@{k}"] = np.array(values)
    return columns


@pytest.mark.parametrize("no_relevant", evaluation.NO_RELEVANT_RULES)
def test_evaluate_equals_the_oracles_under_each_rule(no_relevant):
    scores = (DATA.features @ KERNEL)[:, 0]
    assert len(np.unique(scores)) < len(scores)  # ties of scores inside queries
    # every metric under one rule; the rules themselves on two (JAX's eager ops are slow)
    metrics = (("ndcg", "map", "map_min", "p", "nerr") if no_relevant == "exclude"
               else ("ndcg", "map"))
    topns = (1, 4, 10)
    result = evaluation.evaluate(DATA.labels, scores, DATA.query_offsets, qids=DATA.query_ids,
                                 topns=topns, metrics=metrics, no_relevant=no_relevant)
    frame = result.per_query
    expected = oracle_frame(DATA.labels, scores, DATA.query_offsets, metrics, topns, no_relevant)
    assert list(frame.columns) == ["qid", "num_docs", "has_relevant"] + list(expected)
    assert frame["qid"].tolist() == DATA.query_ids.tolist()
    assert frame["num_docs"].tolist() == list(SIZES)
    relevant = [bool((DATA.labels[a:b] > 0).any())
                for a, b in zip(DATA.query_offsets[:-1], DATA.query_offsets[1:])]
    assert frame["has_relevant"].tolist() == relevant and relevant.count(False) == 2
    for column, values in expected.items():
        np.testing.assert_allclose(frame[column].to_numpy(), values, rtol=1e-6, atol=1e-7,
                                   err_msg=column)
        assert result.summary[column] == pytest.approx(np.nanmean(values), rel=1e-6)
    summary = result.summary
    assert summary["no_relevant"] == no_relevant and summary["num_queries"] == len(SIZES)
    assert summary["num_counted"] == (len(SIZES) - 2 if no_relevant == "exclude" else len(SIZES))
    assert summary["metric_definitions"] == {
        prefix: vocabulary.definition(prefix) for prefix in metrics}


def test_evaluate_names_and_errors():
    scores = (DATA.features @ KERNEL)[:, 0]
    result = evaluation.evaluate(DATA.labels, scores, DATA.query_offsets, topns=(2,),
                                 metrics=("ap", "map", "precision"))
    assert [c for c in result.per_query.columns if "@" in c] == ["map@2", "p@2"]
    assert result.per_query["qid"].tolist() == list(range(len(SIZES)))
    with pytest.raises(ValueError, match="query_offsets"):
        evaluation.evaluate(DATA.labels, scores, [0, 5, 3, len(scores)])
    with pytest.raises(ValueError, match="same length"):
        evaluation.evaluate(DATA.labels, scores[:-1], DATA.query_offsets)
    with pytest.raises(ValueError, match="metrics"):
        evaluation.evaluate(DATA.labels, scores, DATA.query_offsets, metrics=("mrr",))
    with pytest.raises(ValueError, match="no_relevant"):
        evaluation.evaluate(DATA.labels, scores, DATA.query_offsets, no_relevant="drop")
    # a mean over no counted query is NaN, and JSON null in json_summary
    none = evaluation.evaluate([0.0, 0.0], [1.0, 2.0], [0, 2], topns=(1,), metrics=("ndcg",))
    assert none.summary["num_counted"] == 0 and np.isnan(none.summary["ndcg@1"])
    assert json.loads(json.dumps(evaluation.json_summary(none.summary)))["ndcg@1"] is None


class Scorer(keras.Model):
    """score = features @ w over ``{"features", "mask"}``; NaN where the mask is False,
    so a document scored as padding shows."""

    def __init__(self, num_features, **kwargs):
        super().__init__(**kwargs)
        self.dense = keras.layers.Dense(1, use_bias=False)
        self.dense.build((None, None, num_features))

    def call(self, inputs, training=None):
        scores = self.dense(inputs["features"])[..., 0]
        return keras.ops.where(inputs["mask"], scores, float("nan"))


def scorer_with(kernel):
    model = Scorer(kernel.shape[0])
    model.dense.kernel.assign(kernel)
    return model


def test_predict_scores_scores_every_row_with_its_query():
    model = scorer_with(KERNEL)
    expected = (DATA.features @ KERNEL)[:, 0]
    for max_docs in (1 << 16, 20):  # one batch; batches of similar lengths, 30 docs alone
        scores = evaluation.predict_scores(model, DATA, max_docs_per_batch=max_docs,
                                           max_queries_per_batch=3)
        assert scores.dtype == np.float32 and scores.shape == DATA.labels.shape
        np.testing.assert_allclose(scores, expected, rtol=1e-6, atol=1e-6)
    result = evaluation.evaluate_model(model, DATA, no_relevant="one", topns=(3, 5),
                                       metrics=("ndcg", "nerr"))
    direct = evaluation.evaluate(DATA.labels, expected, DATA.query_offsets, qids=DATA.query_ids,
                                 topns=(3, 5), metrics=("ndcg", "nerr"), no_relevant="one")
    assert result.summary.keys() == direct.summary.keys()
    for key, value in direct.summary.items():
        assert result.summary[key] == (pytest.approx(value) if isinstance(value, float) else value)
    np.testing.assert_allclose(result.per_query.iloc[:, 3:].to_numpy(),
                               direct.per_query.iloc[:, 3:].to_numpy(), rtol=1e-6)


def oracle_ndcg5(data, kernel):
    """Mean nDCG@5 over the queries with a relevant document (``exclude``)."""
    scores = (data.features @ kernel)[:, 0]
    offsets = data.query_offsets
    values = [ORACLES["ndcg"](data.labels[a:b], scores[a:b], 5)
              for a, b in zip(offsets[:-1], offsets[1:]) if (data.labels[a:b] > 0).any()]
    return float(np.mean(values))


def epoch_kernels(data, count=3, seed=4):
    """Kernels whose validation nDCG@5 differ, ordered so the best is the middle epoch."""
    rng = np.random.default_rng(seed)
    kernels = [rng.normal(size=(data.num_features, 1)).astype(np.float32) for _ in range(count)]
    values = [oracle_ndcg5(data, k) for k in kernels]
    assert len(set(np.round(values, 6))) == count
    order = np.argsort(values)  # worst, middle, best -> worst, best, middle
    return [kernels[order[0]], kernels[order[-1]]] + [kernels[i] for i in order[1:-1]]


def fit_with_kernels(model, callback, kernels, train, initial_epoch=0):
    """``model.fit`` with learning rate 0 whose weights at epoch e are ``kernels[e]``
    (set at epoch begin), so each epoch's validation metric is known in advance."""
    setter = keras.callbacks.LambdaCallback(
        on_epoch_begin=lambda epoch, logs: model.dense.kernel.assign(kernels[epoch]))
    model.compile(optimizer=keras.optimizers.SGD(0.0), loss=tfrx.losses.get("listnet"))
    batches = tfrx.data.RankingPyDataset(train, batch_size=4, with_mask=True)
    return model.fit(batches, epochs=len(kernels), initial_epoch=initial_epoch,
                     callbacks=[setter, callback], verbose=0)


def test_best_epoch_callback_in_fit_restores_the_best_weights_and_snapshots(tmp_path):
    train = tfrx.data.synthetic(num_queries=12, num_features=3, seed=1, list_size=(3, 9))
    vali = tfrx.data.synthetic(num_queries=15, num_features=3, seed=2, list_size=(2, 11))
    kernels = epoch_kernels(vali)
    expected = [oracle_ndcg5(vali, k) for k in kernels]
    model = scorer_with(kernels[0])
    callback = evaluation.BestEpochCallback(vali, "ndcg@5")
    history = fit_with_kernels(model, callback, kernels, train)
    np.testing.assert_allclose(callback.values, expected, rtol=1e-5)
    np.testing.assert_allclose(history.history["val_ndcg_5"], expected, rtol=1e-5)
    assert callback.best_epoch == 2 and callback.best_value == pytest.approx(max(expected))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(model.dense.kernel), kernels[1])

    # the snapshot through a file, into a new callback: the same state, and a resumed
    # run that keeps the earlier epochs and their best weights
    snapshot = callback.snapshot()
    np.savez(tmp_path / "state.npz", values=snapshot["values"],
             best_epoch=snapshot["best_epoch"], best_value=snapshot["best_value"],
             **{f"weight_{i}": w for i, w in enumerate(snapshot["best_weights"])})
    stored = np.load(tmp_path / "state.npz")
    loaded = {"values": stored["values"], "best_epoch": int(stored["best_epoch"]),
              "best_value": float(stored["best_value"]),
              "best_weights": [stored[f"weight_{i}"]
                               for i in range(len(snapshot["best_weights"]))]}
    resumed = evaluation.BestEpochCallback(vali, "ndcg@5")
    resumed.load_snapshot(loaded)
    again = resumed.snapshot()
    np.testing.assert_array_equal(again["values"], snapshot["values"])
    assert again["best_epoch"] == 2 and again["best_value"] == snapshot["best_value"]
    np.testing.assert_array_equal(again["best_weights"][0], kernels[1])
    fresh = scorer_with(kernels[0])
    worse = [kernels[0]] * 3 + [kernels[2]]  # epoch 4: below the best of epoch 2
    fit_with_kernels(fresh, resumed, worse, train, initial_epoch=3)
    assert len(resumed.values) == 4 and resumed.best_epoch == 2
    np.testing.assert_allclose(resumed.values[3], expected[2], rtol=1e-5)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(fresh.dense.kernel), kernels[1])


def test_best_epoch_callback_refuses_a_set_it_cannot_evaluate():
    data = make_queries()
    no_relevant = LibSVMData(data.features, np.zeros_like(data.labels), data.qids,
                             data.query_offsets)
    with pytest.raises(ValueError, match="no query with a relevant document"):
        evaluation.BestEpochCallback(no_relevant, "ndcg@5")
    evaluation.BestEpochCallback(no_relevant, "ndcg@5", no_relevant="zero")  # counts them 0
    with pytest.raises(ValueError, match="metric"):
        evaluation.BestEpochCallback(data, "ndcg5")
