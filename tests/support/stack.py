"""Which supported stack the tests run on: TF-Ranking comparisons, the other stacks.

``tfr`` is TF-Ranking's module on the tf215 stack and None on tf221 and keras3
(where it does not import); tests that compare with it carry
``needs_tf_ranking`` (or a module calls :func:`skip_module_without_tf_ranking`)
and skip, with the reason, where it is None. Everything else runs on every stack.

:func:`stack_python` gives another stack's interpreter, for tests that cross
stacks (a SavedModel exported on one and served on another; Keras 2 against
Keras 3). They run with ``TFRX_CROSS_STACK=1``, which ``.ci/run`` sets after
setting up every stack; a plain ``make test STACK=x`` skips them and says so.

Imports without TensorFlow: on the ``jax`` and ``torch`` stacks (Keras 3 on that
backend, no TensorFlow installed) :data:`THIS_STACK` is ``"jax"`` or ``"torch"``
and ``tfr`` is None. :data:`STACKS` (and :data:`OTHER_STACKS`) stay the TensorFlow
stacks, which the cross-stack tests (SavedModels, Keras 2 against Keras 3) use;
:data:`ALL_STACKS` adds the two without TensorFlow.
"""
import os
import pathlib

import pytest

from tfr_extensions import backend
from tfr_extensions import compat

tfr = compat.tf_ranking()

NO_TF_RANKING = ("needs TF-Ranking, which does not import on this stack "
                 "(tf221, keras3: TensorFlow >= 2.16 has no tf.estimator; jax, torch: "
                 "no TensorFlow)")

needs_tf_ranking = pytest.mark.skipif(tfr is None, reason=NO_TF_RANKING)


def skip_module_without_tf_ranking() -> None:
    """Skips the calling test module where TF-Ranking does not import."""
    if tfr is None:
        pytest.skip(NO_TF_RANKING, allow_module_level=True)


REPO = pathlib.Path(__file__).resolve().parents[2]
#: stack -> (its virtualenv in the repository, its environment); see the Makefile
STACKS = {"tf215": (".venv", {"TF_USE_LEGACY_KERAS": None}),
          "tf221": (".venv-tf221", {"TF_USE_LEGACY_KERAS": "1"}),
          "keras3": (".venv-keras3", {"TF_USE_LEGACY_KERAS": None})}
#: the stacks without TensorFlow: Keras 3 on one backend (``make setup STACK=jax|torch``)
NO_TF_STACKS = {"jax": (".venv-jax", {"TF_USE_LEGACY_KERAS": None, "KERAS_BACKEND": "jax"}),
                "torch": (".venv-torch", {"TF_USE_LEGACY_KERAS": None,
                                          "KERAS_BACKEND": "torch"})}
ALL_STACKS = {**STACKS, **NO_TF_STACKS}


def _this_stack() -> str:
    if not backend.HAS_TENSORFLOW:  # Keras 3 on JAX or PyTorch, as `pip install '.[jax]'`
        return backend.backend_name()
    if backend.tf.__version__.startswith("2.15."):
        return "tf215"
    return "keras3" if backend.IS_KERAS_3 else "tf221"


THIS_STACK = _this_stack()
#: the TensorFlow stacks other than this one (the cross-stack tests' partners)
OTHER_STACKS = tuple(name for name in STACKS if name != THIS_STACK)

#: Where the exhaustive suites of TensorFlow's ops run: ``tests/ops`` and the tests of
#: ``tests/losses`` marked :data:`tensorflow_ops_suite` (graph mode against eager, XLA,
#: gradients against closed forms and finite differences). They run on tf215, the default
#: stack. TensorFlow 2.21's ops are held to the same oracles by the backend-neutral suite
#: (``tests/neutral``: every loss against its oracle, eager and under XLA, and the
#: bad-input policy), which keras3 runs on them; tf221 has the same TensorFlow and keeps
#: its Keras 2 suites (CI's time budget). The stacks without TensorFlow have no
#: TensorFlow ops.
TF_OPS_SUITES_ON = {"tf215": True, "tf221": False, "keras3": False,
                    "jax": False, "torch": False}

#: Marks a test of TensorFlow's ops through the loss functions (graph mode against eager,
#: XLA, gradients against closed forms or finite differences): it runs where
#: :data:`TF_OPS_SUITES_ON` says.
tensorflow_ops_suite = pytest.mark.skipif(
    not TF_OPS_SUITES_ON[THIS_STACK],
    reason="an exhaustive test of TensorFlow's ops: runs on tf215 (TensorFlow 2.21's ops: "
           "tests/neutral on keras3; CI's time budget)")


def heavy_integration(*stacks: str):
    """Marks a multi-minute integration test (training runs, resumption, several
    replicas) that runs on ``stacks`` only: every other stack shares its Keras or
    its TensorFlow with one of them, and running it three times would take CI out of
    its time budget. It skips elsewhere, saying where it runs."""
    unknown = set(stacks) - set(ALL_STACKS)
    if unknown:
        raise ValueError(f"unknown stacks {sorted(unknown)}")
    return pytest.mark.skipif(
        THIS_STACK not in stacks,
        reason=f"heavy integration test: runs on {', '.join(stacks)} (CI's time budget)")


#: the environment variable that turns the cross-stack tests on (``.ci/run`` sets it
#: once every stack's virtualenv is set up)
CROSS_STACK_VARIABLE = "TFRX_CROSS_STACK"
CROSS_STACK_OFF = (f"a cross-stack test: runs where every stack is set up, with "
                   f"{CROSS_STACK_VARIABLE}=1 (.ci/run does both)")


def cross_stack_enabled() -> bool:
    """Whether the cross-stack tests run (``TFRX_CROSS_STACK=1``)."""
    return os.environ.get(CROSS_STACK_VARIABLE) == "1"


def stack_python(name: str):
    """``(python, env)`` of stack ``name``'s virtualenv, for a test that crosses stacks.

    Without ``TFRX_CROSS_STACK=1`` the test skips (``make test STACK=x`` on a fresh
    clone sets up one stack only; conftest's summary lists these skips); with it, a
    missing virtualenv fails the test with the command that sets it up.
    """
    if not cross_stack_enabled():
        pytest.skip(CROSS_STACK_OFF)
    folder, extra_env = ALL_STACKS[name]
    python = REPO / folder / "bin" / "python"
    if not python.exists():
        pytest.fail(f"{CROSS_STACK_VARIABLE}=1, but the {name} virtualenv "
                    f"{python.parent.parent} is not set up (make setup STACK={name})")
    env = {key: value for key, value in os.environ.items() if key not in extra_env}
    env.update({key: value for key, value in extra_env.items() if value is not None})
    return str(python), dict(env, TF_CPP_MIN_LOG_LEVEL="2")
