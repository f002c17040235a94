"""Test setup: quiet TF logs, deterministic ops, `tests/` importable for oracles."""
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


def _tf_ops_suites_ignored():
    """``tests/ops`` where :data:`stack.TF_OPS_SUITES_ON` says another stack runs the
    same TensorFlow's op suites (tf221: keras3 runs TF 2.21's)."""
    from support import stack  # pylint: disable=import-outside-toplevel
    return [] if stack.TF_OPS_SUITES_ON[stack.THIS_STACK] else ["ops"]


collect_ignore = _tf_ops_suites_ignored()


def pytest_terminal_summary(terminalreporter):
    if collect_ignore:
        terminalreporter.write_line(
            "tests/ops not collected on this stack: the keras3 stack runs the same "
            "TensorFlow's op suites (tests/support/stack.py, TF_OPS_SUITES_ON).")
