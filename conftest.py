"""pytest set-up shared by ``tests/`` and the package's doctests (``--doctest-modules``).

Without TF-Ranking (the tf221 and keras3 stacks), ``tfr_extensions/pipeline.py``
cannot be imported, so its doctests are not collected; the end of the report
says so, and counts the cross-stack tests that did not run (they need
``TFRX_CROSS_STACK=1`` and every stack set up, as ``.ci/run`` does).
"""
import tensorflow as tf

from tfr_extensions import backend
from tfr_extensions import compat

NEEDS_TF_RANKING = ("tfr_extensions/pipeline.py",)
#: keras.ops exists on Keras 3 only: the Keras 2 stacks do not collect these doctests
NEEDS_KERAS_3 = ("tfr_extensions/keras_ops",)

collect_ignore = [] if compat.has_tf_ranking() else list(NEEDS_TF_RANKING)
if not backend.IS_KERAS_3:
    collect_ignore += list(NEEDS_KERAS_3)


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(f"Stack: TensorFlow {tf.__version__}, {backend.describe()}"
                                f"; TF-Ranking {'imports' if compat.has_tf_ranking() else 'absent'}.")
    without_tfr = [path for path in collect_ignore if path in NEEDS_TF_RANKING]
    if without_tfr:
        terminalreporter.write_line(
            f"TF-Ranking does not import here: the doctests of {', '.join(without_tfr)} "
            "were not collected (they need it).")
    if not backend.IS_KERAS_3:
        terminalreporter.write_line(
            "Keras 2: tests/keras_ops and the doctests of tfr_extensions/keras_ops (keras.ops, "
            "Keras 3 only) were not collected.")
    cross = [report for report in terminalreporter.stats.get("skipped", [])
             if "cross-stack test" in str(report.longrepr)]
    if cross:
        terminalreporter.write_line(
            f"{len(cross)} cross-stack tests skipped: run them with TFRX_CROSS_STACK=1 once "
            "every stack is set up (.ci/run does).")
