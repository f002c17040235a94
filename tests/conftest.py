"""Test setup: quiet TF logs, deterministic ops, `tests/` importable for oracles.

Imports no TensorFlow (it runs on the jax and torch stacks too)."""
import os
import pathlib
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(pathlib.Path(__file__).parent))

import pytest  # noqa: E402


def shared_data_dir() -> pathlib.Path:
    """The real LETOR data: $TFRX_DATA_DIR, else ../shared/data beside the repo."""
    root = pathlib.Path(__file__).resolve().parents[1]
    return pathlib.Path(os.environ.get("TFRX_DATA_DIR", root.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def mq2008_dir() -> pathlib.Path:
    """MQ2008's folder; fails loudly (never skips) when the data is missing."""
    path = shared_data_dir() / "MQ2008"
    if not (path / "Fold1" / "train.txt").is_file():
        pytest.fail(f"MQ2008 not found at {path}: set TFRX_DATA_DIR or put shared/ beside the repo.")
    return path


#: the files of ``tests/ops`` that import no TensorFlow (collected on every stack that
#: collects them at all: the op suites' vocabulary of metric names)
OPS_WITHOUT_TENSORFLOW = ("test_vocabulary.py",)


def _tf_ops_suites_ignored():
    """``tests/ops`` where :data:`stack.TF_OPS_SUITES_ON` says that another stack runs
    the exhaustive suites of TensorFlow's ops (tf221, keras3: tf215 runs them);
    without TensorFlow (the jax and torch stacks), its TensorFlow files (all but
    :data:`OPS_WITHOUT_TENSORFLOW`)."""
    from support import stack  # pylint: disable=import-outside-toplevel
    from tfr_extensions import backend  # pylint: disable=import-outside-toplevel
    if stack.TF_OPS_SUITES_ON[stack.THIS_STACK]:
        return []
    if backend.HAS_TENSORFLOW:
        return ["ops"]
    ops = pathlib.Path(__file__).parent / "ops"
    return [f"ops/{path.name}" for path in sorted(ops.glob("*.py"))
            if path.name not in OPS_WITHOUT_TENSORFLOW]


collect_ignore = _tf_ops_suites_ignored()


def _keras_3_only():
    """The helpers of the Keras 3 suites (``keras.ops``), which Keras 2 cannot import
    (``--doctest-modules`` would collect them)."""
    from tfr_extensions import backend  # pylint: disable=import-outside-toplevel
    return [] if backend.IS_KERAS_3 else ["support/autodiff.py", "support/loss_suite.py"]


collect_ignore += _keras_3_only()


def pytest_terminal_summary(terminalreporter):
    from tfr_extensions import backend  # pylint: disable=import-outside-toplevel
    if collect_ignore and not backend.HAS_TENSORFLOW:
        terminalreporter.write_line(
            "tests/ops: only " + ", ".join(OPS_WITHOUT_TENSORFLOW) + " collected: TensorFlow "
            "is not installed here (the TensorFlow ops' suites; tests/neutral is the "
            "backend-neutral suite).")
    elif "ops" in collect_ignore:
        terminalreporter.write_line(
            "tests/ops not collected on this stack: the exhaustive suites of TensorFlow's "
            "ops run on tf215, and tests/neutral holds TensorFlow 2.21's ops to the same "
            "oracles on keras3 (tests/support/stack.py, TF_OPS_SUITES_ON).")
