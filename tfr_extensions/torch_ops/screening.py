r"""The bad-input policy of :func:`tfr_extensions.ops.screening.screened_loss` around the
PyTorch-native bodies, in PyTorch operations (the Keras classes' input handling is
:mod:`tfr_extensions.ops.screening`'s): a dozen torch kernels for ``keras.ops``'s thirty
calls (the eager twin-sigmoid, 32 lists of 128 on a CPU: 3.0-4.6 ms a call against 5.4-5.7).

>>> body = lambda labels, scores, mask: (-(scores * labels).sum(-1), mask.any(-1).float())
>>> losses, weights, aux = screened_loss(
...     body, torch.tensor([[1., -1.], [2., 0.]]), torch.tensor([[0.5, 9.], [float("nan"), 1.]]),
...     None, 31.0, {})
>>> losses, weights
(tensor([-0.5000,     nan]), tensor([1., 1.]))
"""
from typing import Any, Callable, Mapping

import torch
from keras import ops

from tfr_extensions.ops.screening import check_list_shapes, loss_inputs, name_scope  # noqa: F401


def screen_lists(labels, scores, max_label: float, mask=None):
    """:func:`tfr_extensions.ops.screening.screen_lists`'s ``(labels, scores, valid, broken)``
    (``labels`` and ``scores`` in one float dtype, ``[batch, list_size]``)."""
    check_list_shapes(labels, scores)
    valid = labels >= 0  # False for NaN labels
    if mask is not None:
        valid = valid & mask.to(torch.bool)
    finite = torch.isfinite(scores)
    broken = (valid & ~(finite & (labels <= max_label))).any(dim=-1)
    labels = torch.where(valid, labels.clamp(max=max_label), 0.0)
    return labels, torch.where(finite, scores, 0.0), valid, broken


def screened_loss(body: Callable, labels, scores, mask, max_label: float,
                  options: Mapping[str, Any]):
    """A PyTorch-native body's ``(losses, weights, aux)`` under the bad-input policy, as
    :func:`tfr_extensions.ops.screening.screened_loss` (float64 scores in float64, else float32)."""
    scores = ops.convert_to_tensor(scores)
    dtype = torch.float64 if scores.dtype == torch.float64 else torch.float32
    labels, scores, valid, broken = screen_lists(
        ops.convert_to_tensor(labels).to(dtype), scores.to(dtype), max_label,
        None if mask is None else ops.convert_to_tensor(mask))
    scores = torch.where(broken[:, None], scores.detach(), scores)  # no gradient there
    losses, weights, *aux = body(labels, scores=scores, mask=valid, **options)
    nan = torch.where(broken, float("nan"), 0.0)  # (float32: float64 losses keep their dtype)
    return losses + nan, weights, (aux[0] if aux else {})


def has_relevant(labels, mask):
    """Bool ``[batch]``: the list has a valid document with label > 0
    (:func:`tfr_extensions.ops.screening.has_relevant`)."""
    return (mask & (labels > 0)).any(dim=-1)
