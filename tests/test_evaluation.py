"""Per-query evaluation: NumPy oracle, TF-Ranking cross-check, conventions, batching."""
import json

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

from tfr_extensions.backend import keras

from support.oracles_evaluation import ORACLES
from support.stack import needs_tf_ranking, tfr
from tfr_extensions import evaluation
from tfr_extensions.data import LibSVMData
from tfr_extensions.ops import vocabulary
from support.scorers import LinearScorer

TOPNS = (1, 3, 5, 10, 20, 50)


def grouped_lists(sizes, seed=0, no_relevant=(), num_features=3):
    """A LibSVMData with distinct scores' worth of random graded labels."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 5, size=int(np.sum(sizes))).astype(np.float32)
    labels[rng.random(labels.size) < 0.5] = 0.0
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    for q in no_relevant:
        labels[offsets[q]:offsets[q + 1]] = 0.0
    for q in range(len(sizes)):  # every other query has a relevant document
        if q not in no_relevant and not (labels[offsets[q]:offsets[q + 1]] > 0).any():
            labels[offsets[q]] = 1.0
    qids = np.repeat(np.arange(100, 100 + len(sizes)), sizes)
    features = rng.normal(size=(labels.size, num_features)).astype(np.float32)
    return LibSVMData(features, labels, qids, offsets)


def test_per_query_values_match_numpy_oracle():
    data = grouped_lists([7, 1, 30, 12, 64, 3], seed=1, no_relevant=(3,))
    scores = np.random.default_rng(2).permutation(data.labels.size).astype(np.float32)
    result = evaluation.evaluate(data.labels, scores, data.query_offsets, qids=data.query_ids,
                                 topns=TOPNS, metrics=tuple(ORACLES), no_relevant="zero")
    frame = result.per_query
    assert list(frame.qid) == list(range(100, 106))
    assert list(frame.num_docs) == [7, 1, 30, 12, 64, 3]
    assert list(frame.has_relevant) == [True, True, True, False, True, True]
    for q in range(data.num_queries):
        rows = slice(data.query_offsets[q], data.query_offsets[q + 1])
        for name, oracle in ORACLES.items():
            for k in TOPNS:
                want = oracle(data.labels[rows], scores[rows], k)
                assert frame.loc[q, f"{name}@{k}"] == pytest.approx(want, abs=1e-6), (q, name, k)


def test_default_columns_and_metric_names_of_the_vocabulary():
    data = grouped_lists([5, 6, 4], seed=9)
    scores = np.random.default_rng(10).normal(size=data.labels.size).astype(np.float32)
    default = evaluation.evaluate(data.labels, scores, data.query_offsets, topns=(5,))
    assert [c for c in default.per_query.columns if "@" in c] == ["ndcg@5", "map@5", "nerr@5",
                                                                   "p@5"]
    assert set(default.summary["metric_definitions"]) == {"ndcg", "map", "nerr", "p"}
    assert "all relevant documents" in default.summary["metric_definitions"]["map"]
    # canonical names and aliases give the same columns ("ap" and "map" one column)
    named = evaluation.evaluate(data.labels, scores, data.query_offsets, topns=(5,),
                                metrics=("ap", "map", "precision", "map_min"))
    assert [c for c in named.per_query.columns if "@" in c] == ["map@5", "p@5", "map_min@5"]
    assert named.summary["map@5"] == default.summary["map@5"]
    assert named.summary["p@5"] == default.summary["p@5"]
    assert "min(k, R)" in named.summary["metric_definitions"]["map_min"]
    assert evaluation.json_summary(named.summary)["metric_definitions"] == \
        named.summary["metric_definitions"]


def test_map_min_and_ndcg_equal_lightgbms_evaluator_under_the_one_rule():
    """LightGBM's own map@k and ndcg@k (lists without relevant documents count
    1) of the same scores, given as the validation set's init_score to a
    booster whose one tree is the constant 0."""
    data = grouped_lists([7, 1, 30, 12, 64, 3, 9], seed=11, no_relevant=(3,))
    scores = np.random.default_rng(12).permutation(data.labels.size).astype(np.float64)
    sizes = np.diff(data.query_offsets)
    train = lgb.Dataset(data.features, data.labels, group=sizes)
    valid = lgb.Dataset(data.features, data.labels, group=sizes, init_score=scores,
                        reference=train)
    zero_gradients = lambda preds, _: (np.zeros_like(preds), np.ones_like(preds))  # noqa: E731
    recorded = {}
    booster = lgb.train({"objective": zero_gradients, "metric": ["map", "ndcg"],
                         "eval_at": [1, 3, 5, 10], "verbose": -1, "num_threads": 1},
                        train, num_boost_round=1, valid_sets=[valid], valid_names=["valid"],
                        callbacks=[lgb.record_evaluation(recorded)])
    assert (booster.predict(data.features) == 0).all()
    ours = evaluation.evaluate(data.labels, scores, data.query_offsets, topns=(1, 3, 5, 10),
                               metrics=("map_min", "map", "ndcg"), no_relevant="one").summary
    for k in (1, 3, 5, 10):
        assert ours[f"map_min@{k}"] == pytest.approx(recorded["valid"][f"map@{k}"][0], abs=1e-6)
        assert ours[f"ndcg@{k}"] == pytest.approx(recorded["valid"][f"ndcg@{k}"][0], abs=1e-6)
    assert ours["map@1"] < ours["map_min@1"]  # TF-Ranking's map@1 is not LightGBM's


def test_no_relevant_conventions():
    data = grouped_lists([5, 6, 4, 8], seed=3, no_relevant=(1, 2))
    scores = np.random.default_rng(4).normal(size=data.labels.size).astype(np.float32)
    by_rule = {rule: evaluation.evaluate(data.labels, scores, data.query_offsets, topns=(5,),
                                         no_relevant=rule) for rule in ("exclude", "zero", "one")}
    counted = by_rule["zero"].per_query.loc[[0, 3], "ndcg@5"].to_numpy()
    assert by_rule["exclude"].per_query.loc[[1, 2], "ndcg@5"].isna().all()
    assert (by_rule["zero"].per_query.loc[[1, 2], "ndcg@5"] == 0.0).all()
    assert (by_rule["one"].per_query.loc[[1, 2], "map@5"] == 1.0).all()
    assert by_rule["exclude"].summary["ndcg@5"] == pytest.approx(counted.mean())
    assert by_rule["zero"].summary["ndcg@5"] == pytest.approx(counted.sum() / 4)
    assert by_rule["one"].summary["ndcg@5"] == pytest.approx((counted.sum() + 2) / 4)
    assert by_rule["exclude"].summary["num_counted"] == 2
    assert by_rule["one"].summary["num_counted"] == 4
    for rule, result in by_rule.items():
        assert result.summary["no_relevant"] == rule
        assert result.summary["num_queries"] == 4


@needs_tf_ranking
def test_matches_tf_ranking_keras_metrics_under_zero_rule():
    data = grouped_lists([10, 10, 10, 10, 10, 10], seed=5, no_relevant=(2,))
    scores = np.random.default_rng(6).permutation(data.labels.size).astype(np.float32)  # distinct
    result = evaluation.evaluate(data.labels, scores, data.query_offsets, topns=(1, 3, 5, 10),
                                 no_relevant="zero")
    labels_2d, scores_2d = data.labels.reshape(6, 10), scores.reshape(6, 10)
    peers = {"ndcg": tfr.keras.metrics.NDCGMetric,
             "map": tfr.keras.metrics.MeanAveragePrecisionMetric,
             "p": tfr.keras.metrics.PrecisionMetric}
    for name, cls in peers.items():
        for k in (1, 3, 5, 10):
            metric = cls(topn=k)
            metric.update_state(labels_2d, scores_2d)
            want = float(metric.result())
            assert result.summary[f"{name}@{k}"] == pytest.approx(want, abs=1e-5), (name, k)


def test_validation_errors():
    with pytest.raises(ValueError, match="no_relevant"):
        evaluation.evaluate([1.0], [0.0], [0, 1], no_relevant="drop")
    with pytest.raises(ValueError, match="metrics"):
        evaluation.evaluate([1.0], [0.0], [0, 1], metrics=("mrr",))
    with pytest.raises(ValueError, match="query_offsets"):
        evaluation.evaluate([1.0, 0.0], [0.0, 1.0], [0, 1])


def test_predict_scores_long_lists_and_batching():
    data = grouped_lists([1500, 3, 40, 1, 700, 12], seed=7, num_features=4)
    model = LinearScorer(4)
    scores = evaluation.predict_scores(model, data, max_docs_per_batch=1000,
                                       max_queries_per_batch=2)
    want = data.features @ model.dense.kernel.numpy()[:, 0]
    np.testing.assert_allclose(scores, want, rtol=1e-5, atol=1e-5)


def test_best_epoch_callback_restores_best_weights():
    data = grouped_lists([8, 9, 10], seed=8, num_features=2)
    data = LibSVMData(data.features, np.where(data.features[:, 0] > 0, 2.0, 0.0).astype(np.float32),
                      data.qids, data.query_offsets)   # relevance = feature 0 > 0
    model = LinearScorer(2)
    callback = evaluation.BestEpochCallback(data, "ndcg@5")
    callback.set_model(model)
    history = []
    for epoch, w in enumerate([[-1.0], [1.0], [-1.0]]):   # bad, perfect, bad
        model.dense.kernel.assign([w, [0.0]])
        logs = {}
        callback.on_epoch_end(epoch, logs)
        history.append(logs["val_ndcg_5"])
    callback.on_train_end()
    assert history[1] == pytest.approx(1.0) and history[0] < 1.0
    assert callback.best_epoch == 2
    np.testing.assert_array_equal(model.dense.kernel.numpy(), [[1.0], [0.0]])
    assert callback.values == history
    with pytest.raises(ValueError, match="metric"):
        evaluation.BestEpochCallback(data, "ndcg5")


def test_best_epoch_callback_for_a_player_evaluates_and_restores_that_player():
    data = grouped_lists([8, 9, 10], seed=8, num_features=2)
    data = LibSVMData(data.features, np.where(data.features[:, 0] > 0, 2.0, 0.0).astype(np.float32),
                      data.qids, data.query_offsets)
    player, fitted = LinearScorer(2), LinearScorer(2)
    callback = evaluation.BestEpochCallback(data, "ndcg@5", scorer=player, log_key="val_g")
    callback.set_model(fitted)  # the model being fit is not the one evaluated
    for epoch, w in enumerate([[-1.0], [1.0], [-1.0]]):
        player.dense.kernel.assign([w, [0.0]])
        logs = {}
        callback.on_epoch_end(epoch, logs)
        assert logs["val_g"] == callback.values[-1]
    callback.on_train_end()
    assert callback.values[1] == pytest.approx(1.0) and callback.values[0] < 1.0
    assert callback.best_epoch == 2
    np.testing.assert_array_equal(player.dense.kernel.numpy(), [[1.0], [0.0]])


def test_per_query_frame_writes_csv(tmp_path):
    data = grouped_lists([4, 5], seed=9)
    result = evaluation.evaluate(data.labels, data.labels, data.query_offsets,
                                 qids=data.query_ids)
    path = tmp_path / "per_query.csv"
    result.per_query.to_csv(path, index=False)
    back = pd.read_csv(path)
    assert list(back.columns[:3]) == ["qid", "num_docs", "has_relevant"]
    assert back["ndcg@10"].tolist() == [1.0, 1.0]


def relevance_by_sign(data):
    """``data`` with label 2 where feature 0 > 0, else 0: ``[[1], [0]]`` ranks it perfectly."""
    return LibSVMData(data.features, np.where(data.features[:, 0] > 0, 2.0, 0.0)
                      .astype(np.float32), data.qids, data.query_offsets)


def run_epochs(callback, model, kernels, first_epoch=0):
    """Epochs ``first_epoch, ...`` of a fake fit: the kernel of each epoch, then epoch end."""
    for epoch, w in enumerate(kernels, first_epoch):
        callback.on_epoch_begin(epoch)
        model.dense.kernel.assign([w, [0.0]])
        callback.on_epoch_end(epoch, {})


def test_best_epoch_state_survives_a_checkpoint_restore(tmp_path):
    data = relevance_by_sign(grouped_lists([8, 9, 10], seed=8, num_features=2))
    model = LinearScorer(2)
    callback = evaluation.BestEpochCallback(data, "ndcg@5")
    callback.set_model(model)
    callback.set_params({"epochs": 4})
    checkpoint = tf.train.Checkpoint(model=model, best=callback.state())
    callback.on_train_begin()
    run_epochs(callback, model, [[-1.0], [1.0]])          # epoch 2 is perfect
    path = checkpoint.write(str(tmp_path / "ckpt"))       # the backup after epoch 2
    want_values = list(callback.values)

    # a new process: fresh model and callback, the checkpoint restored, then epochs 3-4
    model = LinearScorer(2)
    model.dense.kernel.assign([[5.0], [5.0]])
    resumed = evaluation.BestEpochCallback(data, "ndcg@5")
    resumed.set_model(model)
    resumed.set_params({"epochs": 4})
    resumed.on_train_begin()
    tf.train.Checkpoint(model=model, best=resumed.state()).read(path).assert_consumed()
    run_epochs(resumed, model, [[-1.0], [-0.5]], first_epoch=2)   # both worse
    resumed.on_train_end()
    assert resumed.values[:2] == want_values and len(resumed.values) == 4
    assert resumed.best_epoch == 2 and resumed.best_value == pytest.approx(1.0)
    # the best weights come from the checkpoint: epoch 2's, not any epoch of this process
    np.testing.assert_array_equal(model.dense.kernel.numpy(), [[1.0], [0.0]])
    state = resumed.state()
    assert int(state.num_epochs.numpy()) == 4 and int(state.best_epoch.numpy()) == 2


def test_best_epoch_state_bounds_its_epochs():
    data = relevance_by_sign(grouped_lists([8, 9], seed=8, num_features=2))
    model = LinearScorer(2)
    callback = evaluation.BestEpochCallback(data, "ndcg@5")
    callback.set_model(model)
    with pytest.raises(ValueError, match="capacity"):
        callback.state()  # outside fit: no `epochs` param
    callback.state(capacity=1)
    run_epochs(callback, model, [[1.0]])
    with pytest.raises(ValueError, match="holds 1 epochs"):
        run_epochs(callback, model, [[1.0]], first_epoch=1)


def test_validation_set_without_a_countable_query_is_an_error():
    data = grouped_lists([4, 5], seed=10, no_relevant=(0, 1))
    with pytest.raises(ValueError, match="no query with a relevant document"):
        evaluation.BestEpochCallback(data, "ndcg@5")
    assert evaluation.num_countable_queries(data, "exclude") == 0
    assert evaluation.num_countable_queries(data, "zero") == 2
    evaluation.BestEpochCallback(data, "ndcg@5", no_relevant="zero")  # counts them as 0
    empty = LibSVMData(np.zeros((0, 3), np.float32), np.zeros(0, np.float32),
                       np.zeros(0, np.int64), np.zeros(1, np.int64))
    with pytest.raises(ValueError, match="test set has no query"):
        evaluation.check_evaluable(empty, "one", what="test")


def test_json_summary_writes_a_mean_over_no_query_as_null():
    data = grouped_lists([4, 5], seed=10, no_relevant=(0, 1))
    summary = evaluation.evaluate(data.labels, data.labels, data.query_offsets,
                                  topns=(5,), metrics=("ndcg",)).summary
    assert np.isnan(summary["ndcg@5"]) and summary["num_counted"] == 0
    strict = evaluation.json_summary(summary)
    assert strict == {"no_relevant": "exclude", "num_queries": 2, "num_counted": 0,
                      "ndcg@5": None,
                      "metric_definitions": {"ndcg": vocabulary.definition("ndcg")}}
    assert json.loads(json.dumps(strict, allow_nan=False)) == strict
    assert evaluation.json_metric(np.float32(0.5)) == 0.5
    assert evaluation.json_metric(float("inf")) is None
