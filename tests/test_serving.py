"""SavedModel export: every signature, loaded in a fresh TensorFlow-only process, gives
the model's scores on raw features, for this stack's export and for the other stacks'
exports; PredictRequests match the signatures."""
import base64
import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from tfr_extensions.backend import keras
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_serving.apis import input_pb2
from tensorflow_serving.apis import predict_pb2

from pipelines.common import split_queries
from support import stack
from support.stack import OTHER_STACKS, stack_python
from tfr_extensions import data as tfrx_data
from tfr_extensions import models
from tfr_extensions import serving

F = 4
LENGTHS = (5, 3, 1)

# Runs in a fresh interpreter: loads the SavedModel with TensorFlow alone and
# prints every signature's outputs as JSON.
LOADER = textwrap.dedent("""
    import base64, json, sys
    import tensorflow as tf
    path, inputs = sys.argv[1], json.load(open(sys.argv[2]))
    loaded = tf.saved_model.load(path)
    decode = lambda items: tf.constant([base64.b64decode(s) for s in items])
    out = {
        "signatures": sorted(loaded.signatures),
        "serving_default": loaded.signatures["serving_default"](
            inputs=decode(inputs["elwc"]))["outputs"].numpy().tolist(),
        "predict": loaded.signatures["tensorflow/serving/predict"](
            inputs=decode(inputs["elwc"]))["outputs"].numpy().tolist(),
        "regress": loaded.signatures["tensorflow/serving/regress"](
            inputs=decode(inputs["examples"]))["outputs"].numpy().tolist(),
        "predict_dense": loaded.signatures["predict_dense"](
            features=tf.constant(inputs["features"], tf.float32),
            list_lengths=tf.constant(inputs["lengths"], tf.int32))["scores"].numpy().tolist(),
        "foreign_modules": sorted(m for m in sys.modules
                                  if m.split(".")[0] in ("tfr_extensions", "tensorflow_ranking")),
    }
    print("RESULT" + json.dumps(out))
""")


def example(vector) -> tf.train.Example:
    return tf.train.Example(features=tf.train.Features(feature={
        "features": tf.train.Feature(float_list=tf.train.FloatList(value=list(vector)))}))


def elwc(document_vectors) -> bytes:
    proto = input_pb2.ExampleListWithContext()
    for vector in document_vectors:
        proto.examples.add().CopyFrom(example(vector))
    return proto.SerializeToString()


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    rng = np.random.default_rng(0)
    model = models.scorer("CE4.L", F, hidden_units=8)
    # move batch-norm statistics away from their initial values
    model.get_layer("batch_norm_0").moving_mean.assign(rng.normal(size=8).astype(np.float32))
    features = rng.normal(5.0, 3.0, size=(len(LENGTHS), max(LENGTHS), F)).astype(np.float32)
    mask = np.arange(max(LENGTHS))[None] < np.array(LENGTHS)[:, None]
    features[~mask] = 0.0
    want = model({"features": features, "mask": mask}, training=False).numpy()
    path = str(tmp_path_factory.mktemp("saved_models") / "demo" / "1")
    serving.export(model, path, metadata={"note": "test"})
    return model, path, features, mask, want


def serve_in_fresh_process(path, features) -> dict:
    """Every signature's outputs, from LOADER run by a fresh interpreter (TensorFlow only)."""
    inputs = {
        "elwc": [base64.b64encode(elwc(features[i, :n])).decode() for i, n in enumerate(LENGTHS)],
        "examples": [base64.b64encode(example(v).SerializeToString()).decode()
                     for v in features[0, :LENGTHS[0]]],
        "features": features.tolist(), "lengths": list(LENGTHS)}
    inputs_path = os.path.join(os.path.dirname(path), "inputs.json")
    with open(inputs_path, "w") as f:
        json.dump(inputs, f)
    proc = subprocess.run([sys.executable, "-c", LOADER, path, inputs_path],
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
                          capture_output=True, text=True, timeout=240,
                          cwd=os.path.dirname(path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.split("RESULT", 1)[1])


def assert_serves(out, mask, want):
    assert out["foreign_modules"] == []
    assert out["signatures"] == sorted(serving.SIGNATURE_KEYS)
    for key in ("serving_default", "predict", "predict_dense"):
        got = np.asarray(out[key])
        np.testing.assert_allclose(got[mask], want[mask], rtol=1e-5, atol=1e-5, err_msg=key)
    # regress: the request's tf.Examples form one list (here the first query)
    np.testing.assert_allclose(out["regress"], want[0, :LENGTHS[0]], rtol=1e-5, atol=1e-5)


def test_fresh_tensorflow_process_reproduces_scores(exported):
    _, path, features, mask, want = exported
    assert_serves(serve_in_fresh_process(path, features), mask, want)


def test_a_context_aware_scorer_serves_whole_lists(tmp_path):
    """``SA<n>``: each signature (ELWC, tf.Example, dense) scores a request's list at
    once, each document in the context of the list's other documents."""
    model = models.scorer("SA2", F, hidden_units=8, attention_heads=2)
    features = np.random.default_rng(1).normal(2.0, 3.0, size=(len(LENGTHS), max(LENGTHS), F))
    features = features.astype(np.float32)
    mask = np.arange(max(LENGTHS))[None] < np.array(LENGTHS)[:, None]
    features[~mask] = 0.0
    want = model({"features": features, "mask": mask}, training=False).numpy()
    path = str(tmp_path / "context_aware" / "1")
    serving.export(model, path)
    assert_serves(serve_in_fresh_process(path, features), mask, want)


# Runs on the other stack: builds and exports a scorer, prints its scores.
EXPORTER = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorflow as tf
    from tfr_extensions import models, serving
    path, features_path, lengths = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    features = np.load(features_path)
    mask = np.arange(features.shape[1])[None] < np.array(lengths)[:, None]
    tf.keras.utils.set_random_seed(7)
    model = models.scorer("CE4.L", features.shape[2], hidden_units=8)
    model.get_layer("batch_norm_0").moving_mean.assign(np.linspace(-1, 1, 8, dtype=np.float32))
    scores = model({"features": features, "mask": mask}, training=False).numpy()
    serving.export(model, path)
    print("RESULT" + json.dumps({"scores": scores.tolist(), "tf": tf.__version__}))
""")


# Each stack serves the models the other two export: the six ordered pairs of the three
# TensorFlow stacks, each once in CI.
@pytest.mark.parametrize("other", OTHER_STACKS)
def test_this_stack_serves_a_model_exported_on_another_one(exported, tmp_path, other):
    _, _, features, mask, _ = exported
    python, env = stack_python(other)
    np.save(tmp_path / "features.npy", features)
    path = str(tmp_path / "other" / "1")
    proc = subprocess.run([python, "-c", EXPORTER, path, str(tmp_path / "features.npy"),
                           json.dumps(list(LENGTHS))], env=env, capture_output=True,
                          text=True, timeout=240, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    exported_there = json.loads(proc.stdout.split("RESULT", 1)[1])
    assert exported_there["tf"].startswith("2.15." if other == "tf215" else "2.21.")
    assert_serves(serve_in_fresh_process(path, features), mask,
                  np.asarray(exported_there["scores"]))


def test_predict_requests_match_signature_specs(exported):
    _, path, features, mask, want = exported
    loaded = tf.saved_model.load(path)
    requests = {
        "predict_dense": {"features": features, "list_lengths": np.array(LENGTHS, np.int32)},
        "tensorflow/serving/predict": {"inputs": np.array(
            [elwc(features[i, :n]) for i, n in enumerate(LENGTHS)], dtype=object)},
        "serving_default": {"inputs": np.array(
            [elwc(features[i, :n]) for i, n in enumerate(LENGTHS)], dtype=object)},
        "tensorflow/serving/regress": {"inputs": np.array(
            [example(v).SerializeToString() for v in features[0, :LENGTHS[0]]], dtype=object)},
    }
    for signature_name, tensors in requests.items():
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "demo"
        request.model_spec.signature_name = signature_name
        for key, value in tensors.items():
            request.inputs[key].CopyFrom(tf.make_tensor_proto(value))
        signature = loaded.signatures[request.model_spec.signature_name]
        _, specs = signature.structured_input_signature
        assert set(request.inputs) == set(specs), signature_name
        feed = {}
        for key, proto in request.inputs.items():
            assert tf.dtypes.as_dtype(proto.dtype) == specs[key].dtype, (signature_name, key)
            assert specs[key].shape.is_compatible_with(tf.TensorShape(proto.tensor_shape))
            feed[key] = tf.constant(tf.make_ndarray(proto))
        scores = next(iter(signature(**feed).values())).numpy()
        if signature_name == "tensorflow/serving/regress":  # one list: the first query
            scores, expected = scores[None], want[:1, :LENGTHS[0]]
        else:
            scores, expected = scores[mask], want[mask]
        np.testing.assert_allclose(scores.ravel(), expected.ravel(), rtol=1e-5, atol=1e-5,
                                   err_msg=signature_name)


def test_saved_model_metadata_and_method_names(exported):
    _, path, *_ = exported
    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    signatures = proto.meta_graphs[0].signature_def
    assert signatures["tensorflow/serving/regress"].method_name == "tensorflow/serving/regress"
    assert signatures["tensorflow/serving/predict"].method_name == "tensorflow/serving/predict"
    facts = json.load(open(os.path.join(path, "assets.extra", "tfrx.json")))
    assert facts["num_features"] == F and facts["note"] == "test"


def test_export_refuses_to_overwrite_and_validates(exported):
    model, path, *_ = exported
    with pytest.raises(ValueError, match="export_dir"):
        serving.export(model, path)
    with pytest.raises(ValueError, match="num_features"):
        serving.export(keras.Sequential(), path + "_other")


@pytest.mark.parametrize("features_shape,lengths,message", [
    ((3, 5, F + 1), [5, 3, 1], r"`features` must be float32 \[batch, list_size, 4\]; got shape"),
    ((3, 5), [5, 3, 1], r"`features` must be float32 \[batch, list_size, 4\]; got shape"),
    ((3, 5, F), [5, 3], r"`list_lengths` must be int32 \[batch\], one length per list"),
    ((3, 5, F), [[5, 3, 1]], r"`list_lengths` must be int32 \[batch\], one length per list"),
    ((3, 5, F), [6, 3, 1], r"`list_lengths` must be in \[0, list_size\]"),
    ((3, 5, F), [5, -1, 1], r"`list_lengths` must be in \[0, list_size\]"),
])
def test_predict_dense_rejects_bad_shapes_naming_the_input(exported, features_shape, lengths,
                                                           message):
    _, path, *_ = exported
    signature = tf.saved_model.load(path).signatures["predict_dense"]
    with pytest.raises(tf.errors.InvalidArgumentError, match="predict_dense: " + message):
        signature(features=tf.ones(features_shape), list_lengths=tf.constant(lengths, tf.int32))


@pytest.mark.parametrize("bad_value", [np.nan, np.inf, -np.inf])
def test_a_non_finite_document_scores_nan_and_no_other_score_moves(exported, bad_value):
    """The policy of every signature: the document is scored NaN, and the others
    get exactly the scores of their list without it."""
    model, path, features, mask, want = exported
    loaded = tf.saved_model.load(path)
    bad = features.copy()
    bad[0, 2, 1] = bad_value  # list 0 (5 documents), document 2
    keep = [0, 1, 3, 4]
    without = np.zeros_like(features[:1])
    without[0, :4] = features[0, keep]
    expected = model({"features": without, "mask": np.arange(5)[None] < 4},
                     training=False).numpy()[0, :4]
    dense = loaded.signatures["predict_dense"](
        features=tf.constant(bad), list_lengths=tf.constant(LENGTHS, tf.int32))["scores"].numpy()
    elwcs = tf.constant([elwc(bad[i, :n]) for i, n in enumerate(LENGTHS)])
    predict = loaded.signatures["tensorflow/serving/predict"](inputs=elwcs)["outputs"].numpy()
    for scores in (dense, predict):
        assert np.isnan(scores[0, 2])
        np.testing.assert_allclose(scores[0, keep], expected, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(scores[1:][mask[1:]], want[1:][mask[1:]], rtol=1e-5, atol=1e-6)


def test_garbage_bytes_fail_with_a_clear_error(exported):
    _, path, *_ = exported
    loaded = tf.saved_model.load(path)
    garbage = tf.constant([b"\x0a\xff\xff\xff\xff\x0fnot a proto"])
    for name in ("tensorflow/serving/predict", "serving_default"):
        with pytest.raises((tf.errors.DataLossError, tf.errors.InvalidArgumentError),
                           match="parse_inputs_as_ExampleListWithContext"):
            loaded.signatures[name](inputs=garbage)
    # (TensorFlow's message quotes the bytes: ASCII here, which Python's client can decode)
    with pytest.raises(tf.errors.InvalidArgumentError, match="Could not parse example input"):
        loaded.signatures["tensorflow/serving/regress"](inputs=tf.constant([b"\x0anot a proto"]))


# Runs without TensorFlow (``import tensorflow`` fails in it) on Keras's JAX backend:
# trains with the job, then scores the features with the saved model.keras.
JAX_TRAINER = textwrap.dedent("""
    import json, runpy, sys
    sys.modules["tensorflow"] = None  # as on a machine without TensorFlow
    fold, output, features_path, lengths = sys.argv[1:5]
    sys.argv = ["pipelines.train", "--data", fold, "--scorer", "SA1", "--hidden-units", "8",
                "--epochs", "2", "--steps-per-epoch", "4", "--batch-size", "4",
                "--no-tensorboard", "--verbose", "0", "--output-dir", output,
                "--export-dir", output + "/export"]
    runpy.run_module("pipelines.train", run_name="__main__")
    import keras, numpy as np
    features = np.load(features_path)
    mask = np.arange(features.shape[1])[None] < np.array(json.loads(lengths))[:, None]
    model = keras.models.load_model(output + "/model.keras")
    scores = keras.ops.convert_to_numpy(model({"features": features, "mask": mask}))
    print("RESULT" + json.dumps({"scores": scores.tolist(), "backend": keras.backend.backend(),
                                 "tensorflow": "tensorflow" in sys.modules
                                 and sys.modules["tensorflow"] is not None}))
""")


@pytest.mark.skipif(not models.USES_KERAS_OPS or importlib.util.find_spec("jax") is None,
                    reason="needs Keras 3 with JAX installed beside TensorFlow (keras3 stack)")
def test_trained_on_jax_exported_on_tensorflow_served_by_tensorflow_alone(exported, tmp_path):
    """The whole route of a JAX user: ``tfrx-train`` on JAX without TensorFlow writes
    model.keras and prints the export command; ``tfrx-export`` writes the SavedModel on
    TensorFlow; a TensorFlow-only process serves the JAX model's scores. The model is the
    self-attention scorer (``SA1``), whose scores depend on the whole list: the served
    signatures must hand it each list whole."""
    _, _, features, mask, _ = exported
    fold = tmp_path / "fold"
    fold.mkdir()
    data = tfrx_data.synthetic(num_queries=30, num_features=F, seed=5, list_size=(3, 9))
    for part, subset in zip(("train", "vali", "test"), split_queries(data, (3, 1, 1), seed=0)):
        tfrx_data.write_libsvm(subset, fold / f"{part}.txt")
    features_path = tmp_path / "features.npy"
    np.save(features_path, features)
    output = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    env.update(KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", PYTHONPATH=str(stack.REPO))
    trained = subprocess.run([sys.executable, "-c", JAX_TRAINER, str(fold), str(output),
                              str(features_path), json.dumps(list(LENGTHS))],
                             env=env, capture_output=True, text=True, timeout=600,
                             cwd=str(stack.REPO))
    assert trained.returncode == 0, trained.stderr[-3000:]
    result = json.loads(trained.stdout.split("RESULT", 1)[1])
    assert result["backend"] == "jax" and not result["tensorflow"]
    command = f"tfrx-export {output}/model.keras {output}/export"
    assert command in trained.stdout  # the one command that exports it
    assert not (output / "export").exists()
    export_dir = tmp_path / "saved_models" / "ranker" / "1"
    exporter = subprocess.run(
        [sys.executable, "-m", "pipelines.export", str(output / "model.keras"), str(export_dir)],
        env=env, capture_output=True, text=True, timeout=600, cwd=str(stack.REPO))
    assert exporter.returncode == 0, exporter.stderr[-3000:]
    want = np.asarray(result["scores"], np.float32)
    assert_serves(serve_in_fresh_process(str(export_dir), features), mask, want)
