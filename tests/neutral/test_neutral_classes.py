"""The Keras classes of the losses and metrics are explicit, on every stack and backend.

Every registered loss class (``tfrx.losses.names``, so a new one cannot skip this)
writes its own constructor and ``get_config``: ``inspect.signature`` shows the loss
function's options (same names, defaults and order), then ``ragged``, ``reduction``
and ``name`` (default: the registry key), all positional-or-keyword; the constructor
hands each argument to the option of its name; ``get_config`` returns exactly the
constructor's parameters, each from the option of its name, and ``from_config``
rebuilds the loss. The metric classes (:class:`tfrx.metrics.RankingMetric`,
:class:`tfrx.losses.SampledRankingMetric`) likewise. Imports numpy, pytest and
tfr_extensions only (Keras 2 and Keras 3, with or without TensorFlow).
"""
import inspect
import json

import pytest

import tfr_extensions as tfrx
from tfr_extensions import backend
from tfr_extensions.losses import base, registry

#: one registry key per loss class (its default name)
KEYS = tfrx.losses.names(classes=False, presets=False, tf_ranking=False)
CLASSES = {key: type(tfrx.losses.get(key)) for key in KEYS}
#: the parameters every loss class takes after its options, with their defaults
TRAILING = {"ragged": False, "reduction": backend.DEFAULT_REDUCTION}
KEYWORD = inspect.Parameter.POSITIONAL_OR_KEYWORD


class _Sentinel:
    """A distinct value per argument, to follow each one through the wiring."""

    def __init__(self, label):
        self.label = label

    def __repr__(self):
        return f"<{self.label}>"


def _constructor(cls):
    return list(inspect.signature(cls).parameters.values())


def test_every_loss_class_is_registered():
    assert len(CLASSES) == len(set(CLASSES.values())) == len(KEYS) >= 11
    assert base.DEFAULT_REDUCTION == backend.DEFAULT_REDUCTION


@pytest.mark.parametrize("key", KEYS)
def test_loss_constructor_is_written_in_the_class_and_get_config_derived(key):
    cls = CLASSES[key]
    assert "__init__" in vars(cls) and "get_config" not in vars(cls)
    assert not hasattr(cls.__init__, "__signature__")  # no generated signature
    assert cls.__init__.__qualname__ == f"{cls.__qualname__}.__init__"


@pytest.mark.parametrize("key", KEYS)
def test_loss_signature_is_the_options_then_ragged_reduction_name(key):
    cls = CLASSES[key]
    parameters = _constructor(cls)
    expected = [(option, default) for option, default in cls.spec.defaults.items()]
    expected += list(TRAILING.items()) + [("name", key)]
    assert [(p.name, p.default) for p in parameters] == expected
    assert all(p.kind is KEYWORD for p in parameters)


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("call", ["positional", "keyword"])
def test_loss_constructor_hands_each_argument_to_its_option(key, call, monkeypatch):
    """The constructor hands each argument on under its name (its ``locals()``)."""
    cls = CLASSES[key]
    names = [p.name for p in _constructor(cls)]
    arguments = {name: _Sentinel(name) for name in names}
    received = {}

    def record(self, arguments):
        received.update({k: v for k, v in arguments.items() if k not in ("self", "__class__")})

    monkeypatch.setattr(base.RankingLoss, "__init__", record)
    if call == "positional":
        cls(*arguments.values())
    else:
        cls(**arguments)
    assert received == arguments


@pytest.mark.parametrize("key", KEYS)
def test_loss_get_config_returns_each_option_under_its_name(key):
    cls = CLASSES[key]
    loss = cls()
    names = [p.name for p in _constructor(cls)]
    config = loss.get_config()
    assert sorted(config) == sorted(names)
    assert {name: config[name] for name in cls.spec.defaults} == loss.options
    # each option from its own entry (defaults may coincide: 1 == 1.0), followed by sentinels
    sentinels = {option: _Sentinel(option) for option in cls.spec.defaults}
    loss._options = dict(sentinels)  # pylint: disable=protected-access
    config = loss.get_config()
    assert all(config[option] is value for option, value in sentinels.items())


@pytest.mark.parametrize("key", KEYS)
def test_loss_round_trips_through_its_json_config(key):
    cls = CLASSES[key]
    loss = cls(ragged=False, name=f"my_{key}")
    config = json.loads(json.dumps(loss.get_config()))
    again = cls.from_config(config)
    assert type(again) is cls and again.get_config() == loss.get_config()
    assert again.name == f"my_{key}" and again.options == loss.options
    positional = cls(*(config[p.name] for p in _constructor(cls)))
    assert positional.get_config() == loss.get_config()


@pytest.mark.parametrize("key", KEYS)
def test_loss_checks_its_options_at_construction(key):
    cls = CLASSES[key]
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        cls(no_such_option=1)
    first = next(iter(cls.spec.defaults))
    with pytest.raises(ValueError, match=first):
        cls(**{first: object()})


def test_register_refuses_a_class_without_its_function_or_its_own_constructor():
    class Inherited(base.RankingLoss):  # pylint: disable=abstract-method
        function = tfrx.losses.ranknet_loss

    with pytest.raises(TypeError, match="define its own constructor"):
        registry.register(Inherited)

    class Nameless(base.RankingLoss):  # pylint: disable=abstract-method
        def __init__(self, ragged=False, reduction=base.DEFAULT_REDUCTION, name="nameless"):
            super().__init__(locals())

    with pytest.raises(TypeError, match="must name its loss function"):
        registry.register(Nameless)

    class Incomplete(base.RankingLoss):  # pylint: disable=abstract-method
        function = tfrx.losses.ranknet_loss

        def __init__(self, ragged=False, reduction=base.DEFAULT_REDUCTION, name="incomplete"):
            super().__init__(locals())

    assert "Inherited" not in tfrx.losses.names() and "Incomplete" not in tfrx.losses.names()
    with pytest.raises(TypeError, match=r"must take every option of ranknet_loss, \['sigma'\]"):
        Incomplete()


# --- metrics -------------------------------------------------------------------------

def _metrics():
    loss = tfrx.losses.ExpectedUtilityLoss(topn=3, seed=0)
    return [tfrx.metrics.RankingMetric("map", topn=5, no_relevant="exclude"),
            tfrx.losses.SampledRankingMetric(loss)]


@pytest.mark.parametrize("index", [0, 1], ids=["RankingMetric", "SampledRankingMetric"])
def test_metric_classes_are_explicit(index):
    metric = _metrics()[index]
    cls = type(metric)
    assert "__init__" in vars(cls) and "get_config" in vars(cls)
    parameters = _constructor(cls)
    assert all(p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) for p in parameters)
    config = metric.get_config()
    assert sorted(config) == sorted(p.name for p in parameters)
    again = cls.from_config(config)
    assert type(again) is cls and again.name == metric.name
    if index == 0:
        assert again.get_config() == config
