"""pytest set-up shared by ``tests/`` and the package's doctests (``--doctest-modules``).

Without TF-Ranking (the tf221 and keras3 stacks), ``tfr_extensions/tfranking.py``
cannot be imported, so its doctests are not collected; the old module names
(:data:`DEPRECATED_ALIASES`) are never collected; without TensorFlow (the
jax and torch stacks) the modules that are TensorFlow programs by nature are not
collected either (:data:`NEEDS_TENSORFLOW`). The end of the report says so, and
counts the cross-stack tests that did not run (they need ``TFRX_CROSS_STACK=1``
and every stack set up, as ``.ci/run`` does).
"""
import os
import tempfile

# One JAX compilation cache for the suite's processes (the jobs the tests start compile the
# same small programs again and again); set before JAX is first imported.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR",
                      os.path.join(tempfile.gettempdir(), f"tfrx-jax-cache-{os.getuid()}"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.1")

from tfr_extensions import backend  # noqa: E402
from tfr_extensions import compat  # noqa: E402

NEEDS_TF_RANKING = ("tfr_extensions/tfranking.py",)
#: old module names kept for their users: importing one warns (DeprecationWarning)
DEPRECATED_ALIASES = ("tfr_extensions/pipeline.py",)
#: keras.ops exists on Keras 3 only: the Keras 2 stacks do not collect these doctests
NEEDS_KERAS_3 = ("tfr_extensions/keras_ops", "tfr_extensions/arrays/keras_namespace.py")
#: the modules that import TensorFlow (each one because TensorFlow is its point: the
#: TensorFlow implementation of the array math, tf.data, ELWC, SavedModel export,
#: TF-Ranking, IRGAN, the TensorFlow checkpoint and strategies of the jobs)
NEEDS_TENSORFLOW = (
    "tfr_extensions/ops/lists.py", "tfr_extensions/ops/numerics.py",
    "tfr_extensions/ops/rank_binomial.py",
    "tfr_extensions/ops/sorting.py", "tfr_extensions/ops/list_programs.py",
    "tfr_extensions/ops/ragged.py", "tfr_extensions/ops/step_seeds.py",
    "tfr_extensions/ops/sinkhorn.py",
    "tfr_extensions/arrays/tensorflow_namespace.py",
    "tfr_extensions/data/dataset.py", "tfr_extensions/data/elwc.py",
    "tfr_extensions/data/normalization.py", "tfr_extensions/evaluation_state.py",
    "tfr_extensions/serving.py", "tfr_extensions/strategies.py",
    "tfr_extensions/adversarial", "tfr_extensions/tfranking.py",
    "pipelines/resume.py", "pipelines/distributed.py", "pipelines/sampled_ranking_quality.py",
    "benchmarks",
)

#: the PyTorch-native bodies compute on torch tensors through Keras's PyTorch backend
NEEDS_TORCH_BACKEND = ("tfr_extensions/torch_ops",)

collect_ignore = list(DEPRECATED_ALIASES)
if not compat.has_tf_ranking():
    collect_ignore += list(NEEDS_TF_RANKING)
if not backend.IS_KERAS_3:
    collect_ignore += list(NEEDS_KERAS_3)
if backend.backend_name() != "torch":
    collect_ignore += list(NEEDS_TORCH_BACKEND)
if not backend.HAS_TENSORFLOW:
    collect_ignore += [path for path in NEEDS_TENSORFLOW if path not in collect_ignore]


def pytest_terminal_summary(terminalreporter):
    tensorflow = (f"TensorFlow {backend.tf.__version__}" if backend.HAS_TENSORFLOW
                  else "no TensorFlow")
    terminalreporter.write_line(f"Stack: {tensorflow}, {backend.describe()}"
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
    if not backend.HAS_TENSORFLOW:
        terminalreporter.write_line(
            "No TensorFlow: the doctests of the TensorFlow modules (conftest.NEEDS_TENSORFLOW) "
            "were not collected.")
    cross = [report for report in terminalreporter.stats.get("skipped", [])
             if "cross-stack test" in str(report.longrepr)]
    if cross:
        terminalreporter.write_line(
            f"{len(cross)} cross-stack tests skipped: run them with TFRX_CROSS_STACK=1 once "
            "every stack is set up (.ci/run does).")
