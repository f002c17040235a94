"""The context-aware scorer ``SA<n>`` (:mod:`tfr_extensions.models.attention`) on every
Keras 3 backend, with or without TensorFlow: its scores against the float64 NumPy oracle
(:mod:`support.oracles_attention`), padding anywhere changes no score and permuting a
list permutes its scores (eager and compiled: ``tf.function(jit_compile=True)``,
``jax.jit``, ``torch.compile``), ``.keras`` round trips, ``mixed_float16``, training
on ``RankingPyDataset``'s default batches, and its bad options.

Imports no TensorFlow (``tests/test_models.py`` holds Keras 2's; the cross-backend
check of one set of weights is ``test_neutral_models.py``'s).
"""
import numpy as np
import pytest

from tfr_extensions import backend

if not backend.IS_KERAS_3:
    pytest.skip("Keras 2: tests/test_models.py", allow_module_level=True)

import keras  # noqa: E402
from keras import ops  # noqa: E402

import tfr_extensions as tfrx  # noqa: E402
from tfr_extensions import models  # noqa: E402
from support import oracles_attention as oracle  # noqa: E402
from support.autodiff import compiled  # noqa: E402

F = 5
#: float32 against float32 after a change of list length: the attention's sums run over
#: more (zero) terms, in another order
TOLERANCE = dict(rtol=1e-6, atol=1e-6)


def to_numpy(x) -> np.ndarray:
    return np.asarray(ops.convert_to_numpy(x))


def sa_scorer(notation="SA2", seed=0, **kwargs):
    """A built scorer with random weights and moving statistics away from their start."""
    keras.utils.set_random_seed(seed)
    kwargs = {"hidden_units": 16, "attention_heads": 2, **kwargs}
    model = models.scorer(notation, F, **kwargs)
    rng = np.random.default_rng(seed)
    for layer in model.norm_layers:
        units = layer.gamma.shape[0]
        layer.set_weights([rng.uniform(0.5, 1.5, units), rng.normal(0.0, 0.3, units),
                           rng.normal(0.0, 0.5, units), rng.uniform(0.3, 2.0, units)])
    return model


def batch(seed=1, lengths=(7, 4, 1, 6), list_size=7):
    rng = np.random.default_rng(seed)
    features = rng.normal(1.0, 2.0, size=(len(lengths), list_size, F)).astype(np.float32)
    mask = np.arange(list_size)[None, :] < np.asarray(lengths)[:, None]
    features[~mask] = 1e3  # garbage at padding
    return features, mask


def scoring(model, jit=False):
    """``(features, mask) -> scores`` in inference, compiled once with ``jit`` (each new
    shape compiles again: the tests keep to few shapes)."""
    call = (lambda x, m: model({"features": x, "mask": m}, training=False))
    call = compiled(call) if jit else call
    return lambda features, mask: to_numpy(call(features, mask))


def run(model, features, mask):
    return scoring(model)(features, mask)


def test_scores_equal_the_numpy_oracle():
    model = sa_scorer()  # (Keras 2's test checks it without batch normalization)
    features, mask = batch()
    want = oracle.scores(features, mask, oracle.weights_of(model, to_numpy))
    np.testing.assert_allclose(run(model, features, mask)[mask], want[mask], rtol=2e-5,
                               atol=2e-5)
    assert np.std(want[mask]) > 0.1  # the comparison means something


def _pad_at(features, mask, position):
    """One padded document (NaN features: padding holds garbage) inserted at ``position``."""
    return (np.insert(features, position, np.nan, axis=1),
            np.insert(mask, position, False, axis=1))


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "compiled"])
def test_padding_added_anywhere_changes_no_score(jit):
    score = scoring(sa_scorer("SA1"), jit)  # (one block: the compilers' time is per op)
    features, mask = batch()
    # padding at the end first; then before and inside the documents (one shape: one
    # compile), and eagerly against the lists without it
    want = np.delete(score(*_pad_at(features, mask, 7)), 7, axis=1)
    for position in (0, 3):
        got = np.delete(score(*_pad_at(features, mask, position)), position, axis=1)
        np.testing.assert_allclose(got[mask], want[mask], **TOLERANCE, err_msg=str(position))
    if not jit:
        np.testing.assert_allclose(score(features, mask)[mask], want[mask], **TOLERANCE)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "compiled"])
def test_permuting_a_list_permutes_its_scores(jit):
    score = scoring(sa_scorer("SA1"), jit)
    features, mask = batch()
    want = score(features, mask)
    permutation = np.random.default_rng(2).permutation(features.shape[1])
    got = score(features[:, permutation], mask[:, permutation])
    valid = mask[:, permutation]
    np.testing.assert_allclose(got[valid], want[:, permutation][valid], **TOLERANCE)
    # and the context matters: a document's score moves when another document changes
    changed = features.copy()
    changed[0, 1] += 3.0
    assert np.abs(score(changed, mask)[0, 0] - want[0, 0]) > 1e-4


def test_a_list_of_padding_only_and_one_document_lists_score_finite():
    model = sa_scorer()
    features, mask = batch(lengths=(0, 1, 3))
    scores = run(model, features, mask)
    assert scores.shape == mask.shape and np.isfinite(scores).all()


def test_a_keras_file_round_trips(tmp_path):
    model = sa_scorer(dropout=0.2)
    features, mask = batch()
    model.save(str(tmp_path / "sa.keras"))
    loaded = keras.models.load_model(str(tmp_path / "sa.keras"))
    assert loaded.get_config() == model.get_config()
    np.testing.assert_array_equal(run(loaded, features, mask), run(model, features, mask))


def test_mixed_float16_scores_are_float32_and_near_float32():
    features, mask = batch()
    want = run(sa_scorer(), features, mask)
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        half = sa_scorer()
        scores = half({"features": features, "mask": mask}, training=False)
        assert keras.backend.standardize_dtype(scores.dtype) == "float32"
    finally:
        keras.mixed_precision.set_global_policy("float32")
    np.testing.assert_allclose(to_numpy(scores)[mask], want[mask], rtol=0.05, atol=0.05)


def test_fit_trains_on_the_default_batches_of_a_ranking_py_dataset():
    keras.utils.set_random_seed(0)
    data = tfrx.data.synthetic(num_queries=64, num_features=F, seed=3)
    batches = tfrx.data.RankingPyDataset(data, batch_size=16, shuffle=True, seed=0)
    model = models.scorer("SA1", F, hidden_units=16, attention_heads=2)
    model.compile(optimizer=keras.optimizers.Adam(3e-3),
                  loss=tfrx.losses.get("approx_ndcg"))
    history = model.fit(batches, epochs=4, verbose=0).history["loss"]
    assert np.isfinite(history).all() and history[-1] < history[0]


@pytest.mark.parametrize("kwargs,message", [
    ({"attention_heads": 0}, "attention_heads"), ({"dropout": 1.0}, "dropout"),
    ({"dropout": -0.1}, "dropout")])
def test_bad_options_name_the_option(kwargs, message):
    with pytest.raises(ValueError, match=message):
        models.scorer("SA2", F, **kwargs)
    with pytest.raises(ValueError, match="SA<n>"):
        models.scorer("SA0", F)


def test_tfrx_train_builds_it_by_its_notation():
    from pipelines import train  # pylint: disable=import-outside-toplevel
    config = train.parse_args(["--scorer", "SA3", "--hidden-units", "8"])
    model = train.build_scorer(config, F)
    assert model.get_config()["notation"] == "SA3" and len(model.encoder_blocks) == 3
    with pytest.raises(ValueError, match="SA<n>"):
        train.parse_args(["--scorer", "SA"])
