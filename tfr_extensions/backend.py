"""Which Keras this process runs, decided once: every module imports Keras from here.

    from tfr_extensions.backend import keras

``tf.keras`` decides, as TensorFlow itself does:

* TensorFlow 2.15: Keras 2 (``keras`` 2.15), with or without TF-Ranking;
* TensorFlow >= 2.16 with ``TF_USE_LEGACY_KERAS=1``: Keras 2 as ``tf_keras``;
* TensorFlow >= 2.16 otherwise: Keras 3 (``import keras``), nothing to set.

:data:`keras` is that module (``tf.keras`` on Keras 2, the ``keras`` package on
Keras 3), :data:`IS_KERAS_3` says which, and :data:`KERAS_VERSION` its version.

On Keras 3 the backend is ``KERAS_BACKEND`` (``tensorflow`` by default). The
losses, metrics, scorers, evaluation and the training jobs run on every backend.
The array math is written once against an array namespace with two fillings
(:mod:`tfr_extensions.arrays`), and :func:`implementation` is the one rule that picks
between them: TensorFlow's ops on Keras 2 and on Keras 3's TensorFlow backend,
``keras.ops`` on JAX and PyTorch. The parts that are
TensorFlow programs by nature (IRGAN, SavedModel export, tf.data, TF-Ranking)
call :func:`require_tensorflow_backend`, which raises
:class:`UnsupportedBackendError` naming the backend, at construction rather
than deep inside a traced step. Without TensorFlow installed (Keras 3 on JAX
or PyTorch), ``import tfr_extensions`` gives everything but those parts
(:data:`HAS_TENSORFLOW`; :func:`tensorflow` for a code path that needs it).

Differences of Keras 3 that the package absorbs here:

* :data:`DEFAULT_REDUCTION`: Keras 2's ``"auto"``, Keras 3's
  ``"sum_over_batch_size"`` (the same reduction inside ``fit``); a loss also
  accepts ``"auto"`` on Keras 3, so a Keras 2 config loads there.
* :func:`build_optimizer`: an optimizer's state created now, on either Keras.

>>> KERAS_VERSION.split(".")[0] == ("3" if IS_KERAS_3 else "2")
True
"""
import importlib
import math
import os
from typing import Sequence, Tuple

try:  # TensorFlow is optional on Keras 3's JAX and PyTorch backends
    import tensorflow as tf
except ImportError:  # pragma: no cover - exercised on machines without TensorFlow
    tf = None

#: whether TensorFlow imports in this process (the TensorFlow ops, the pure TF loss
#: functions, tf.data, export and the pipelines need it; ``tfrx.keras_ops`` does not)
HAS_TENSORFLOW = tf is not None

#: the environment variable that makes TF >= 2.16 map ``tf.keras`` to ``tf_keras``
LEGACY_KERAS_VARIABLE = "TF_USE_LEGACY_KERAS"


class UnsupportedBackendError(RuntimeError):
    """A Keras 3 backend that this part of the package does not run on."""


def tensorflow():
    """The ``tensorflow`` module, for the code paths that run on TensorFlow only;
    :class:`ImportError` naming what needs it where it is not installed."""
    if tf is None:
        raise ImportError("This code path runs on TensorFlow, which is not installed here "
                          f"({describe()}).")
    return tf


def keras_package() -> Tuple[str, str]:
    """``(package, version)`` of the Keras behind ``tf.keras``: ``("keras", "2.15.0")``
    on TF 2.15, ``("tf_keras", "2.21.0")`` with ``TF_USE_LEGACY_KERAS=1``,
    ``("keras", "3.15.1")`` with Keras 3.

    Raises:
      ImportError: ``tf.keras`` cannot be loaded (``TF_USE_LEGACY_KERAS=1``
        without ``tf_keras`` installed, for example); the message says what to do.
    """
    try:
        module_name = tf.keras.__name__
    except ImportError as error:
        setting = os.environ.get(LEGACY_KERAS_VARIABLE)
        raise ImportError(
            f"tfr_extensions needs Keras, but tf.keras does not load (TensorFlow "
            f"{tf.__version__}, {LEGACY_KERAS_VARIABLE}={setting!r}): {error}. For Keras 3 "
            f"unset {LEGACY_KERAS_VARIABLE} and `pip install keras`; for Keras 2 `pip install "
            f"'tf-keras=={'.'.join(tf.__version__.split('.')[:2])}.*'`.") from error
    package = module_name.split(".")[0]
    return package, importlib.import_module(package).__version__


def _load_keras():
    if not HAS_TENSORFLOW:  # Keras 3 on JAX or PyTorch, without TensorFlow installed
        try:
            keras3 = importlib.import_module("keras")
        except ModuleNotFoundError as error:
            if (error.name or "").split(".")[0] != "tensorflow":
                raise
            # Keras's backend is KERAS_BACKEND, else ~/.keras/keras.json, else TensorFlow
            raise ImportError(
                "tfr_extensions imports Keras 3, whose backend here is TensorFlow (Keras's "
                "default, or ~/.keras/keras.json), and TensorFlow is not installed. Pick an "
                "installed backend before the first import: KERAS_BACKEND=jax or "
                "KERAS_BACKEND=torch (in Python: os.environ['KERAS_BACKEND'] = 'jax')."
            ) from error
        return keras3, "keras", keras3.__version__
    package, version = keras_package()
    if version.startswith("2."):
        return tf.keras, package, version
    keras3 = importlib.import_module("keras")  # the package, not tf.keras's API mirror
    return keras3, "keras", keras3.__version__


keras, KERAS_PACKAGE, KERAS_VERSION = _load_keras()
#: whether :data:`keras` is Keras 3
IS_KERAS_3 = not KERAS_VERSION.startswith("2.")
#: the default ``reduction`` of the losses: Keras's own default
DEFAULT_REDUCTION = "sum_over_batch_size" if IS_KERAS_3 else "auto"


def backend_name() -> str:
    """``"tensorflow"`` on Keras 2; Keras 3's backend (``keras.backend.backend()``)."""
    return keras.backend.backend() if IS_KERAS_3 else "tensorflow"


def uses_tensorflow_ops() -> bool:
    """Whether the Keras classes compute with :mod:`tfr_extensions.ops` (Keras's
    TensorFlow backend) rather than :mod:`tfr_extensions.keras_ops` (JAX, PyTorch)."""
    return backend_name() == "tensorflow"


#: the two implementations of the array math (:func:`implementation`)
TENSORFLOW = "tensorflow"
KERAS_OPS = "keras_ops"
#: a loss's optional PyTorch-native body (:mod:`tfr_extensions.torch_ops`), run in
#: place of its :data:`KERAS_OPS` body on Keras 3's PyTorch backend
#: (:meth:`tfr_extensions.losses.base.LossSpec.implementation_of`)
TORCH = "torch"


def implementation() -> str:
    """The one rule that picks the body of every loss and metric: :data:`TENSORFLOW`
    (:mod:`tfr_extensions.ops`) on Keras 2 and on Keras 3's TensorFlow backend,
    :data:`KERAS_OPS` (:mod:`tfr_extensions.keras_ops`) on Keras 3's JAX and PyTorch
    backends."""
    return TENSORFLOW if uses_tensorflow_ops() else KERAS_OPS


def describe() -> str:
    """One line naming the Keras and its backend, e.g. ``"Keras 3.15.1 (keras), backend
    'jax'"``."""
    return f"Keras {KERAS_VERSION} ({KERAS_PACKAGE}), backend {backend_name()!r}"


def require_tensorflow_backend(feature: str) -> None:
    """Raises :class:`UnsupportedBackendError` unless Keras runs on TensorFlow.

    Args:
      feature: what needs it, as the user wrote it (``"tfrx.losses.TwinSigmoidLoss"``).
    """
    name = backend_name()
    if name != "tensorflow":
        raise UnsupportedBackendError(
            f"{feature} runs on Keras's TensorFlow backend; this process runs {describe()} "
            f"(KERAS_BACKEND={os.environ.get('KERAS_BACKEND')!r}). Set "
            "KERAS_BACKEND=tensorflow before Keras is first imported. The losses "
            "(tfrx.losses.get), tfrx.metrics.RankingMetric, the scorers (tfrx.models) and "
            "tfrx.keras_ops run on every backend.")


def standardize_reduction(reduction):
    """A loss's ``reduction`` for the active Keras: ``"auto"`` (Keras 2's default)
    means ``"sum_over_batch_size"`` on Keras 3, which has no ``"auto"``."""
    if IS_KERAS_3 and reduction == "auto":
        return "sum_over_batch_size"
    return reduction


def build_optimizer(optimizer, variables: Sequence) -> None:
    """Creates ``optimizer``'s state for ``variables`` now (Adam's moments, the
    iteration count), so that a checkpoint restores into it at once rather than
    deferring into the first traced training step. Keras 3 and Keras 2's optimizers
    (``LossScaleOptimizer`` included): ``optimizer.build(variables)``, which does
    nothing the second time; Keras 2's legacy ones: ``_create_all_weights``.

    Call it inside the strategy scope, after the model is built."""
    variables = list(variables)
    if hasattr(optimizer, "build"):
        optimizer.build(variables)
    elif hasattr(optimizer, "_create_all_weights"):  # keras.optimizers.legacy (Keras 2)
        optimizer._create_all_weights(variables)  # pylint: disable=protected-access
    else:
        raise TypeError(f"Cannot build the state of optimizer {optimizer!r} (a "
                        f"{type(optimizer).__name__}: no `build` method).")


def reduce_loss(losses, sample_weight, reduction: str, dtype):
    """Keras 3's reduction of weighted per-list losses ``[batch, 1]`` in ``dtype``
    (``keras.losses.Loss.__call__``'s, distribution scaling included), for the
    losses' own ``__call__``, which must not cast to floatx as Keras 3's does."""
    from keras.src.losses import loss as keras_loss  # pylint: disable=g-import-not-at-top
    count = math.prod(losses.shape) if None not in tuple(losses.shape) else None
    if reduction not in ("sum_over_batch_size", "mean") or not count:
        return keras_loss.reduce_weighted_values(losses, sample_weight=sample_weight,
                                                 reduction=reduction, dtype=dtype)
    # Keras's mean divides by the element count as a tensor made from the static shape,
    # on PyTorch a copy from host memory that waits for the GPU's queued kernels: the
    # sum's own reduction, then a division by the Python number
    total = keras_loss.reduce_weighted_values(losses, sample_weight=sample_weight,
                                              reduction="sum", dtype=dtype)
    return keras_loss.scale_loss_for_distribution(total / count)
