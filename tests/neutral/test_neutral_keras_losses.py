"""The loss classes (:mod:`tfr_extensions.losses`) on every Keras 3 backend, with or
without TensorFlow, for every registered loss: ``get`` by key, class name and preset;
per-list values and reductions; JSON configs; sample weights per list and per item;
keras-rs dict labels; ``.keras`` files with the seeded loss's step state; the
``mixed_float16`` policy. Their functions' values: ``test_neutral_losses.py``.

Imports numpy, keras, pytest, tfr_extensions and ``support`` only.
"""
import json

import numpy as np
import pytest

from tfr_extensions import backend

if not backend.IS_KERAS_3:
    pytest.skip("Keras 2: the losses compute with TensorFlow's ops there (tests/losses); this "
                "suite is Keras 3's, on each of its backends", allow_module_level=True)

import keras  # noqa: E402

import tfr_extensions as tfrx  # noqa: E402
from support import autodiff  # noqa: E402
from support.loss_options import NON_DEFAULT  # noqa: E402
from support.loss_suite import (  # noqa: E402
    CLASSES, KEYS, LABELS, OPTIONS, SAMPLED, SCORES, SEEDED, VALID, assert_close, run, value_of)


@pytest.mark.parametrize("key", KEYS)
def test_get_builds_the_class_by_key_class_name_and_preset(key):
    assert set(NON_DEFAULT) == set(KEYS)
    cls = CLASSES[key]
    assert type(tfrx.losses.get(cls.__name__)) is cls and tfrx.losses.get(key).name == key
    loss = tfrx.losses.get(key, **NON_DEFAULT[key])
    assert loss.options == cls.spec.check_options(**NON_DEFAULT[key])
    for preset, kwargs in cls.spec.presets.items():
        assert tfrx.losses.get(preset).options == {**cls.spec.defaults, **kwargs}


@pytest.mark.parametrize("key", KEYS)
def test_the_class_computes_its_function_per_list(key):
    loss = CLASSES[key](reduction="none", **OPTIONS[key])
    per_list_values = value_of(loss)
    assert per_list_values.shape == (len(LABELS), 1)
    if key not in SAMPLED:  # (the class folds a step counter into the seed)
        losses, weights, _ = run(key)
        assert_close(per_list_values[:, 0], losses * weights)
    reduced = value_of(CLASSES[key](**OPTIONS[key]))
    assert_close(reduced, per_list_values.sum() / len(LABELS))


@pytest.mark.parametrize("key", KEYS)
def test_config_round_trips_through_json(key):
    loss = CLASSES[key](reduction="sum", name="mine", **NON_DEFAULT[key])
    config = json.loads(json.dumps(loss.get_config()))
    again = CLASSES[key].from_config(config)
    assert again.get_config() == loss.get_config() and again.name == "mine"
    assert_close(value_of(again), value_of(loss))  # (a seeded loss: both at their first call)
    serialized = json.loads(json.dumps(keras.losses.serialize(loss)))
    restored = keras.losses.deserialize(serialized)
    assert type(restored) is CLASSES[key] and restored.get_config() == loss.get_config()


@pytest.mark.parametrize("key", KEYS)
def test_sample_weights_per_list_and_per_item(key):
    per_list_values = value_of(CLASSES[key](reduction="none", **OPTIONS[key]))[:, 0]
    list_weights = np.array([[0.5], [2.0], [1.5], [3.0]], np.float32)
    assert_close(value_of(CLASSES[key](**OPTIONS[key]), sample_weight=list_weights),
                 np.sum(per_list_values * list_weights[:, 0]) / len(LABELS))
    assert_close(value_of(CLASSES[key](reduction="sum", **OPTIONS[key]),
                          sample_weight=list_weights[:, 0]),
                 np.sum(per_list_values * list_weights[:, 0]))
    item_weights = np.random.default_rng(4).uniform(0.5, 2.0, LABELS.shape).astype(np.float32)
    relevance = np.where(VALID, LABELS, 0.0)
    label_weighted = np.divide((item_weights * relevance).sum(1), relevance.sum(1),
                               out=np.zeros(len(LABELS)), where=relevance.sum(1) > 0)
    assert_close(value_of(CLASSES[key](**OPTIONS[key]), sample_weight=item_weights),
                 np.sum(per_list_values * label_weighted) / len(LABELS))


@pytest.mark.parametrize("key", KEYS)
def test_keras_rs_dict_labels_equal_padded_labels(key):
    y_true = {"labels": np.where(VALID, LABELS, 2.0).astype(np.float32), "mask": VALID}
    assert_close(value_of(CLASSES[key](**OPTIONS[key]), y_true),
                 value_of(CLASSES[key](**OPTIONS[key])))


def _scorer(num_features=3, list_size=7):
    return keras.Sequential([keras.Input((list_size, num_features)),
                             keras.layers.Dense(1, kernel_initializer="ones"),
                             keras.layers.Reshape((list_size,))])


def _seed_state(loss):
    store = {}
    loss.save_own_variables(store)
    return np.asarray(store["seed_step"]) if "seed_step" in store else None


@pytest.mark.parametrize("key", KEYS)
def test_a_keras_file_keeps_the_options_and_the_seeded_step_state(key, tmp_path):
    """A compiled model saved as ``.keras`` and loaded back has the loss with its
    options; a seeded loss's step counter travels with it (after 3 training steps the
    loaded loss draws what the trained one draws next, not what a new one draws)."""
    features = np.random.default_rng(6).normal(size=(12, 7, 3)).astype(np.float32)
    labels = np.tile(LABELS, (3, 1))
    model = _scorer()
    loss = tfrx.losses.get(key, **NON_DEFAULT[key])
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss=loss)
    if key in SEEDED:
        model.fit(features, labels, batch_size=4, epochs=1, verbose=0, shuffle=False)
    model.save(tmp_path / "model.keras")
    loaded = keras.models.load_model(tmp_path / "model.keras")
    assert type(loaded.loss) is CLASSES[key]
    assert loaded.loss.get_config() == loss.get_config()
    if key in SEEDED:
        state = _seed_state(loss)
        np.testing.assert_array_equal(_seed_state(loaded.loss), state)
        assert not np.array_equal(state, _seed_state(tfrx.losses.get(key, **NON_DEFAULT[key])))
        scores = autodiff.to_numpy(model(features[:4]))
        next_value = value_of(loss, labels[:4], scores)
        assert_close(value_of(loaded.loss, labels[:4], scores), next_value)
        if key in SAMPLED:
            fresh = tfrx.losses.get(key, **NON_DEFAULT[key])
            assert not np.isclose(value_of(fresh, labels[:4], scores), next_value)


@pytest.fixture
def mixed_float16():
    before = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_float16")
    yield
    keras.mixed_precision.set_global_policy(before)


@pytest.mark.usefixtures("mixed_float16")
@pytest.mark.parametrize("key", KEYS)
def test_mixed_float16_computes_in_float32(key):
    loss = CLASSES[key](**OPTIONS[key])
    half = keras.ops.cast(SCORES, "float16")
    value = loss(LABELS, half)
    assert keras.backend.standardize_dtype(value.dtype) == "float32"
    single = autodiff.to_numpy(keras.ops.cast(half, "float32"))
    assert_close(autodiff.to_numpy(value), value_of(CLASSES[key](**OPTIONS[key]), LABELS, single))
    _, grad = autodiff.value_and_grad(lambda y, s: CLASSES[key](**OPTIONS[key])(y, s),
                                      LABELS, SCORES.astype(np.float16))
    assert grad.dtype == np.float16 and np.all(np.isfinite(grad))
