"""The scorers (:mod:`tfr_extensions.models`) on every Keras 3 backend, with or without
TensorFlow: values against the NumPy oracle (:mod:`support.oracles_models`), the
``keras.ops`` z-score on its own, properties (masking = deleting, permutations, per-query
affine maps, NaN isolation), ``.keras`` round trips, and one set of weights scored by
TensorFlow, JAX and PyTorch alike.

Imports keras, numpy, pytest, tfr_extensions and ``support`` only, so it runs where
TensorFlow is not installed (``KERAS_BACKEND=jax`` or ``torch``).
"""
import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from tfr_extensions import backend

if not backend.IS_KERAS_3:
    pytest.skip("Keras 2: the scorers compute with TensorFlow's ops there (tests/test_models.py); "
                "this suite is Keras 3's keras.ops implementation", allow_module_level=True)

import keras  # noqa: E402
from keras import ops  # noqa: E402

import tfr_extensions.models as models  # noqa: E402
from tfr_extensions.keras_ops import normalization  # noqa: E402
from support import oracles_models as oracle  # noqa: E402

BACKEND = keras.backend.backend()
REPO = pathlib.Path(__file__).resolve().parents[2]
F = 5
HIDDEN = 8
LENGTHS = (6, 4, 1)


def to_numpy(x) -> np.ndarray:
    return np.asarray(ops.convert_to_numpy(x))


def make_batch(seed=0, lengths=LENGTHS, list_size=6, garbage=1e3):
    """Features ``[3, 6, F]`` (float32) with padding holding ``garbage``, a feature
    constant within the first list, and the bool mask of ``lengths``."""
    rng = np.random.default_rng(seed)
    features = rng.normal(3.0, 2.0, size=(len(lengths), list_size, F)).astype(np.float32)
    mask = np.arange(list_size)[None, :] < np.asarray(lengths)[:, None]
    features[0, :, 4] = 7.0
    features[~mask] = garbage
    return features, mask


def randomize(model, seed=1):
    """Sets non-trivial weights and moving statistics; returns them for the oracle."""
    rng = np.random.default_rng(seed)
    hidden_layers = []
    for i, dense in enumerate(model.dense_layers):
        fan_in, units = tuple(dense.kernel.shape)
        kernel = rng.normal(0.0, 2.0 / np.sqrt(fan_in), (fan_in, units)).astype(np.float32)
        bias = rng.normal(0.0, 0.3, units).astype(np.float32)
        dense.set_weights([kernel, bias])
        layer = {"kernel": kernel, "bias": bias}
        if model.norm_layers:
            stats = [rng.uniform(0.5, 1.5, units), rng.normal(0.0, 0.3, units),
                     rng.normal(0.0, 0.5, units), rng.uniform(0.3, 2.0, units)]
            stats = [s.astype(np.float32) for s in stats]
            model.norm_layers[i].set_weights(stats)
            layer["batch_norm"] = stats
        hidden_layers.append(layer)
    fan_in = tuple(model.output_layer.kernel.shape)[0]
    output = (rng.normal(0.0, 2.0 / np.sqrt(fan_in), (fan_in, 1)).astype(np.float32),
              rng.normal(0.0, 0.3, 1).astype(np.float32))
    model.output_layer.set_weights(list(output))
    return hidden_layers, output


def score(model, features, mask=None, training=False):
    inputs = {"features": features} if mask is None else {"features": features, "mask": mask}
    return to_numpy(model(inputs, training=training))


# -- 1. values against the NumPy oracle -------------------------------------------------


@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
@pytest.mark.parametrize("notation", ["R4.L", "CE5", "GE5", "B64"])
def test_scores_match_the_numpy_oracle(notation, training):
    model = models.scorer(notation, F, hidden_units=HIDDEN)
    hidden_layers, output = randomize(model)
    features, mask = make_batch()
    widths, activation, output_activation = oracle.architecture(notation, HIDDEN)
    assert [layer["kernel"].shape[1] for layer in hidden_layers] == widths
    want, moments = oracle.scorer_scores(features, mask, hidden_layers, output, activation,
                                         output_activation, training=training)
    got = score(model, features, mask, training=training)
    assert keras.backend.standardize_dtype(model({"features": features}).dtype) == "float32"
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert np.std(want[mask]) > 0.1  # not a degenerate network
    first_norm = model.norm_layers[0]
    moving_mean = to_numpy(first_norm.moving_mean)
    if training:  # moving statistics take a step towards the valid documents' moments
        start = hidden_layers[0]["batch_norm"][2]
        want_mean = (oracle.BATCH_NORM_MOMENTUM * start
                     + (1 - oracle.BATCH_NORM_MOMENTUM) * moments[0][0])
        np.testing.assert_allclose(moving_mean, want_mean, rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_array_equal(moving_mean, hidden_layers[0]["batch_norm"][2])


def test_without_normalization_or_batch_norm_matches_the_oracle():
    model = models.scorer("CE4.L", F, hidden_units=HIDDEN, batch_norm=False,
                          normalization="none")
    hidden_layers, output = randomize(model, seed=4)
    features, mask = make_batch(garbage=0.0)
    want, _ = oracle.scorer_scores(features / 4, mask, hidden_layers, output, "celu", False,
                                   training=True, normalization=False)
    np.testing.assert_allclose(score(model, features / 4, mask, training=True), want,
                               rtol=1e-4, atol=1e-5)


def test_keras_ops_query_zscore_matches_the_oracle():
    features, mask = make_batch(garbage=float("nan"))
    features[1, 2, 3] = np.inf  # a valid document with a non-finite feature
    want = oracle.query_zscore(features, mask)
    got = to_numpy(normalization.query_zscore(features, mask))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)  # NaN where NaN
    assert np.isnan(got[1, 2]).all() and not np.isnan(np.delete(got, 2, axis=1)).any()
    assert (got[0, :, 4] == 0).all() and (got[~mask] == 0).all()
    assert keras.backend.standardize_dtype(got.dtype) == "float32"
    # a numeric mask (int8, as tfrx.data.numeric_masks gives) means non-zero = valid
    np.testing.assert_array_equal(
        to_numpy(normalization.query_zscore(features, mask.astype(np.int8) * 3)), got)
    # float64 in, float64 out, where the backend keeps float64 (JAX needs jax_enable_x64)
    features64 = ops.convert_to_tensor(features.astype(np.float64))
    out64 = normalization.query_zscore(features64, mask)
    assert (keras.backend.standardize_dtype(out64.dtype)
            == keras.backend.standardize_dtype(features64.dtype))
    np.testing.assert_allclose(to_numpy(out64), want, rtol=1e-5, atol=1e-6)
    # all-padding lists and a mask left out
    np.testing.assert_array_equal(
        to_numpy(normalization.query_zscore(features, np.zeros_like(mask))), 0.0)
    np.testing.assert_allclose(to_numpy(normalization.query_zscore(features[2:, :1])),
                               np.zeros((1, 1, F)))
    with pytest.raises(ValueError, match="features"):
        normalization.query_zscore(features[0], mask[0])


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                    reason="compares with the TensorFlow z-score: needs TensorFlow (keras3 stack)")
def test_keras_ops_query_zscore_equals_the_tensorflow_one():
    # pylint: disable-next=import-outside-toplevel
    from tfr_extensions.data import normalization as tf_normalization
    features, mask = make_batch(garbage=float("nan"))
    features[1, 2, 3] = np.nan
    np.testing.assert_allclose(to_numpy(normalization.query_zscore(features, mask)),
                               tf_normalization.query_zscore(features, mask).numpy(),
                               rtol=1e-5, atol=1e-6)


# -- 2. properties ------------------------------------------------------------------------


@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
def test_masking_is_deleting_documents(training):
    """Masked documents anywhere in a list (holding garbage) score what the batch with
    them deleted scores, batch-norm moments included."""
    model = models.scorer("CE5", F, hidden_units=HIDDEN)
    randomize(model)
    features, _ = make_batch(garbage=0.0)
    mask = np.array([[1, 0, 1, 1, 0, 1], [0, 1, 1, 0, 1, 0], [0, 0, 0, 1, 0, 0]], bool)
    noisy = np.where(mask[..., None], features, np.float32(-5e3))
    compact = np.zeros_like(features)
    compact_mask = np.zeros_like(mask)
    for q in range(len(mask)):
        kept = features[q, mask[q]]
        compact[q, :len(kept)] = kept
        compact_mask[q, :len(kept)] = True
    got = score(model, noisy, mask, training=training)
    want = score(model, compact, compact_mask, training=training)
    np.testing.assert_allclose(got[mask], want[compact_mask], rtol=1e-5, atol=1e-6)
    assert np.isfinite(got).all()
    # no mask = every document valid
    np.testing.assert_array_equal(score(model, features, training=training),
                                  score(model, features, np.ones_like(mask), training=training))


@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
def test_permuting_documents_permutes_scores(training):
    model = models.scorer("GE5", F, hidden_units=HIDDEN)
    randomize(model)
    features, mask = make_batch()
    perm = np.random.default_rng(3).permutation(features.shape[1])
    np.testing.assert_allclose(score(model, features[:, perm], mask[:, perm], training),
                               score(model, features, mask, training)[:, perm],
                               rtol=1e-5, atol=1e-6)


def test_per_query_affine_maps_leave_scores_unchanged():
    model = models.scorer("R4.L", F, hidden_units=HIDDEN)
    randomize(model)
    features, mask = make_batch()
    rng = np.random.default_rng(5)
    scale = rng.uniform(0.2, 5.0, size=(3, 1, F)).astype(np.float32)
    shift = rng.normal(0.0, 20.0, size=(3, 1, F)).astype(np.float32)
    mapped = features * scale + shift
    for training in (False, True):
        np.testing.assert_allclose(score(model, mapped, mask, training)[mask],
                                   score(model, features, mask, training)[mask],
                                   rtol=1e-4, atol=1e-4)
    raw = models.scorer("R4.L", F, hidden_units=HIDDEN, normalization="none")
    randomize(raw)
    assert not np.allclose(score(raw, mapped, mask)[mask], score(raw, features, mask)[mask],
                           atol=1e-2)


def test_a_nan_feature_makes_only_its_document_nan():
    model = models.scorer("CE4.L", F, hidden_units=HIDDEN)
    randomize(model)
    features, mask = make_batch()
    broken = features.copy()
    broken[0, 2, 1] = np.nan  # a valid document
    broken[1, 5, :] = np.nan  # padding
    got = score(model, broken, mask)
    assert np.isnan(got[0, 2]) and np.isnan(got).sum() == 1
    without = mask.copy()
    without[0, 2] = False  # the NaN document deleted: every other score as before
    np.testing.assert_allclose(got[without], score(model, features, without)[without],
                               rtol=1e-5, atol=1e-6)


def test_numeric_masks_and_mixed_float16():
    model = models.scorer("B64", F)
    randomize(model)
    features, mask = make_batch()
    for numeric in (np.int8, np.int32, np.float32):
        np.testing.assert_array_equal(score(model, features, mask.astype(numeric)),
                                      score(model, features, mask))
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16")
    try:
        half = models.scorer("CE4.L", F, hidden_units=HIDDEN)
        scores = half({"features": features * 1e5, "mask": mask}, training=True)
    finally:
        keras.config.set_dtype_policy(previous)
    assert half.dense_layers[0].compute_dtype == "float16"
    assert keras.backend.standardize_dtype(scores.dtype) == "float32"
    assert np.isfinite(to_numpy(scores)).all()  # features past float16's range z-scored first


def test_a_fit_step_on_the_backends_trainer():
    """``model.fit`` (jitted on JAX, compiled on TensorFlow, eager on PyTorch) trains the
    weights and moves the moving variances toward the valid documents' moments."""
    model = models.scorer("CE4.L", F, hidden_units=4)
    features, mask = make_batch()
    labels = np.where(mask, features[..., 0] / 10, 0.0).astype(np.float32)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    kernel = to_numpy(model.dense_layers[0].kernel)
    history = model.fit({"features": features, "mask": mask}, labels, batch_size=3, epochs=2,
                        verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert not np.allclose(to_numpy(model.dense_layers[0].kernel), kernel)
    # (z-scored features have mean 0 per list, so the first moving mean stays near 0)
    assert not np.allclose(to_numpy(model.norm_layers[0].moving_variance), 1.0, atol=1e-3)


def _fit_twin(wrap: bool):
    """Losses of 4 ``fit`` steps of the twin-sigmoid (seeded tie breaking; every list
    tied, so each step's draw decides its ranks) and the generator's state after them."""
    import tfr_extensions as tfrx  # pylint: disable=import-outside-toplevel
    keras.utils.set_random_seed(0)
    scorer = models.scorer("R2.L", F, hidden_units=4)
    for variable in scorer.trainable_variables:  # constant scores: every document tied
        variable.assign(np.zeros(variable.shape, "float32"))
    loss = tfrx.losses.get("twin_ndcg_type3", seed=5)
    model = models.TrainingModel(scorer, loss) if wrap else scorer
    model.compile(optimizer=keras.optimizers.SGD(0.0), loss=loss)
    features, mask = make_batch()
    labels = np.where(mask, np.arange(6)[None, :] % 3, -1).astype(np.float32)
    history = model.fit({"features": features, "mask": mask}, labels, batch_size=3, epochs=4,
                        verbose=0, shuffle=False)
    (generator,) = loss.seed_generators()
    return history.history["loss"], to_numpy(generator.state), model, scorer


@pytest.mark.skipif(BACKEND == "tensorflow", reason="on TensorFlow a seeded loss counts its "
                    "steps in a variable of its own (no SeedGenerator to carry)")
def test_a_training_model_threads_the_losss_seeds_through_the_trainer(monkeypatch):
    """:class:`models.TrainingModel` makes a seeded loss's generator the model's own: the
    steps draw the same stream as the loss alone, and on JAX no step asks the host."""
    from tfr_extensions.keras_ops import random as keras_random  # pylint: disable=import-outside-toplevel
    alone, alone_state, _, _ = _fit_twin(wrap=False)
    assert len(set(alone)) > 1, alone  # (the draws decide each step's value)

    def host_path(self):
        raise AssertionError("the host path traced in a step the trainer threads")
    if BACKEND == "jax":  # (Keras's symbolic build traces the loss once outside any step)
        monkeypatch.setattr(keras_random.SeedGenerator, "_host_next", host_path)
    wrapped, state, model, scorer = _fit_twin(wrap=True)
    np.testing.assert_allclose(wrapped, alone, rtol=1e-6)
    np.testing.assert_array_equal(state, alone_state)
    assert int(state[1]) == 4  # one seed per step
    carried = [v for v in model.non_trainable_variables
               if not any(v is w for w in scorer.non_trainable_variables)]
    assert len(carried) == 1 and carried[0] is model.loss_seed_generators[0].state
    assert not any(v is carried[0] for v in scorer.weights)  # the scorer saves no loss state


# -- 3. serialization -----------------------------------------------------------------------


def test_keras_file_and_config_round_trip(tmp_path):
    model = models.scorer("GE5", F, hidden_units=HIDDEN, l2=1e-3)
    randomize(model)
    features, mask = make_batch()
    path = str(tmp_path / "scorer.keras")
    model.save(path)
    restored = keras.models.load_model(path)
    assert type(restored) is models.Scorer
    assert restored.get_config() == model.get_config()
    layer_and_weight = lambda m: [w.path.split("/")[-2:] for w in m.weights]  # noqa: E731
    assert layer_and_weight(restored) == layer_and_weight(model)  # layer/weight names as saved
    np.testing.assert_array_equal(score(restored, features, mask), score(model, features, mask))
    np.testing.assert_allclose(score(restored, features, mask, training=True),
                               score(model, features, mask, training=True), rtol=1e-6)
    clone = keras.saving.deserialize_keras_object(
        json.loads(json.dumps(keras.saving.serialize_keras_object(model))))
    assert clone.get_config() == model.get_config()


def test_export_needs_the_tensorflow_backend(tmp_path):
    if BACKEND == "tensorflow":
        pytest.skip("the TensorFlow backend exports (tests/test_models.py, tests/test_serving.py)")
    model = models.scorer("R1.L", F, hidden_units=4)
    with pytest.raises(backend.UnsupportedBackendError, match="tfrx-export") as error:
        model.export(str(tmp_path / "export"))
    assert "TensorFlow backend" in str(error.value) and repr(BACKEND) in str(error.value)
    assert not (tmp_path / "export").exists()


# -- 4. one set of weights on TensorFlow, JAX and PyTorch ----------------------------------

CROSS_BACKEND_SCRIPT = r"""
import sys
sys.modules["tensorflow"] = None  # JAX and PyTorch run as where TensorFlow is not installed
import numpy as np
import keras
from keras import ops
import tfr_extensions.models as models

work, notation, backend = sys.argv[1], sys.argv[2], keras.backend.backend()
batch = np.load(f"{work}/batch.npz")
inputs = {"features": batch["features"], "mask": batch["mask"]}
model = models.scorer(notation, batch["features"].shape[-1], hidden_units=16)
model.load_weights(f"{work}/scorer.weights.h5")
loaded = keras.models.load_model(f"{work}/tensorflow.keras")
out = {"inference": model(inputs, training=False),
       "loaded": loaded(inputs, training=False)}
model.save(f"{work}/{backend}.keras")  # before training moves the moving statistics
out["training"] = model(inputs, training=True)
np.savez(f"{work}/{backend}.npz", **{k: ops.convert_to_numpy(v) for k, v in out.items()})
"""
OTHER_BACKENDS = ("jax", "torch")
MISSING = [name for name in ("tensorflow",) + OTHER_BACKENDS
           if importlib.util.find_spec(name) is None]


@pytest.mark.skipif(bool(MISSING), reason=(
    f"cross-backend test: needs TensorFlow, JAX and PyTorch in one venv (runs on the keras3 "
    f"stack); {', '.join(MISSING)} not installed here"))
@pytest.mark.skipif(BACKEND != "tensorflow", reason=(
    "cross-backend test: runs once, under the keras3 stack's default KERAS_BACKEND=tensorflow "
    "(it starts a JAX and a PyTorch process itself)"))
@pytest.mark.parametrize("notation", ["GE4.L", "SA2"])  # feed-forward, context-aware
def test_tensorflow_jax_and_torch_score_the_same(tmp_path, notation):
    """One set of weights (and ``.keras`` files saved on each backend) scores one batch
    the same on TensorFlow (this process), JAX and PyTorch (one process each, which cannot
    import TensorFlow, as on the jax and torch stacks), in inference and in training."""
    built = models.scorer(notation, F, hidden_units=16)
    randomize(built, seed=7)
    built.save_weights(str(tmp_path / "scorer.weights.h5"))
    built.save(str(tmp_path / "tensorflow.keras"))
    features, mask = make_batch(seed=8)
    np.savez(tmp_path / "batch.npz", features=features, mask=mask)
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    env.update(JAX_PLATFORMS="cpu", CUDA_VISIBLE_DEVICES="")
    runs = {name: subprocess.Popen(
        [sys.executable, "-c", CROSS_BACKEND_SCRIPT, str(tmp_path), notation], cwd=str(REPO),
        env=dict(env, KERAS_BACKEND=name), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True) for name in OTHER_BACKENDS}
    # TensorFlow: what each of those processes does, here
    model = models.scorer(notation, F, hidden_units=16)
    model.load_weights(str(tmp_path / "scorer.weights.h5"))
    want = {"inference": score(model, features, mask),
            "training": score(model, features, mask, training=True)}
    want["loaded"] = want["inference"]
    assert min(np.std(scores[mask]) for scores in want.values()) > 0.1  # 1e-5 means something
    for name, run in runs.items():
        _, stderr = run.communicate(timeout=300)
        assert run.returncode == 0, f"KERAS_BACKEND={name}:\n{stderr[-3000:]}"
        got = np.load(tmp_path / f"{name}.npz")
        for key, scores in want.items():
            np.testing.assert_allclose(got[key], scores, rtol=1e-5, atol=1e-5,
                                       err_msg=f"{name} {key} against tensorflow")
        # the .keras file saved on that backend, loaded on TensorFlow
        restored = keras.models.load_model(str(tmp_path / f"{name}.keras"))
        np.testing.assert_allclose(score(restored, features, mask), want["inference"],
                                   rtol=1e-5, atol=1e-5, err_msg=f"saved on {name}")
