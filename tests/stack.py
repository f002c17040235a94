"""Which supported stack the tests run on: TF-Ranking comparisons, the other stack.

``tfr`` is TF-Ranking's module on the tf215 stack and None on tf221 (where it
does not import); tests that compare with it carry ``needs_tf_ranking`` (or a
module calls :func:`skip_module_without_tf_ranking`) and skip, with the reason,
where it is None. Everything else runs on both stacks.

:func:`other_stack_python` gives the other stack's interpreter, for tests that
cross stacks (a SavedModel exported on one and served on the other).
"""
import os
import pathlib

import pytest
import tensorflow as tf

from tfr_extensions import compat

tfr = compat.tf_ranking()

NO_TF_RANKING = ("needs TF-Ranking, which does not import on this stack "
                 "(tf221: TensorFlow >= 2.16 has no tf.estimator)")

needs_tf_ranking = pytest.mark.skipif(tfr is None, reason=NO_TF_RANKING)


def skip_module_without_tf_ranking() -> None:
    """Skips the calling test module where TF-Ranking does not import."""
    if tfr is None:
        pytest.skip(NO_TF_RANKING, allow_module_level=True)


REPO = pathlib.Path(__file__).resolve().parents[1]
#: stack -> (its virtualenv in the repository, its environment); see the Makefile
STACKS = {"tf215": (".venv", {}), "tf221": (".venv-tf221", {"TF_USE_LEGACY_KERAS": "1"})}
THIS_STACK = "tf215" if tf.__version__.startswith("2.15.") else "tf221"
OTHER_STACK = "tf221" if THIS_STACK == "tf215" else "tf215"


def other_stack_python():
    """``(python, env)`` of the other stack's virtualenv.

    ``.ci/run`` sets up tf215 first, so on tf221 the tf215 venv must exist
    (the test fails, with the command to run, when it does not); on tf215 a
    missing tf221 venv skips (the tf221 run, after this one, covers both
    directions).
    """
    folder, extra_env = STACKS[OTHER_STACK]
    python = REPO / folder / "bin" / "python"
    if not python.exists():
        message = (f"the {OTHER_STACK} virtualenv {python.parent.parent} is not set up "
                   f"(make setup STACK={OTHER_STACK})")
        if THIS_STACK == "tf221":
            pytest.fail(message)
        pytest.skip(message + "; the tf221 run of .ci/run tests both directions")
    env = {key: value for key, value in os.environ.items() if key != "TF_USE_LEGACY_KERAS"}
    return str(python), dict(env, TF_CPP_MIN_LOG_LEVEL="2", **extra_env)
