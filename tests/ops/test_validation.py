"""validation: one rule per kind of argument, the same everywhere it is used."""
import numpy as np
import pytest
import tensorflow as tf

import tfr_extensions as tfrx
from tfr_extensions.ops import validation


@pytest.mark.parametrize("value", [3, np.int64(3), np.int32(3), np.uint8(3)])
def test_ints_and_numpy_ints_are_accepted_as_int(value):
    got = validation.validate_int(value, "batch_size", minimum=1)
    assert got == 3 and type(got) is int


@pytest.mark.parametrize("value", [True, False, np.bool_(True), 3.0, 2.5, "3", None, [3]])
def test_bools_floats_strings_and_none_are_not_ints(value):
    with pytest.raises(ValueError, match=r"`batch_size` must be an int >= 1; got "):
        validation.validate_int(value, "batch_size", minimum=1)


def test_int_bounds_and_none():
    assert validation.validate_int(None, "list_size", minimum=1, allow_none=True) is None
    assert validation.validate_topn(None) is None and validation.validate_topn(np.int64(5)) == 5
    with pytest.raises(ValueError, match=r"`list_size` must be None or an int >= 1; got 0\."):
        validation.validate_int(0, "list_size", minimum=1, allow_none=True)
    with pytest.raises(ValueError, match=r"`max_features` must be an int in \[1, 7\]; got 8\."):
        validation.validate_int(8, "max_features", minimum=1, maximum=7)
    with pytest.raises(ValueError, match=r"`topn` must be None or an int >= 1; got 0\."):
        validation.validate_topn(0)


@pytest.mark.parametrize("value", [0.5, 2, np.float32(0.5), np.int64(2)])
def test_positive_numbers(value):
    got = validation.validate_positive(value, "sigma")
    assert got == float(value) and type(got) is float


@pytest.mark.parametrize("value", [0, -1.0, float("nan"), float("inf"), True, "1.5", None])
def test_not_positive_finite_numbers(value):
    with pytest.raises(ValueError, match=r"`sigma` must be a positive finite number; got "):
        validation.validate_positive(value, "sigma")


def test_number_intervals():
    assert validation.validate_number(-1, "discount_alpha", -1.0, 1.0) == -1.0
    assert validation.validate_number(1.0, "gamma", 0.0, 1.0, open_minimum=True) == 1.0
    with pytest.raises(ValueError, match=r"`gamma` must be a finite number in \(0, 1\]; got 0"):
        validation.validate_number(0, "gamma", 0.0, 1.0, open_minimum=True)
    with pytest.raises(ValueError, match=r"`l2` must be a finite number in \[0, inf\); got -1"):
        validation.validate_number(-1, "l2", minimum=0.0)
    with pytest.raises(ValueError, match=r"in \[0, inf\); got nan"):
        validation.validate_number(float("nan"), "noise", minimum=0.0)


def test_choices_bools_and_seeds():
    assert validation.validate_choice("exact", ("exact", "normal"), "method") == "exact"
    with pytest.raises(ValueError, match=r"`method` must be one of \['exact', 'normal'\]; got 'x'"):
        validation.validate_choice("x", ("exact", "normal"), "method")
    with pytest.raises(ValueError, match="`method` must be one of"):
        validation.validate_choice(["exact"], ("exact", "normal"), "method")
    assert validation.validate_bool(np.bool_(False), "tie_break") is False
    assert validation.validate_bool(1, "tie_break") is True
    with pytest.raises(ValueError, match="`tie_break` must be a bool; got 'false'"):
        validation.validate_bool("false", "tie_break")
    assert validation.validate_seed(None) is None and validation.validate_seed(np.int64(4)) == 4
    assert validation.validate_seed((3, np.int32(4))) == [3, 4]
    seed = tf.constant([1, 2])
    assert validation.validate_seed(seed) is seed
    for bad in (True, 1.5, (1, 2, 3), "0"):
        with pytest.raises(ValueError, match="`seed` must be None, an int or a pair of ints"):
            validation.validate_seed(bad)


def test_the_shared_rules_hold_across_the_package():
    """The same argument kinds follow the same rules in ops, losses, models and data."""
    with pytest.raises(ValueError, match="`num_samples` must be an int >= 1; got True"):
        tfrx.ops.sample_rankings([[0.0, 1.0]], num_samples=True)
    with pytest.raises(ValueError, match="`topn` must be None or an int >= 1; got 2.0"):
        tfrx.losses.SoftNDCGLoss(topn=2.0)
    with pytest.raises(ValueError, match="`seed` must be None, an int or a pair"):
        tfrx.losses.TwinSigmoidLoss(seed="0")
    with pytest.raises(ValueError, match="`tie_break` must be a bool"):
        tfrx.losses.TwinSigmoidLoss(tie_break="no")
    assert tfrx.losses.ExpectedUtilityLoss(topn=np.int64(3)).get_config()["topn"] == 3
    assert tfrx.models.scorer("R1.L", np.int64(3), hidden_units=np.int64(2)).get_config()[
        "num_features"] == 3
    data = tfrx.data.synthetic(num_queries=np.int64(3), num_features=np.int32(4), seed=0)
    assert data.num_queries == 3 and data.num_features == 4
