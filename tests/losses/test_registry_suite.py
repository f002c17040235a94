"""One suite over every registered loss, so a new loss cannot skip it.

The losses come from the public registry (``tfrx.losses.names``): one key per
class, and for the cheaper properties every distinct configuration our names
build, plus a configuration of each class with every option changed
(the first of the examples each loss declares, :data:`support.loss_options.NON_DEFAULT`,
which must change every option of the loss's function).
Each loss must: name its options once (the class's constructor options are
its function's keyword-only options, with the same defaults); give the same
per-list values and gradients as its function; check its options in the
function as in the class; round-trip through JSON config; give finite values
and gradients at scores of +-1e4 and on all-tied scores; give padded
documents exactly zero gradient and lists without relevant documents zero
loss and zero gradient; equal itself with padded documents deleted, and with
the documents of a list permuted (exactly for deterministic losses; over the
support of the sampled rankings for the policy-gradient ones); give the same
values under XLA as in graph mode; accept ragged input equal to padded input;
replay with its seed and draw afresh at every call; and train a Keras model
under the mixed_float16 policy.
"""
import importlib
import importlib.util
import inspect
import keyword
import json
import pkgutil

import numpy as np
import pytest
import tensorflow as tf

from support.loss_modes import value_and_grad
from support.loss_options import BAD_OPTION, NON_DEFAULT, QUICK_TO_COMPILE
from support import stack
from support.stack import needs_tf_ranking, tensorflow_ops_suite, tfr
import tfr_extensions as tfrx
from tfr_extensions.arrays import tie_keys
from tfr_extensions import backend
from tfr_extensions.backend import keras
from tfr_extensions.losses import base, registry
from tfr_extensions.ops import lists

#: one registry key per loss class (its default name)
KEYS = tfrx.losses.names(classes=False, presets=False, tf_ranking=False)
CLASSES = {key: type(tfrx.losses.get(key)) for key in KEYS}


def function_of(key):
    return CLASSES[key].spec.function


def takes_seed(key):
    return "seed" in function_of(key).spec.defaults


def build(name, **kwargs):
    """A loss by registry name, seeded where it takes a seed."""
    if "seed" in tfrx.losses.get(name).get_config():
        kwargs.setdefault("seed", 0)
    return tfrx.losses.get(name, **kwargs)


def _distinct_configurations():
    """One name per distinct configuration that our names build."""
    seen, names = set(), []
    for name in tfrx.losses.names(classes=False, tf_ranking=False):
        loss = tfrx.losses.get(name)
        key = (type(loss).__name__, json.dumps(loss.get_config() | {"name": ""}, sort_keys=True))
        if key not in seen:
            seen.add(key)
            names.append(name)
    return names


CONFIGS = _distinct_configurations()
#: (name, kwargs) for the JSON, ragged and XLA checks: defaults and every option changed
KEY_CASES = [(key, {}) for key in KEYS] + [(key, NON_DEFAULT[key]) for key in KEYS]
KEY_IDS = [f"{key}-{'changed' if kwargs else 'defaults'}" for key, kwargs in KEY_CASES]

LABELS = np.array([
    [2.0, 0.0, 1.0, 0.0, 3.0, -1.0, -1.0],   # padded tail
    [0.0, 0.0, 0.0, 0.0, -1.0, -1.0, -1.0],  # no relevant document
    [1.0, 0.0, -1.0, 2.0, 0.0, 1.0, 0.0],    # padding in the middle
    [4.0, 1.0, 0.0, 0.0, 0.0, 2.0, 1.0],
], np.float32)
SCORES = np.random.default_rng(0).normal(size=LABELS.shape).astype(np.float32)


# --- names and options --------------------------------------------------------------

def test_names_follow_one_rule_and_a_function_name_is_no_loss_name():
    assert len(KEYS) >= 11 and len(set(CLASSES.values())) == len(KEYS)
    for key, cls in CLASSES.items():
        function = cls.spec.function
        assert function.__name__.endswith("_loss") and cls.__name__.endswith("Loss")
        # the key is the function's name without _loss, unless that is a Python keyword
        stem = function.__name__[:-len("_loss")]
        assert cls.spec.key == key == (function.__name__ if keyword.iskeyword(stem) else stem)
        assert inspect.signature(cls).parameters["name"].default == key
        assert type(tfrx.losses.get(cls.__name__)) is cls
        assert getattr(tfrx.losses, function.__name__) is function
        assert function.spec is cls.spec
        assert getattr(tfrx.losses, cls.__name__) is cls
    assert "twin_sigmoid_loss" not in tfrx.losses.names()  # the function's name, not a key
    # the one exception: LambdaLoss, whose stem is a Python keyword (DESIGN.md's name)
    assert [n for n in tfrx.losses.names(tf_ranking=False) if n.endswith("_loss")] == [
        "lambda_loss"]
    with pytest.raises(ValueError, match="use 'twin_sigmoid'"):
        tfrx.losses.get("twin_sigmoid_loss")
    with pytest.raises(TypeError, match="name ends in `_loss`"):
        base.loss_function()(tfrx.ops.lists.gains)

    def unchecked_loss(labels, scores, *, mask=None, sigma=1.0):
        del labels, scores, mask, sigma

    with pytest.raises(TypeError, match="annotated with its check.*sigma"):
        base.loss_function()(unchecked_loss)
    assert "TwinSigmoidLoss" not in tfrx.losses.names(classes=False)
    assert "twin_ap_type2" not in tfrx.losses.names(presets=False)
    assert set(tfrx.losses.names(tf_ranking=False)) == set(registry.tfrx_loss_names())
    with pytest.raises(ValueError, match="Known losses: .*twin_ndcg_type3"):
        tfrx.losses.get("no_such_loss")



def test_no_module_shadows_a_function_and_old_module_paths_warn():
    """``tfrx.losses.<name>`` is a function wherever a function has that name; the module
    paths of the earlier release import, and each name read from them warns, naming the
    new module, for one release."""
    assert tfrx.losses.lambda_loss is tfrx.losses.LambdaLoss.spec.function
    for name in tfrx.losses.LOSS_MODULES:
        assert not callable(getattr(tfrx.losses, name)), name
    for old, new in tfrx.losses.RENAMED_MODULES.items():
        module = importlib.import_module(f"tfr_extensions.losses.{old}")
        new_module = importlib.import_module(f"tfr_extensions.losses.{new}")
        functions = [n for n, v in vars(new_module).items() if hasattr(v, "spec")]
        for name in functions + [n for n in vars(new_module) if n.endswith("Loss")]:
            with pytest.warns(DeprecationWarning, match=f"losses.{old} is deprecated.*{new}"):
                assert getattr(module, name) is getattr(new_module, name)
    assert tfrx.losses.lambda_loss is tfrx.losses.LambdaLoss.spec.function  # still
    with pytest.warns(DeprecationWarning, match="losses.neural_ndcg is deprecated"):
        assert tfrx.losses.neural_ndcg.NeuralNDCGLoss is tfrx.losses.NeuralNDCGLoss
    with pytest.warns(DeprecationWarning, match="lambda_framework"):
        from tfr_extensions.losses.lambda_loss import LambdaLoss  # pylint: disable=import-outside-toplevel
    assert LambdaLoss is tfrx.losses.LambdaLoss


@pytest.mark.parametrize("old,new", sorted(registry.DEPRECATED.items()))
def test_an_old_loss_name_builds_its_loss_with_a_warning_naming_the_new_one(old, new):
    with pytest.warns(DeprecationWarning, match=f"{old!r} is deprecated.*use {new!r}"):
        loss = tfrx.losses.get(old, topn=3)
    assert loss.get_config() == tfrx.losses.get(new, topn=3).get_config()
    assert old not in tfrx.losses.names()

@pytest.mark.parametrize("key", KEYS)
def test_a_pytorch_native_body_takes_the_public_functions_options(key):
    """The math is the public function's own (one body for TensorFlow and keras.ops);
    a PyTorch-native body, where a loss names one, takes exactly its keyword-only
    options, with the same defaults."""
    spec = CLASSES[key].spec
    assert spec.body(base.TENSORFLOW) is spec.math is spec.function.__wrapped__
    if spec.torch is None or not (backend.IS_KERAS_3 and importlib.util.find_spec("torch")):
        return
    body = spec.body(base.TORCH)
    parameters = inspect.signature(body).parameters
    options = {name: p.default for name, p in parameters.items()
               if p.kind is inspect.Parameter.KEYWORD_ONLY and name != "mask"}
    assert options == spec.defaults and "mask" in parameters
    assert body.__name__ == spec.function.__name__


def test_every_loss_module_registers_its_losses():
    """Every module of ``tfr_extensions/losses`` but the infrastructure is imported by
    the package and registers each loss function it defines: a loss module is never
    skipped by the suites that read the registry."""
    registered = {cls.spec.function for cls in registry.classes().values()}
    modules = [info.name for info in pkgutil.iter_modules(tfrx.losses.__path__)]
    assert set(modules) - set(tfrx.losses.INFRASTRUCTURE) == set(tfrx.losses.LOSS_MODULES)
    for name in tfrx.losses.LOSS_MODULES:
        module = importlib.import_module(f"tfr_extensions.losses.{name}")
        functions = [value for value in vars(module).values()
                     if inspect.isfunction(value) and hasattr(value, "spec")
                     and getattr(value, "__module__", None) == module.__name__]
        assert functions, f"tfr_extensions/losses/{name}.py defines no loss"
        for function in functions:
            assert function in registered, f"{function.__name__} has no registered class"


@pytest.mark.parametrize("key", KEYS)
def test_constructor_options_equal_the_function_options(key):
    """The class names each option once: its constructor's options (before
    ragged, reduction, name) are the function's keyword-only options, with
    the same defaults; the function takes (labels, scores, *, mask=None, ...)."""
    cls, function = CLASSES[key], function_of(key)
    init = list(inspect.signature(cls.__init__).parameters.values())
    assert [p.name for p in init[-3:]] == ["ragged", "reduction", "name"]
    constructor = {p.name: p.default for p in init[1:-3]}
    assert constructor == function.spec.defaults
    parameters = list(inspect.signature(function).parameters.values())
    assert [p.name for p in parameters[:3]] == ["labels", "scores", "mask"]
    assert parameters[2].kind is inspect.Parameter.KEYWORD_ONLY and parameters[2].default is None
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters[2:])
    loss = cls(**NON_DEFAULT[key])
    assert {k: loss.get_config()[k] for k in constructor} == loss.options
    positional = cls(*(NON_DEFAULT[key][k] for k in constructor), False, "sum", "mine")
    assert positional.get_config() == {**loss.get_config(), "reduction": "sum", "name": "mine"}
    with pytest.raises(TypeError, match="multiple values"):
        cls(NON_DEFAULT[key][next(iter(constructor))], **{next(iter(constructor)): None})


@pytest.mark.parametrize("key", KEYS)
def test_non_default_options_change_every_option(key):
    defaults = function_of(key).spec.defaults
    assert set(NON_DEFAULT[key]) == set(defaults)
    assert all(NON_DEFAULT[key][k] != defaults[k] for k in defaults)


@pytest.mark.parametrize("key", KEYS)
def test_the_function_checks_options_as_the_class_does(key):
    option, bad = BAD_OPTION[key]
    with pytest.raises(ValueError, match=option):
        CLASSES[key](**{option: bad})
    with pytest.raises(ValueError, match=option):
        function_of(key)(LABELS, SCORES, **{option: bad})
    with pytest.raises(TypeError, match="no_such_option"):
        function_of(key)(LABELS, SCORES, no_such_option=1)


def _class_and_function(key, kwargs):
    """Per-list values and gradients of the class (reduction none) and of its
    function with the options and the seed the class uses at its first call."""
    loss = build(key, reduction="none", **kwargs)
    options = loss.options
    if options.get("seed") is not None:
        options["seed"] = [tie_keys.stream_seed(options["seed"]), 0]  # (its step 0)
    scores = tf.constant(SCORES)
    with tf.GradientTape() as tape:
        tape.watch(scores)
        losses, weights = function_of(key)(LABELS, scores, **options)
        total = tf.reduce_sum(losses * weights)
    value, grad = value_and_grad(loss, LABELS, SCORES)
    return ((value.numpy().reshape(-1), grad.numpy()),
            ((losses * weights).numpy(), tape.gradient(total, scores).numpy()))


@pytest.mark.parametrize("key,kwargs", KEY_CASES, ids=KEY_IDS)
def test_the_class_computes_its_function(key, kwargs):
    by_class, by_function = _class_and_function(key, kwargs)
    np.testing.assert_array_equal(by_class[0], by_function[0])
    np.testing.assert_array_equal(by_class[1], by_function[1])


@pytest.mark.parametrize("key,kwargs", KEY_CASES, ids=KEY_IDS)
def test_json_config_round_trip_gives_the_same_loss(key, kwargs):
    loss = build(key, **kwargs)
    config = json.loads(json.dumps(keras.losses.serialize(loss)))
    clone = keras.losses.deserialize(config)
    assert type(clone) is type(loss) and clone.get_config() == loss.get_config()
    np.testing.assert_allclose(clone(LABELS, SCORES).numpy(),
                               build(key, **kwargs)(LABELS, SCORES).numpy(), rtol=1e-6)


# --- values and gradients -----------------------------------------------------------

@pytest.mark.parametrize("name", KEYS)
@pytest.mark.parametrize("scores", [
    np.where(np.arange(7) % 2 == 0, 1e4, -1e4)[None].repeat(4, 0).astype(np.float32),
    np.zeros((4, 7), np.float32),  # all tied
    SCORES * 1e4,
], ids=["extreme", "tied", "large-range"])
def test_finite_values_zero_gradient_for_padding_and_lists_without_relevance(name, scores):
    value, grad = value_and_grad(build(name, reduction="none"), LABELS, scores)
    value, grad = value.numpy().reshape(len(LABELS), -1), grad.numpy()
    assert np.isfinite(value).all() and np.isfinite(grad).all()
    assert (grad[LABELS < 0] == 0).all()
    assert (value[1] == 0).all() and (grad[1] == 0).all()


# One list with padding in the middle and at the end, in float64: the list with
# the padded documents deleted, and its documents permuted, must give the same loss.
# Losses that sample rankings get a list of three valid documents (six rankings).
PROPERTY_LISTS = {
    "deterministic": (np.array([[2.0, -1.0, 0.0, 1.0, -1.0, 0.0, 3.0, 1.0, -1.0]]),
                      np.array([[0.3, 9.0, -0.4, 1.1, -5.0, 0.2, -0.9, 0.6, 0.0]])),
    "sampled": (np.array([[2.0, -1.0, 0.0, 1.0, -1.0]]), np.array([[0.3, 9.0, -0.4, 0.5, -5.0]])),
}


def _property_cases():
    """Every distinct configuration, each with topn=5 too where it takes a
    cutoff, and each class with every option changed."""
    cases = []
    for name in CONFIGS:
        cases.append((name, {}))
        if "topn" in tfrx.losses.get(name).options:
            cases.append((name, {"topn": 5}))
    return cases + [(key, NON_DEFAULT[key]) for key in KEYS]


PROPERTY_CASES = _property_cases()


def _per_list(name, kwargs, labels, scores, seed=None):
    """The function's per-list ``losses * weights`` ``[B]`` and gradient ``[B, L]``."""
    loss = tfrx.losses.get(name, **kwargs)
    options = loss.options
    if "seed" in options:
        options["seed"] = seed if seed is not None else options["seed"]
    scores = tf.constant(scores)
    with tf.GradientTape() as tape:
        tape.watch(scores)
        losses, weights = loss.spec.function(labels, scores, **options)
        per_list = losses * weights
    return per_list.numpy(), tape.gradient(per_list, scores).numpy()


def _sampled_outcomes(name, kwargs, labels, scores, order, seeds, size):
    """Each possible (value, gradient) of a one-sample policy-gradient loss,
    by value (10 significant digits), over ``seeds``; gradients in the
    documents' original places ``order`` of a list of ``size``."""
    loss = tfrx.losses.get(name, **{**kwargs, "num_samples": 1})
    options = {**loss.options, "seed": None}

    @tf.function
    def run(seed):
        with tf.GradientTape() as tape:
            tape.watch(scores_t)
            losses, weights = loss.spec.function(labels, scores_t, **{**options, "seed": seed})
            per_list = losses * weights
        return per_list, tape.gradient(per_list, scores_t)

    scores_t = tf.constant(scores)
    outcomes = {}
    for seed in seeds:
        value, grad = (t.numpy() for t in run(tf.constant([seed, 0])))
        full = np.zeros(size)
        full[order] = grad[0]
        outcomes[float(f"{value[0]:.10g}")] = full
    return outcomes


@tensorflow_ops_suite
@pytest.mark.parametrize("name,kwargs", PROPERTY_CASES,
                         ids=[f"{n}-{'-'.join(map(str, k.values())) or 'defaults'}"
                              for n, k in PROPERTY_CASES])
def test_masking_equals_deleting_and_permuting_changes_nothing(name, kwargs):
    sampled = "num_samples" in tfrx.losses.get(name).options
    labels, scores = PROPERTY_LISTS["sampled" if sampled else "deterministic"]
    index, keep = np.arange(labels.shape[1]), labels[0] >= 0
    permutation = np.random.default_rng(1).permutation(labels.shape[1])
    deleted = (labels[:, keep], scores[:, keep], index[keep])
    permuted = (labels[:, permutation], scores[:, permutation], index[permutation])
    if not sampled:  # deterministic: exactly equal
        value, grad = _per_list(name, kwargs, labels, scores)
        assert (grad[0, ~keep] == 0).all()
        for other_labels, other_scores, order in (deleted, permuted):
            other_value, other_grad = _per_list(name, kwargs, other_labels, other_scores)
            np.testing.assert_allclose(other_value, value, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(other_grad[0], grad[0, order], rtol=1e-9, atol=1e-12)
        return
    # Sampled rankings: each call's value is that of one ranking; the padded, the
    # deleted and the permuted list have the same possible values, each with its gradient.
    seeds = range(400)
    reference = _sampled_outcomes(name, kwargs, labels, scores, index, seeds, len(index))
    assert len(reference) == 6 and all((g[~keep] == 0).all() for g in reference.values())
    for other_labels, other_scores, order in (deleted, permuted):
        other = _sampled_outcomes(name, kwargs, other_labels, other_scores, order,
                                  range(1000, 1400), len(index))
        assert sorted(other) == sorted(reference)
        for value, grad in other.items():
            np.testing.assert_allclose(grad, reference[value], rtol=1e-9, atol=1e-12)


@tensorflow_ops_suite
@pytest.mark.parametrize("key,kwargs", KEY_CASES, ids=KEY_IDS)
def test_xla_matches_graph_mode(key, kwargs):
    kwargs = {**QUICK_TO_COMPILE.get(key, {}), **kwargs}
    graph_loss, xla_loss = build(key, **kwargs), build(key, **kwargs)
    graph = tf.function(lambda s: value_and_grad(graph_loss, LABELS, s))(SCORES)
    xla = tf.function(lambda s: value_and_grad(xla_loss, LABELS, s), jit_compile=True)(SCORES)
    np.testing.assert_allclose(xla[0].numpy(), graph[0].numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(xla[1].numpy(), graph[1].numpy(), rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("key,kwargs", [(name, {}) for name in CONFIGS] + KEY_CASES[len(KEYS):],
                         ids=CONFIGS + KEY_IDS[len(KEYS):])
def test_ragged_input_equals_padded_input(key, kwargs):
    labels = LABELS[[0, 1, 3]]  # padding only at the ends: ragged packs nothing
    scores = SCORES[[0, 1, 3]]
    rows = [labels[b] >= 0 for b in range(3)]
    ragged = (tf.ragged.constant([labels[b][rows[b]] for b in range(3)]),
              tf.ragged.constant([scores[b][rows[b]] for b in range(3)]))
    want = build(key, **kwargs)(labels, scores).numpy()
    np.testing.assert_allclose(build(key, ragged=True, **kwargs)(*ragged).numpy(), want,
                               rtol=1e-5, atol=1e-7)
    function, options = build(key, **kwargs).spec.function, build(key, **kwargs).options
    losses, weights = function(*ragged, **options)
    assert losses.shape == (3,)
    dense_losses, dense_weights = function(labels, scores, **options)
    np.testing.assert_allclose(losses.numpy(), dense_losses.numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(weights.numpy(), dense_weights.numpy())


@pytest.mark.parametrize("key", [key for key in KEYS if takes_seed(key)])
def test_a_seeded_loss_draws_afresh_each_call_and_replays_with_its_seed(key):
    labels = np.array([[1.0, 0.0, 1.0, 0.0, 2.0, 0.0]] * 8)
    scores = np.zeros((8, 6))  # all tied: twin-sigmoid's value depends on its tie break

    def three_calls(seed):
        loss = tfrx.losses.get(key, seed=seed, reduction="none")
        return [loss(labels, scores).numpy()[:, 0] for _ in range(3)]

    first, again = three_calls(11), three_calls(11)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0], first[1]) and not np.array_equal(first[1], first[2])
    assert not np.array_equal(first[0], three_calls(12)[0])
    assert np.isfinite(first).all()


# Keras 2's mixed precision (a LossScaleOptimizer around the loss's float16 gradients);
# Keras 3's: tests/neutral/test_neutral_keras_losses.py on every backend
@stack.heavy_integration("tf215")
@pytest.mark.parametrize("name", KEYS)
def test_trains_under_the_mixed_float16_policy(name):
    keras.utils.set_random_seed(0)
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        inputs = keras.Input(shape=(7, 3))
        hidden = keras.layers.Dense(4, activation="relu")(inputs)
        scores = keras.layers.Dense(1, dtype="float32")(hidden)
        model = keras.Model(inputs, keras.layers.Reshape((7,))(scores))
        model.compile(optimizer="adam", loss=build(name))
        features = np.random.default_rng(1).normal(size=(4, 7, 3)).astype(np.float32)
        history = model.fit(features, LABELS, epochs=2, verbose=0)
        assert np.isfinite(history.history["loss"]).all()
    finally:
        keras.mixed_precision.set_global_policy("float32")


# --- TF-Ranking's names ---------------------------------------------------------------

@needs_tf_ranking
def test_tf_ranking_names_are_known_where_it_imports():
    with pytest.raises(ValueError, match="Known losses: .*twin_ndcg_type3.*approx_ndcg_loss"):
        tfrx.losses.get("no_such_loss")
    assert type(tfrx.losses.get("list_mle_loss")).__name__ == "ListMLELoss"
    assert "approx_ndcg_loss" in tfrx.losses.names()
    assert "approx_ndcg_loss" not in tfrx.losses.names(tf_ranking=False)


@pytest.mark.skipif(tfr is not None, reason="TF-Ranking imports on this stack")
def test_without_tf_ranking_its_names_are_unknown_and_the_error_says_why():
    assert registry.tfr_loss_names() == () and registry.names() == registry.tfrx_loss_names()
    with pytest.raises(ValueError, match="approx_ndcg_loss.*need tensorflow-ranking"):
        tfrx.losses.get("approx_ndcg_loss")


@needs_tf_ranking
def test_tf_ranking_lambda_weights_by_name_give_lambdarank():
    by_name = tfrx.losses.get("pairwise_logistic_loss", lambda_weight="ndcg_v2")
    by_object = tfrx.losses.get("pairwise_logistic_loss",
                                lambda_weight=tfr.keras.losses.NDCGLambdaWeightV2())
    assert isinstance(by_name._lambda_weight, tfr.keras.losses.NDCGLambdaWeightV2)
    np.testing.assert_allclose(by_name(LABELS, SCORES).numpy(), by_object(LABELS, SCORES).numpy())
    plain = tfrx.losses.get("pairwise_logistic_loss")
    assert not np.isclose(by_name(LABELS, SCORES).numpy(), plain(LABELS, SCORES).numpy())
    with pytest.raises(ValueError, match="lambda_weight.*ndcg_v2"):
        tfrx.losses.get("pairwise_logistic_loss", lambda_weight="ndcg_v3")
