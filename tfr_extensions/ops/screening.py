"""The input conventions and the bad-input policy (stated in :mod:`tfr_extensions.losses.base`)
of every loss and metric, written once against the array namespace (PyTorch-native bodies:
:mod:`tfr_extensions.torch_ops.screening`). Shapes and dtype: :func:`check_list_shapes`,
:func:`compute_dtype`, :func:`prepare_scores`, :func:`prepare_lists`; padding:
:func:`valid_documents`, :func:`labels_with_mask` and, on TensorFlow, ragged inputs (the
namespace's ``ragged``); non-finite scores and too large labels: :func:`screen_lists`,
:func:`screened_loss` (NaN loss, zero gradient, O(B L), no host sync); lists without a
relevant document: :func:`has_relevant`; Keras classes: :func:`loss_inputs`, :func:`metric_inputs`.

>>> xp = arrays.namespace()
>>> _, scores, valid, broken = screen_lists(xp.convert_to_tensor([[1., -1.]]),
...                                         xp.convert_to_tensor([[float("nan"), 2.]]), 31.0)
>>> [xp.convert_to_numpy(x).tolist() for x in (scores, valid, broken)]
[[[0.0, 2.0]], [[True, False]], [True]]
"""
from typing import Any, Callable, Mapping, Tuple

from tfr_extensions import arrays
from tfr_extensions.ops.conventions import PADDING_LABEL

#: TF-Ranking's paddings of ragged scores and per-document weights (labels: ``PADDING_LABEL``).
PADDING_PREDICTION = -1e6
PADDING_WEIGHT = 0.0


def _rank(x):
    """The number of dimensions, None where unknown (a TensorFlow graph's)."""
    try:
        return len(x.shape)
    except ValueError:  # TensorFlow: "Cannot take the length of shape with unknown rank"
        return None


def compute_dtype(scores) -> str:
    """``"float64"`` for float64 scores, ``"float32"`` for everything else (incl. float16)."""
    return "float64" if arrays.namespace().dtype_name(scores) == "float64" else "float32"


def check_list_shapes(labels, scores) -> None:
    """Raises ValueError unless labels and scores are both rank 2 and compatible."""
    ranks = []
    for arg, tensor in (("labels", labels), ("scores", scores)):
        rank = _rank(tensor)
        if rank is not None and rank != 2:
            raise ValueError(f"`{arg}` must have shape [batch, list_size]; got rank {rank} "
                             f"(shape {tuple(tensor.shape)}).")
        ranks.append(rank)
    if None not in ranks and not all(a is None or b is None or a == b
                                     for a, b in zip(labels.shape, scores.shape)):
        raise ValueError(f"`labels` and `scores` must have the same shape; got "
                         f"{tuple(labels.shape)} and {tuple(scores.shape)}.")


def valid_documents(labels, mask=None):
    """The padding rule, bool ``[batch, list_size]``: label >= 0 (not NaN) and ``mask`` True.

    >>> xp = arrays.namespace()
    >>> valid = valid_documents(xp.convert_to_tensor([[2., -1., float("nan"), 0.]]),
    ...                         xp.convert_to_tensor([[True, True, True, False]]))
    >>> xp.convert_to_numpy(valid).tolist()
    [[True, False, False, False]]
    """
    valid = labels >= 0
    if mask is not None:
        xp = arrays.namespace()
        valid = xp.logical_and(valid, xp.cast(mask, "bool"))
    return valid


def has_relevant(labels, mask):
    """Bool ``[batch]``: the list has a valid document with label > 0 (else weight 0)."""
    xp = arrays.namespace()
    return xp.any(xp.logical_and(mask, labels > 0), axis=-1)


def _floating(xp, x):
    """``x`` as a tensor in the compute dtype (non-float ones in float32)."""
    x = xp.convert_to_tensor(x)
    return xp.cast(x, compute_dtype(x))


def prepare_scores(scores, mask=None):
    """Scores in the compute dtype, checked ``[batch, list_size]``, and the bool ``mask``."""
    xp = arrays.namespace()
    scores = _floating(xp, scores)
    rank = _rank(scores)
    if rank is not None and rank != 2:
        raise ValueError(
            f"`scores` must have shape [batch, list_size]; got {tuple(scores.shape)}.")
    valid = xp.ones_like(scores, dtype="bool") if mask is None else xp.cast(mask, "bool")
    return scores, valid


def prepare_lists(labels, scores, mask=None):
    """``(labels, scores, mask)``: labels and scores in the compute dtype, checked, padded
    labels 0 (no -1 reaches ``2^y``); ``mask`` of :func:`valid_documents`."""
    xp = arrays.namespace()
    scores = _floating(xp, scores)
    dtype = xp.dtype_name(scores)
    labels = xp.cast(xp.convert_to_tensor(labels), dtype)
    check_list_shapes(labels, scores)
    valid = valid_documents(labels, mask)
    return xp.where(valid, labels, xp.constant(0, dtype)), scores, valid


def labels_with_mask(y_true):
    """Labels ``[batch, list_size]`` from a tensor or keras-rs's dict ``{"labels": ...,
    "mask": ...}``, whose optional ``mask`` (True = valid) marks more padding (label -1).

    >>> xp = arrays.namespace()
    >>> labels = labels_with_mask({"labels": xp.convert_to_tensor([[2., 1.]]),
    ...                            "mask": xp.convert_to_tensor([[True, False]])})
    >>> xp.convert_to_numpy(labels).tolist()
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
    xp = arrays.namespace()
    if xp.ragged is not None:
        labels, mask = xp.ragged.dense_labels_and_mask(labels, mask)
    labels = xp.convert_to_tensor(labels)
    return xp.where(xp.cast(mask, "bool"), labels,
                    xp.constant(PADDING_LABEL, xp.dtype_name(labels)))


def screen_lists(labels, scores, max_label: float, mask=None):
    """The bad-input policy as tensors.

    Args:
      labels, scores: ``[batch, list_size]`` in the compute dtype.
      max_label: the largest label a valid document may have.
      mask: optional bool ``[batch, list_size]``, False for more padding.

    Returns:
      ``(labels, scores, mask, broken)``: ``mask`` of :func:`valid_documents`; labels 0 at
      padded documents, capped at ``max_label``; non-finite scores selected to 0 (zero
      gradient), so no NaN reaches another list; ``broken`` bool ``[batch]``: a valid
      document has a non-finite score or a label above ``max_label``.
    """
    xp = arrays.namespace()
    check_list_shapes(labels, scores)
    valid = valid_documents(labels, mask)  # False for NaN labels
    finite = xp.isfinite(scores)
    zero = xp.constant(0, xp.dtype_name(scores))
    bad = xp.logical_and(valid, xp.logical_not(xp.logical_and(finite, labels <= max_label)))
    broken = xp.any(bad, axis=-1)
    labels = xp.where(valid, xp.minimum(labels, max_label), zero)
    return labels, xp.where(finite, scores, zero), valid, broken


def screened_loss(body: Callable, labels, scores, mask, max_label: float,
                  options: Mapping[str, Any]):
    """``body(labels, scores, mask=valid, **options)`` under the bad-input policy (ragged inputs
    padded, :func:`screen_lists`, NaN losses for broken lists): ``(losses, weights, aux)``,
    ``aux`` the body's third output or ``{}``."""
    xp = arrays.namespace()
    if xp.ragged is not None:
        labels, scores, mask = xp.ragged.dense_lists(labels, scores, mask)
    scores = _floating(xp, scores)
    labels, scores, valid, broken = screen_lists(
        xp.cast(xp.convert_to_tensor(labels), xp.dtype_name(scores)), scores, max_label, mask)
    # broken lists: exactly zero gradient, selected on the scores, not the upstream
    # (``docs/notes/twin_sigmoid_speed.md``)
    scores = xp.where(broken[:, None], xp.stop_gradient(scores), scores)
    losses, weights, *aux = body(labels, scores=scores, mask=valid, **options)
    dtype = xp.dtype_name(losses)  # (the NaN: a constant of the backward pass)
    nan = xp.where(broken, xp.constant(float("nan"), dtype), xp.constant(0, dtype))
    return losses + xp.stop_gradient(nan), weights, (aux[0] if aux else {})


def listwise_sample_weights(labels, sample_weight):
    """Per-list weights ``[batch, 1]`` from per-list or per-item sample weights, the latter
    averaged weighted by the valid labels (TF-Ranking's ``_ListwiseLoss``).

    >>> xp = arrays.namespace()
    >>> weights = listwise_sample_weights(xp.convert_to_tensor([[1., 3.]]),
    ...                                   xp.convert_to_tensor([[2., 6.]]))
    >>> xp.convert_to_numpy(weights).tolist()
    [[5.0]]
    """
    xp = arrays.namespace()
    dtype = xp.dtype_name(labels)
    weights = xp.cast(xp.convert_to_tensor(sample_weight), dtype)
    rank = _rank(weights)
    if rank == 0:
        return xp.broadcast_to(weights, (xp.shape(labels)[0], 1))
    if rank == 1:
        return weights[:, None]
    if rank == 2 and weights.shape[1] == 1:
        return weights
    relevance = xp.where(valid_documents(labels), labels, xp.constant(0, dtype))
    total = xp.sum(relevance, axis=1, keepdims=True)
    weighted = xp.sum(weights * relevance, axis=1, keepdims=True)
    return xp.safe_divide(weighted, total)


def loss_inputs(y_true, y_pred, sample_weight, ragged: bool):
    """What a Keras loss class computes on, ``(labels, scores, list_weights, dtype)``: keras-rs's
    dicts and ragged inputs (TensorFlow only; all with ``ragged``) padded, cast to the compute
    dtype, weights per list ``[batch, 1]`` (:func:`listwise_sample_weights`)."""
    xp = arrays.namespace()
    y_true = labels_with_mask(y_true)
    if xp.ragged is not None:
        y_true, y_pred, sample_weight = xp.ragged.dense_loss_inputs(
            y_true, y_pred, sample_weight, ragged)
    elif ragged:
        raise ValueError("`ragged=True` takes tf.RaggedTensor inputs, which exist on Keras's "
                         "TensorFlow backend only. Pad the lists (label -1) instead.")
    y_pred = _floating(xp, y_pred)
    dtype = xp.dtype_name(y_pred)
    y_true = xp.cast(xp.convert_to_tensor(y_true), dtype)
    if sample_weight is not None:
        sample_weight = listwise_sample_weights(y_true, sample_weight)
    return y_true, y_pred, sample_weight, dtype


def metric_inputs(y_true, y_pred) -> Tuple[Any, Any, Any]:
    """What a Keras metric computes on, ``(labels, scores, valid)``: ``y_true`` as in
    :func:`loss_inputs` (ragged scores padded with 0), float32 labels.

    >>> xp = arrays.namespace()
    >>> labels, _, valid = metric_inputs(
    ...     {"labels": xp.convert_to_tensor([[1., 0.], [2., 0.]]),
    ...      "mask": xp.convert_to_tensor([[True, False], [True, True]])},
    ...     xp.convert_to_tensor([[0.5, 0.], [1., 2.]]))
    >>> xp.convert_to_numpy(labels).tolist(), xp.convert_to_numpy(valid).tolist()
    ([[1.0, -1.0], [2.0, 0.0]], [[True, False], [True, True]])
    """
    xp = arrays.namespace()
    y_true = labels_with_mask(y_true)
    if xp.ragged is not None:
        y_true, y_pred = xp.ragged.dense_metric_inputs(y_true, y_pred)
    labels = xp.cast(xp.convert_to_tensor(y_true), "float32")
    return labels, xp.convert_to_tensor(y_pred), valid_documents(labels)


def name_scope(name: str):
    """The name scope of a loss's ops (TensorFlow's; JAX and PyTorch have none)."""
    return arrays.namespace().name_scope(name)
