"""A finished ``tfrx-train`` run's ``results.json``, and the comparison of two runs that
must end alike (a resumed run against an uninterrupted one)."""
import json

import numpy as np
import pytest


def read_results(folder):
    with open(folder / "results.json") as f:
        return json.load(f)


def assert_same_results(got, want, tolerance: float):
    """The same best epoch, history and validation and test metrics, to ``tolerance``
    (relative and absolute) for the numbers, exactly for everything else."""
    assert got["best_epoch"] == want["best_epoch"]
    for key, values in want["history"].items():
        np.testing.assert_allclose(got["history"][key], values, rtol=tolerance, atol=tolerance,
                                   err_msg=key)
    for part in ("validation", "test"):
        for key, value in want[part].items():
            if isinstance(value, float):
                assert got[part][key] == pytest.approx(value, rel=tolerance, abs=tolerance), (
                    part, key)
            else:
                assert got[part][key] == value, (part, key)
