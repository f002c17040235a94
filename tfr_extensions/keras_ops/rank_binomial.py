r"""The ``keras.ops`` half of SoftRank's rank distributions (``xp.rank_binomial`` of
:mod:`tfr_extensions.ops.rank_distributions`): the pairwise win probabilities and the exact
Rank-Binomial recursion (Eq. 11-12) one document at a time, :math:`O(B L K R)` time and as
much memory for autodiff; TensorFlow runs :mod:`tfr_extensions.ops.rank_binomial` (a
product tree with a hand-written gradient; the factors commute: equal up to rounding).

The recursion is a ``lax.scan`` under JAX (one compiled step whatever L), a Python loop
elsewhere; TF's product tree in ``keras.ops`` compiled 3-4x slower under ``jax.jit`` and ran
slower on a CPU (``docs/notes/keras_ops_backends.md``; ``python -m benchmarks.loss_throughput
--cases softndcg10_exact,expected_utility_5``).
"""
import functools

import keras
from keras import ops

from tfr_extensions.keras_ops import lists
from tfr_extensions.keras_ops import numerics


def win_probabilities(scaled, losers, columns, neutral_z: float):
    r""":math:`\pi_{ij} = \tfrac12(1 + \operatorname{erf}(z_{ij}))`, ``[L_i, B, K]``, with
    :math:`z_{ij}` = ``scaled[b, i] - losers[b, k]`` (``losers``: the scaled scores of the
    documents ``columns``, int ``[B, K]``, or all of them when None), and ``neutral_z``
    for the pairs i == j; the gradient is the backend's autodiff of ``erf``."""
    dtype = lists.dtype_name(scaled)
    documents = ops.arange(scaled.shape[1], dtype="int32")  # (not NumPy: torch.compile traces this)
    if columns is None:
        same = ops.equal(documents[:, None, None], documents[None, None, :])  # [L, 1, L]
    else:
        same = ops.equal(documents[:, None, None], ops.cast(columns, "int32")[None, :, :])
    z = ops.where(same, numerics.constant(neutral_z, dtype),
                  ops.transpose(scaled)[:, :, None] - losers[None, :, :])
    return 0.5 + 0.5 * ops.erf(z)


def exact(win, num_ranks: int, static_ranks=None):  # pylint: disable=unused-argument
    """The Rank-Binomial recursion (Eq. 11-12), ``[R, B, K]``, R = ``num_ranks`` (static): per
    beating document i (``win``'s leading axis), ``p <- p (1 - w_i) + shift(p) w_i`` truncated
    to R coefficients; padded documents and the pairs i == j have w = 0."""
    delta = ops.pad(ops.ones_like(win[:1]), [[0, num_ranks - 1], [0, 0], [0, 0]])  # Eq. 11

    def step(state, w):  # Eq. 12
        shifted = ops.concatenate([ops.zeros_like(state[:1]), state[:-1]], axis=0)
        return state * (1.0 - w) + shifted * w

    if keras.backend.backend() == "jax":
        return ops.scan(lambda state, w: (step(state, w), None), delta, win)[0]
    # (Keras's scan on PyTorch and TensorFlow stacks an output of the state's size per step)
    return functools.reduce(step, ops.unstack(win, axis=0), delta)
