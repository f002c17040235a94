"""TF-Ranking's own pipeline classes with our losses, metrics, scorers and LibSVM data.

Everything here runs TF-Ranking's classes (``SimplePipeline``,
``SimpleDatasetBuilder``, ``ModelBuilder``, ``MultiWorkerMirroredStrategy``
through the ``strategy`` hparam), never stand-ins, on MQ2008 Fold1.
"""
import base64
import inspect
import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from tfr_extensions.backend import keras
from tensorflow_serving.apis import input_pb2
from tensorflow_serving.apis import predict_pb2

from support.local_cluster import assert_equal_weights, run_cluster
from support.stack import skip_module_without_tf_ranking, tfr

skip_module_without_tf_ranking()

import tfr_extensions as tfrx  # noqa: E402
from tfr_extensions import evaluation  # noqa: E402
from tfr_extensions import tfranking  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]
MULTI_WORKER_JOB = pathlib.Path(__file__).parent / "support" / "pipeline_worker_job.py"

# Runs in a fresh interpreter that imports TensorFlow only: serves the inputs of
# a PredictRequest (TensorProtos, as TF Serving receives them) through the
# SavedModel's predict signature.
SERVE_PREDICT_REQUEST = textwrap.dedent("""
    import base64, json, sys
    import tensorflow as tf
    from tensorflow.core.framework import tensor_pb2
    path, request = sys.argv[1], json.load(open(sys.argv[2]))
    signature = tf.saved_model.load(path).signatures[request["signature_name"]]
    inputs = {key: tf.constant(tf.make_ndarray(tensor_pb2.TensorProto.FromString(
                  base64.b64decode(value)))) for key, value in request["inputs"].items()}
    outputs = signature(**inputs)
    print("RESULT" + json.dumps({
        "outputs": {key: value.numpy().tolist() for key, value in outputs.items()},
        "modules": sorted({m.split(".")[0] for m in sys.modules
                           if m.split(".")[0] in ("tfr_extensions", "tensorflow_ranking",
                                                  "tensorflow_serving")})}))
""")


@pytest.fixture(scope="module")
def fold(mq2008_dir):
    return mq2008_dir / "Fold1"


@pytest.fixture(scope="module")
def libsvm_builder(fold):
    return tfranking.LibSVMDatasetBuilder(
        fold / "train.txt", fold / "vali.txt", train_batch_size=32, valid_batch_size=64)


def model_builder(feature_specs, mask_feature_name, notation="R2.L", hidden_units=16):
    context_spec, example_spec = feature_specs
    return tfr.keras.model.ModelBuilder(
        input_creator=tfr.keras.model.FeatureSpecInputCreator(context_spec, example_spec),
        preprocessor=tfranking.QueryZScorePreprocessor(),
        scorer=tfranking.UnivariateScorer(notation, hidden_units=hidden_units),
        mask_feature_name=mask_feature_name, name="ranker")


def readme_recipe() -> str:
    """The first python block under the README's pipeline heading, verbatim."""
    text = (REPO / "README.md").read_text()
    section = text.split("## Use it in your TF-Ranking pipeline", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def elwc_bytes(features, labels=None) -> bytes:
    proto = input_pb2.ExampleListWithContext()
    for row, vector in enumerate(features):
        example = proto.examples.add()
        example.features.feature["features"].float_list.value.extend(vector.tolist())
        if labels is not None:
            example.features.feature["relevance"].float_list.value.append(float(labels[row]))
    return proto.SerializeToString()


# --------------------------------------------------------------------------- the recipe


def test_readme_recipe_is_short():
    lines = [line for line in readme_recipe().splitlines() if line.strip()]
    assert len(lines) <= 10, lines


def test_recipe_trains_stock_pipeline_on_elwc_and_serves_a_predict_request(fold, tmp_path):
    """TF-Ranking's stock SimplePipeline + SimpleDatasetBuilder over ELWC from
    tfrx.data.to_elwc, only the loss changed (the README block, run verbatim)."""
    train = tfrx.data.read_libsvm(fold / "train.txt")
    valid = tfrx.data.read_libsvm(fold / "vali.txt")
    tfrx.data.to_elwc(train, tmp_path / "train.tfrecord")
    tfrx.data.to_elwc(valid, tmp_path / "vali.tfrecord")
    context_spec, example_spec = tfrx.data.elwc_feature_specs(train.num_features)
    label_spec = ("relevance", example_spec.pop("relevance"))
    dataset_hparams = tfr.keras.pipeline.DatasetHparams(
        train_input_pattern=str(tmp_path / "train.tfrecord"),
        valid_input_pattern=str(tmp_path / "vali.tfrecord"),
        train_batch_size=32, valid_batch_size=32)
    dataset_builder = tfr.keras.pipeline.SimpleDatasetBuilder(
        context_spec, example_spec, "list_mask", label_spec, dataset_hparams)
    model_dir = tmp_path / "model"
    hparams = tfr.keras.pipeline.PipelineHparams(
        model_dir=str(model_dir), num_epochs=2, steps_per_epoch=8, validation_steps=5,
        learning_rate=1e-3, loss="softmax_loss", export_best_model=True,
        best_exporter_metric="ndcg_5", best_exporter_metric_higher_better=True)
    namespace = {"model_builder": model_builder(({}, example_spec), "list_mask"),
                 "dataset_builder": dataset_builder, "hparams": hparams}
    exec(compile(readme_recipe(), "README.md", "exec"), namespace)  # noqa: S102

    pipeline = namespace["pipeline"]
    assert type(pipeline).__mro__[1] is tfr.keras.pipeline.SimplePipeline
    loss = pipeline.build_loss()
    assert isinstance(loss, tfrx.losses.TwinSigmoidLoss)
    assert loss.get_config()["metric"] == "ndcg" and loss.get_config()["gradient"] == "type3"
    best = model_dir / "export" / "best_model_by_metric"
    assert (best / "saved_model.pb").is_file()
    assert (model_dir / "export" / "latest_model" / "saved_model.pb").is_file()

    # A PredictRequest with three MQ2008 validation lists, served by TF alone
    # (TF Serving feeds request.inputs[key] to the signature's input `key`).
    lists = [valid.features[valid.query_offsets[q]:valid.query_offsets[q + 1]] for q in range(3)]
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "ranker"
    request.model_spec.signature_name = tf.saved_model.PREDICT_METHOD_NAME
    request.inputs[tf.saved_model.PREDICT_INPUTS].CopyFrom(tf.make_tensor_proto(
        [elwc_bytes(rows) for rows in lists], dtype=tf.string))
    request_path = tmp_path / "request.json"
    request_path.write_text(json.dumps({
        "signature_name": request.model_spec.signature_name,
        "inputs": {key: base64.b64encode(value.SerializeToString()).decode()
                   for key, value in request.inputs.items()}}))
    proc = subprocess.run(
        [sys.executable, "-c", SERVE_PREDICT_REQUEST, str(best), str(request_path)],
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"), capture_output=True, text=True,
        timeout=240, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    served = json.loads(proc.stdout.split("RESULT", 1)[1])
    assert served["modules"] == []  # TensorFlow alone: no TF-Ranking, TF Serving or tfrx
    scores = np.asarray(served["outputs"][tf.saved_model.PREDICT_OUTPUTS])
    # The same lists scored by the Keras model that the pipeline exported.
    restored = keras.models.load_model(str(best), compile=False)
    padded, mask = pad(lists, train.num_features)
    want = restored({"features": padded, "list_mask": mask}, training=False).numpy()
    assert scores.shape == want.shape == mask.shape
    np.testing.assert_allclose(scores[mask], want[mask], rtol=1e-5, atol=1e-5)


def pad(lists, num_features):
    longest = max(len(rows) for rows in lists)
    padded = np.zeros((len(lists), longest, num_features), np.float32)
    mask = np.zeros((len(lists), longest), bool)
    for i, rows in enumerate(lists):
        padded[i, :len(rows)], mask[i, :len(rows)] = rows, True
    return padded, mask


# --------------------------------------------------------------------------- our pipeline


class Recorder(keras.callbacks.Callback):
    """Keeps each epoch's logs and the trained model."""

    def __init__(self):
        super().__init__()
        self.logs = []

    def on_epoch_end(self, epoch, logs=None):
        self.logs.append(dict(logs or {}))


class RecordingPipeline(tfranking.SimplePipeline):
    """Our pipeline with a recording callback; exports are recorded, not written,
    where a test says so (export itself is tested in the recipe test)."""

    write_exports = True

    def build_callbacks(self):
        self.recorder = Recorder()
        return super().build_callbacks() + [self.recorder]

    def export_saved_model(self, model, export_to, checkpoint=None):
        self.exported_to = export_to
        if self.write_exports:
            super().export_saved_model(model, export_to, checkpoint)


def hparams_for(tmp_path, loss, **overrides):
    options = dict(model_dir=str(tmp_path), num_epochs=1, steps_per_epoch=1, validation_steps=1,
                   learning_rate=1e-3, loss=loss, steps_per_execution=1)
    options.update(overrides)
    return tfranking.PipelineHparams(**options)


#: TF-Ranking losses that need another model output than one score per document
NEEDS_OTHER_OUTPUTS = {"ordinal_loss": "Predictions for ordinal loss must have rank 3"}


@pytest.fixture(scope="module")
def short_lists_builder(fold):
    """Lists cut to 16 documents: one step per loss stays cheap (no XLA-compiled
    SoftRank tree, which starts at 128 documents)."""
    return tfranking.LibSVMDatasetBuilder(
        fold / "train.txt", fold / "vali.txt", train_batch_size=16, valid_batch_size=16,
        list_size=16, valid_list_size=16)


def test_every_registered_name_resolves_in_build_loss(tmp_path, short_lists_builder):
    builder = short_lists_builder
    for name in tfrx.losses.names():
        pipeline = tfranking.SimplePipeline(
            model_builder(builder.feature_specs(), builder.mask_feature_name), builder,
            hparams_for(tmp_path, name))
        want = tfrx.losses.get(name)
        got = pipeline.build_loss()
        assert type(got) is type(want), name
        assert got.get_config() == want.get_config(), name


#: TF-Ranking's own losses that train a step here: one that trains, and one that fails with
#: TF-Ranking's own error. The others are TF-Ranking's to test; the test above checks that
#: every one of their names resolves in ``build_loss``.
TF_RANKING_LOSSES = ("softmax_loss", "ordinal_loss")


def _init_args(name):
    return inspect.signature(type(tfrx.losses.get(name)).__init__).parameters


def _one_name_per_kind_of_loss():
    """TF_RANKING_LOSSES, then the first loss of ours (registry order) of each kind the
    pipeline can tell apart: its base class below ``RankingLoss`` (the policy-gradient
    losses keep sampled rankings in variables) and whether it takes a seed (its step
    counter and seed live in the checkpoint). The pipeline sees only the loss object; the
    math of every class and preset is ``tests/losses``'s (values, gradients, graph mode,
    XLA, Keras fit under mixed precision)."""
    kinds = {}
    for name in tfrx.losses.names(classes=False, presets=False, tf_ranking=False):
        cls = type(tfrx.losses.get(name))
        kind = (cls.__mro__[1], "seed" in _init_args(name))
        kinds.setdefault(kind, name)
    return TF_RANKING_LOSSES + tuple(kinds.values())


@pytest.mark.parametrize("name", _one_name_per_kind_of_loss())
def test_each_kind_of_loss_trains_a_step_in_the_pipeline(name, short_lists_builder, tmp_path):
    builder = short_lists_builder
    loss_args = {"seed": 0} if "seed" in _init_args(name) else {}
    pipeline = RecordingPipeline(
        model_builder(builder.feature_specs(), builder.mask_feature_name), builder,
        hparams_for(tmp_path, name, loss_args=loss_args))
    pipeline.write_exports = False
    if name in NEEDS_OTHER_OUTPUTS:  # TF-Ranking's own requirement, its own error
        with pytest.raises(ValueError, match=NEEDS_OTHER_OUTPUTS[name]):
            pipeline.train_and_validate()
        return
    pipeline.train_and_validate()
    (logs,) = pipeline.recorder.logs
    assert np.isfinite(logs["loss"]) and np.isfinite(logs["val_loss"]), logs
    assert 0.0 <= logs["val_metric/nerr_10"] <= 1.0
    assert pipeline.exported_to.endswith(os.path.join("export", "latest_model"))


def test_validation_metrics_equal_tfrx_evaluation(libsvm_builder, tmp_path):
    """The pipeline's validation metrics (Keras means over every validation list)
    equal tfrx.evaluation's exact per-query means for the same trained model."""
    builder = libsvm_builder
    pipeline = RecordingPipeline(
        model_builder(builder.feature_specs(), builder.mask_feature_name), builder,
        hparams_for(tmp_path, "twin_ndcg_type3", num_epochs=2, steps_per_epoch=5,
                    validation_steps=None, loss_args={"topn": 10, "seed": 0}))
    pipeline.write_exports = False
    pipeline.train_and_validate()
    logs = pipeline.recorder.logs[-1]
    model = pipeline.recorder.model
    valid = builder.valid_data
    # Valid documents in file order: the validation dataset is neither shuffled nor cut.
    scores = np.concatenate([model(x, training=False).numpy()[x[builder.mask_feature_name].numpy()]
                             for x, _ in builder.build_valid_dataset()])
    assert scores.shape == valid.labels.shape

    def mean(rule, column):
        return evaluation.evaluate(valid.labels, scores, valid.query_offsets, topns=(1, 5, 10),
                                   no_relevant=rule).summary[column]

    def queries_tied_in_top(k):
        """The share of queries whose top k holds tied scores of different labels:
        TF-Ranking's NDCG metric breaks those ties by a random shuffle (its op seed
        follows the graph's op count), tfrx.evaluation by document order."""
        tied = 0
        for a, b in zip(valid.query_offsets[:-1], valid.query_offsets[1:]):
            s, y = scores[a:b], valid.labels[a:b]
            kth = np.sort(s)[::-1][min(k, len(s)) - 1]
            top = s >= kth
            tied += any(len(np.unique(y[top & (s == v)])) > 1 or ((s == v) & ~top).any()
                        for v in np.unique(s[top]) if (s == v).sum() > 1)
        return tied / (len(valid.query_offsets) - 1)

    for k in (1, 5, 10):
        np.testing.assert_allclose(logs[f"val_metric/ndcg_{k}_exclude"], mean("exclude", f"ndcg@{k}"),
                                   rtol=1e-5)
        # TF-Ranking's own NDCG metric counts no-relevant lists as 0; its mean moves by at
        # most 1/Q per query whose top k has tied scores of different labels.
        assert abs(logs[f"val_metric/ndcg_{k}"] - mean("zero", f"ndcg@{k}")) <= (
            1e-5 + queries_tied_in_top(k))
    np.testing.assert_allclose(logs["val_metric/nerr_10"], mean("zero", "nerr@10"), rtol=1e-5)
    assert mean("exclude", "ndcg@5") != mean("zero", "ndcg@5")  # the rule matters on MQ2008


def test_multi_worker_through_the_strategy_hparam(fold, tmp_path):
    """A chief and a worker on 127.0.0.1 with hparams.strategy="MultiWorkerMirroredStrategy"
    end with identical weights; the chief exports the SavedModel into model_dir."""
    # A chief and a worker: TF-Ranking writes the chief's outputs to model_dir and
    # every other task's to model_dir/workertemp_<index>.
    codes, logs = run_cluster(
        ({"type": "chief", "index": 0}, {"type": "worker", "index": 0}),
        lambda index: [MULTI_WORKER_JOB, fold, tmp_path / "model",
                       tmp_path / f"weights_{index}.npz", index], cwd=tmp_path, timeout=300)
    for code, log in zip(codes, logs):
        assert code == 0, log[-4000:]
    assert_equal_weights([tmp_path / f"weights_{index}.npz" for index in range(2)])
    assert (tmp_path / "model" / "export" / "latest_model" / "saved_model.pb").is_file()
    assert (tmp_path / "model" / "workertemp_0" / "export" / "latest_model").is_dir()


# --------------------------------------------------------------------------- the builder


def test_builder_yields_tf_ranking_format_from_paths_and_data(fold, libsvm_builder):
    valid = libsvm_builder.valid_data
    features, labels = next(iter(libsvm_builder.build_valid_dataset()))
    assert sorted(features) == ["features", "list_mask"]
    assert features["features"].dtype == tf.float32 and features["list_mask"].dtype == tf.bool
    first = valid.list_sizes[:64]
    assert features["features"].shape == (64, first.max(), 46)
    np.testing.assert_array_equal(features["list_mask"].numpy().sum(axis=1), first)
    np.testing.assert_array_equal(labels.numpy()[0, :first[0]], valid.labels[:first[0]])
    np.testing.assert_array_equal(labels.numpy()[~features["list_mask"].numpy()], -1.0)
    np.testing.assert_array_equal(features["features"].numpy()[0, :first[0]],
                                  valid.features[:first[0]])
    # The same data given as LibSVMData, and TF-Ranking's DatasetHparams.
    hparams = tfr.keras.pipeline.DatasetHparams(
        train_input_pattern=str(fold / "train.txt"), valid_input_pattern=str(fold / "vali.txt"),
        train_batch_size=8, valid_batch_size=64, list_size=20)
    from_hparams = tfranking.LibSVMDatasetBuilder.from_hparams(hparams)
    features_2, _ = next(iter(from_hparams.build_train_dataset()))
    assert features_2["features"].shape == (8, 20, 46)
    from_data = tfranking.LibSVMDatasetBuilder(libsvm_builder.train_data, valid)
    np.testing.assert_array_equal(
        next(iter(from_data.build_valid_dataset()))[1].numpy()[:, :5],
        next(iter(tfranking.LibSVMDatasetBuilder(
            libsvm_builder.train_data, valid, train_batch_size=32).build_valid_dataset()))[1]
        .numpy()[:, :5])


def test_builder_reads_group_file_layout_beside_the_data(libsvm_builder, tmp_path):
    """LightGBM's layout (no qid:, counts in <file>.query) through the builder."""
    valid = libsvm_builder.valid_data
    for part, data in (("train", libsvm_builder.train_data), ("vali", valid)):
        tfrx.data.write_libsvm(data, tmp_path / f"{part}.txt", group_file=".query")
    assert "qid:" not in (tmp_path / "vali.txt").read_text()
    builder = tfranking.LibSVMDatasetBuilder(tmp_path / "train.txt", tmp_path / "vali.txt",
                                                 valid_batch_size=64)
    np.testing.assert_array_equal(builder.valid_data.query_offsets, valid.query_offsets)
    ours, theirs = (next(iter(b.build_valid_dataset())) for b in (builder, libsvm_builder))
    np.testing.assert_array_equal(ours[1].numpy(), theirs[1].numpy())
    np.testing.assert_array_equal(ours[0]["features"].numpy(), theirs[0]["features"].numpy())


def test_builder_zscore_signatures_take_raw_features(libsvm_builder, tmp_path):
    """With normalization="query_zscore", the predict signature z-scores each served
    list as the dataset did, so the SavedModel takes raw features."""
    builder = tfranking.LibSVMDatasetBuilder(
        libsvm_builder.train_data, libsvm_builder.valid_data, normalization="query_zscore",
        valid_batch_size=4)
    model = tfr.keras.model.ModelBuilder(
        input_creator=tfr.keras.model.FeatureSpecInputCreator(*builder.feature_specs()),
        preprocessor=tfr.keras.model.PreprocessorWithSpec({}),
        scorer=tfranking.UnivariateScorer("R2.L", hidden_units=8),
        mask_feature_name=builder.mask_feature_name, name="ranker").build()
    features, _ = next(iter(builder.build_valid_dataset()))  # z-scored by the dataset
    want = model(features, training=False).numpy()
    path = str(tmp_path / "saved")
    model.save(path, signatures=builder.build_signatures(model))
    valid = builder.valid_data
    lists = [valid.features[valid.query_offsets[q]:valid.query_offsets[q + 1]] for q in range(4)]
    predict = tf.saved_model.load(path).signatures["tensorflow/serving/predict"]
    got = predict(tf.constant([elwc_bytes(rows) for rows in lists]))["outputs"].numpy()
    mask = features["list_mask"].numpy()
    np.testing.assert_allclose(got[mask], want[mask], rtol=1e-4, atol=1e-5)


def test_builder_errors(libsvm_builder, tmp_path):
    train, valid = libsvm_builder.train_data, libsvm_builder.valid_data
    with pytest.raises(ValueError, match="`normalization` must be one of"):
        tfranking.LibSVMDatasetBuilder(train, valid, normalization="minmax")
    with pytest.raises(ValueError, match="must differ"):
        tfranking.LibSVMDatasetBuilder(train, valid, mask_feature_name="features")
    with pytest.raises(ValueError, match="`batch_size` must be an int >= 1"):
        tfranking.LibSVMDatasetBuilder(train, valid, train_batch_size=32, valid_batch_size=-2)
    with pytest.raises(TypeError, match="LibSVM/LETOR file path or a LibSVMData"):
        tfranking.LibSVMDatasetBuilder(train, 3)
    with pytest.raises(ValueError, match="`valid` has 45 features; `num_features` is 46"):
        narrow = tfrx.data.LibSVMData(valid.features[:, :45].copy(), valid.labels, valid.qids,
                                      valid.query_offsets)
        tfranking.LibSVMDatasetBuilder(train, narrow)
    with pytest.raises(FileNotFoundError):
        tfranking.LibSVMDatasetBuilder(tmp_path / "missing.txt", valid)
    pipeline = tfranking.SimplePipeline(
        model_builder(libsvm_builder.feature_specs(), "list_mask"), libsvm_builder,
        hparams_for(tmp_path, "no_such_loss"))
    with pytest.raises(ValueError, match="Unknown loss 'no_such_loss'. Known losses: "):
        pipeline.build_loss()


def test_univariate_scorer_scores_each_document_alone():
    scorer = tfranking.UnivariateScorer("CE3.L", hidden_units=8, batch_norm=False)
    features = tf.random.stateless_normal([2, 5, 4], seed=[1, 2])
    mask = tf.constant([[True] * 5, [True, True, True, False, False]])
    logits = scorer({}, {"features": features}, mask).numpy()
    # Changing one document's features changes its score only.
    changed = tf.tensor_scatter_nd_update(features, [[0, 2]], [[9.0, 9.0, 9.0, 9.0]])
    logits_2 = scorer({}, {"features": changed}, mask).numpy()
    assert logits.shape == (2, 5)
    assert logits_2[0, 2] != logits[0, 2]
    # A second call builds a second network, so compare structure, not values.
    with pytest.raises(ValueError, match="`notation` 'Q9' is not a known scorer"):
        tfranking.UnivariateScorer("Q9")
    with pytest.raises(ValueError, match=r"Example features \['other'\] not among"):
        tfranking.UnivariateScorer(feature_names=["other"])({}, {"features": features}, mask)


def test_listwise_scorer_scores_whole_lists_and_checks_its_notation():
    scorer = tfranking.ListwiseScorer("SA1", hidden_units=8, attention_heads=2)
    features = tf.random.stateless_normal([2, 5, 4], seed=[1, 2])
    mask = tf.constant([[True] * 5, [True, True, True, False, False]])
    logits = scorer({}, {"features": features}, mask).numpy()
    assert logits.shape == (2, 5) and np.isfinite(logits).all()
    with pytest.raises(ValueError, match="`notation` 'Q9' is not a known scorer"):
        tfranking.ListwiseScorer("Q9")
    with pytest.raises(ValueError, match=r"Example features \['other'\] not among"):
        tfranking.ListwiseScorer(feature_names=["other"])({}, {"features": features}, mask)


def test_listwise_scorer_trains_in_the_pipeline(short_lists_builder, tmp_path):
    builder = short_lists_builder
    context_spec, example_spec = builder.feature_specs()
    ranker = tfr.keras.model.ModelBuilder(
        input_creator=tfr.keras.model.FeatureSpecInputCreator(context_spec, example_spec),
        preprocessor=tfranking.QueryZScorePreprocessor(),
        scorer=tfranking.ListwiseScorer("SA1", hidden_units=8, attention_heads=2),
        mask_feature_name=builder.mask_feature_name, name="ranker")
    pipeline = RecordingPipeline(ranker, builder, hparams_for(tmp_path, "approx_ndcg"))
    pipeline.write_exports = False
    pipeline.train_and_validate()
    (logs,) = pipeline.recorder.logs
    assert np.isfinite(logs["loss"]) and 0.0 <= logs["val_metric/nerr_10"] <= 1.0
    # the built model scores in context: padding changes no score, another document does
    model = ranker.build()
    features = np.random.default_rng(0).normal(size=(1, 4, example_spec["features"].shape[0]))
    inputs = {"features": features.astype(np.float32),
              builder.mask_feature_name: np.array([[True, True, True, False]])}
    scores = model(inputs, training=False).numpy()
    inputs["features"][0, 3] = 50.0  # padding
    np.testing.assert_allclose(model(inputs, training=False).numpy()[0, :3], scores[0, :3],
                               rtol=1e-6, atol=1e-6)
    inputs["features"][0, 2] += 3.0  # a valid document
    assert np.abs(model(inputs, training=False).numpy()[0, 0] - scores[0, 0]) > 1e-5


# --------------------------------------------------------------------------- the old name


@pytest.mark.parametrize("statement", [
    "import tfr_extensions.pipeline as old", "from tfr_extensions import pipeline as old",
    "old = tfrx.pipeline", "from tfr_extensions.pipeline import SimplePipeline"])
def test_the_old_module_name_warns_and_is_the_new_module(statement, monkeypatch):
    """``tfr_extensions.pipeline``, ``tfr_extensions.tfranking``'s old name, as a fresh
    interpreter sees it: a DeprecationWarning at the user's line, the same objects."""
    monkeypatch.delitem(sys.modules, "tfr_extensions.pipeline", raising=False)
    if "pipeline" in vars(tfrx):
        monkeypatch.delattr(tfrx, "pipeline")
    namespace = {"tfrx": tfrx}
    with pytest.warns(DeprecationWarning, match="it is now tfr_extensions.tfranking") as record:
        exec(compile(statement, "user_code.py", "exec"), namespace)  # noqa: S102
    assert [warning.filename for warning in record] == ["user_code.py"]
    if "old" in namespace:
        assert namespace["old"] is tfranking
    else:
        assert namespace["SimplePipeline"] is tfranking.SimplePipeline
