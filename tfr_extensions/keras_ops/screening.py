"""The input conventions and the bad-input policy of every loss and metric, in
``keras.ops``: the twin of :mod:`tfr_extensions.ops.screening` (the same functions
and names, but for ragged inputs, which exist on TensorFlow only), for Keras 3 on
JAX and PyTorch; written once here, for the ``keras.ops`` implementation (and the
PyTorch-native bodies of :mod:`tfr_extensions.torch_ops`). The policy is stated
in :mod:`tfr_extensions.losses.base`; its functions here:

* **shapes and dtype**: :func:`check_list_shapes`, :func:`compute_dtype`,
  :func:`prepare_scores`, :func:`prepare_lists`;
* **padding**: :func:`valid_documents` (a label < 0 or NaN, or ``mask`` False) and
  keras-rs's ``{"labels", "mask"}`` (:func:`labels_with_mask`);
* **non-finite scores and labels above the maximum**: :func:`screen_lists` and
  :func:`screened_loss`;
* **lists without a relevant document**: :func:`has_relevant` (weight 0);
* **the Keras classes' inputs**: :func:`loss_inputs` (with
  :func:`listwise_sample_weights`) and :func:`metric_inputs`.

>>> from keras import ops
>>> _, scores, valid, broken = screen_lists(ops.array([[1., -1.]]),
...                                         ops.array([[float("nan"), 2.]]), 31.0)
>>> ops.convert_to_numpy(scores).tolist(), ops.convert_to_numpy(broken).tolist()
([[0.0, 2.0]], [True])
"""
import contextlib
from typing import Any, Callable, Mapping

from keras import backend
from keras import ops

from tfr_extensions.keras_ops import numerics
from tfr_extensions.ops.conventions import PADDING_LABEL


def compute_dtype(scores) -> str:
    """``"float64"`` for float64 scores, ``"float32"`` for everything else."""
    return "float64" if backend.standardize_dtype(scores.dtype) == "float64" else "float32"


def check_list_shapes(labels, scores) -> None:
    """Raises ValueError unless labels and scores are both rank 2 with the same shape."""
    for arg, tensor in (("labels", labels), ("scores", scores)):
        rank = len(tensor.shape)
        if rank != 2:
            raise ValueError(f"`{arg}` must have shape [batch, list_size]; got rank {rank} "
                             f"(shape {tuple(tensor.shape)}).")
    if not all(a is None or b is None or a == b for a, b in zip(labels.shape, scores.shape)):
        raise ValueError(f"`labels` and `scores` must have the same shape; got "
                         f"{tuple(labels.shape)} and {tuple(scores.shape)}.")


def valid_documents(labels, mask=None):
    """The padding rule: bool ``[batch, list_size]``, True for the documents with a
    label >= 0 (a NaN label is padding) and ``mask`` True (where given), as
    :func:`tfr_extensions.ops.screening.valid_documents`."""
    valid = labels >= 0
    if mask is not None:
        valid = ops.logical_and(valid, ops.cast(mask, "bool"))
    return valid


def has_relevant(labels, mask):
    """Bool ``[batch]``: the list has at least one valid document with label > 0 (a
    list without one gets weight 0 in every loss)."""
    return ops.any(ops.logical_and(mask, labels > 0), axis=-1)


def prepare_scores(scores, mask=None):
    """Scores in the compute dtype (non-float ones as float32), checked to be
    ``[batch, list_size]``, and the bool validity mask (all True when ``mask`` is None),
    as :func:`tfr_extensions.ops.screening.prepare_scores`."""
    scores = ops.convert_to_tensor(scores)
    if not backend.standardize_dtype(scores.dtype).startswith(("float", "bfloat")):
        scores = ops.cast(scores, "float32")
    scores = ops.cast(scores, compute_dtype(scores))
    if len(scores.shape) != 2:
        raise ValueError(f"`scores` must have shape [batch, list_size]; got {tuple(scores.shape)}.")
    valid = ops.ones_like(scores, dtype="bool") if mask is None else ops.cast(mask, "bool")
    return scores, valid


def prepare_lists(labels, scores, mask=None):
    """``(labels, scores, mask)`` in the compute dtype, padded labels 0 and
    ``mask`` bool ``[batch, list_size]`` (True = valid, :func:`valid_documents`)."""
    scores = ops.convert_to_tensor(scores)
    dtype = compute_dtype(scores)
    scores = ops.cast(scores, dtype)
    labels = ops.cast(ops.convert_to_tensor(labels), dtype)
    check_list_shapes(labels, scores)
    valid = valid_documents(labels, mask)
    return ops.where(valid, labels, ops.zeros_like(labels)), scores, valid


def labels_with_mask(y_true):
    """Labels ``[batch, list_size]`` from a tensor or keras-rs's ``{"labels", "mask"}``
    (``mask`` False becomes label -1), as :func:`tfr_extensions.ops.screening.labels_with_mask`.

    >>> from keras import ops
    >>> labels = labels_with_mask({"labels": [[2., 1.]], "mask": [[True, False]]})
    >>> ops.convert_to_numpy(labels).tolist()
    [[2.0, -1.0]]
    """
    if not isinstance(y_true, Mapping):
        return y_true
    unknown = sorted(set(y_true) - {"labels", "mask"})
    if "labels" not in y_true or unknown:
        raise ValueError("`y_true` as a dict must be keras-rs's {'labels': ..., 'mask': ...} "
                         f"('mask' optional); got the keys {sorted(y_true)}.")
    labels, mask = y_true["labels"], y_true.get("mask")
    if mask is None:
        return labels
    labels = ops.convert_to_tensor(labels)
    return ops.where(ops.cast(mask, "bool"), labels, numerics.full_like(labels, PADDING_LABEL))


def screen_lists(labels, scores, max_label: float, mask=None):
    """The bad-input policy of :mod:`tfr_extensions.losses.base`, as tensors:
    ``(labels, scores, valid, broken)`` exactly as
    :func:`tfr_extensions.ops.screening.screen_lists` returns them (labels 0 at
    padding and capped at ``max_label``, non-finite scores set to 0, ``broken``
    ``[batch]`` the lists with a valid document whose score is not finite or
    whose label exceeds ``max_label``)."""
    check_list_shapes(labels, scores)
    valid = valid_documents(labels, mask)  # False for NaN labels
    finite = ops.isfinite(scores)
    bad = ops.logical_and(valid, ops.logical_not(
        ops.logical_and(finite, labels <= max_label)))
    broken = ops.any(bad, axis=-1)
    zero = ops.zeros_like(scores)
    labels = ops.where(valid, numerics.minimum(labels, float(max_label)), zero)
    return labels, ops.where(finite, scores, zero), valid, broken


def no_gradient_where(broken, scores):
    """``scores`` whose gradient is exactly 0 in the lists where ``broken`` is set."""
    return ops.where(broken[:, None], ops.stop_gradient(scores), scores)


def nan_where(broken, losses):
    """``losses`` with NaN in the lists where ``broken`` is set, and the same gradient."""
    nan = ops.where(broken, numerics.full_like(losses, float("nan")), ops.zeros_like(losses))
    return losses + ops.stop_gradient(nan)


def screened_loss(body: Callable, labels, scores, mask, max_label: float,
                  options: Mapping[str, Any]):
    """A loss body under the bad-input policy: ``(losses, weights, aux)``.

    Screens ``labels``/``scores`` (:func:`screen_lists`), runs ``body(labels, scores,
    mask=valid, **options)`` on scores with no gradient in broken lists, and gives
    those lists NaN losses: :func:`tfr_extensions.ops.screening.screened_loss`
    in ``keras.ops``.
    """
    scores = ops.convert_to_tensor(scores)
    dtype = compute_dtype(scores)
    labels, scores, valid, broken = screen_lists(
        ops.cast(ops.convert_to_tensor(labels), dtype), ops.cast(scores, dtype), max_label, mask)
    losses, weights, *aux = body(labels, scores=no_gradient_where(broken, scores), mask=valid,
                                 **options)
    return nan_where(broken, losses), weights, (aux[0] if aux else {})


def listwise_sample_weights(labels, sample_weight):
    """Per-list weights ``[batch, 1]`` from per-list or per-item sample weights
    (TF-Ranking's listwise rule: the label-weighted mean of the item weights), as
    :func:`tfr_extensions.ops.screening.listwise_sample_weights`."""
    weights = ops.cast(ops.convert_to_tensor(sample_weight), labels.dtype)
    rank = len(weights.shape)
    if rank == 0:
        return ops.broadcast_to(weights, (ops.shape(labels)[0], 1))
    if rank == 1:
        return weights[:, None]
    if rank == 2 and weights.shape[1] == 1:
        return weights
    relevance = ops.where(valid_documents(labels), labels, ops.zeros_like(labels))
    total = ops.sum(relevance, axis=1, keepdims=True)
    weighted = ops.sum(weights * relevance, axis=1, keepdims=True)
    return numerics.safe_divide(weighted, total)


def loss_inputs(y_true, y_pred, sample_weight, ragged: bool):
    """What a Keras loss class computes on: ``(labels, scores, list_weights, dtype)``,
    as :func:`tfr_extensions.ops.screening.loss_inputs` (ragged tensors exist on
    TensorFlow only: ``ragged`` must be False here)."""
    if ragged:
        raise ValueError("`ragged=True` takes tf.RaggedTensor inputs, which exist on Keras's "
                         "TensorFlow backend only. Pad the lists (label -1) instead.")
    y_true = labels_with_mask(y_true)
    y_pred = ops.convert_to_tensor(y_pred)
    dtype = compute_dtype(y_pred)
    y_pred = ops.cast(y_pred, dtype)
    y_true = ops.cast(ops.convert_to_tensor(y_true), dtype)
    if sample_weight is not None:
        sample_weight = listwise_sample_weights(y_true, sample_weight)
    return y_true, y_pred, sample_weight, dtype


def metric_inputs(y_true, y_pred):
    """What a Keras metric computes on: ``(labels, scores, valid)``, as
    :func:`tfr_extensions.ops.screening.metric_inputs`: labels float32 (keras-rs's
    mask as label -1), ``valid`` :func:`valid_documents`."""
    labels = ops.cast(ops.convert_to_tensor(labels_with_mask(y_true)), "float32")
    return labels, ops.convert_to_tensor(y_pred), valid_documents(labels)


def name_scope(name: str):  # pylint: disable=unused-argument
    """No name scope: JAX and PyTorch programs have none to give."""
    return contextlib.nullcontext()
