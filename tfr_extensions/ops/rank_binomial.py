r"""The TensorFlow half of SoftRank's rank distributions (``xp.rank_binomial`` of
:mod:`tfr_extensions.ops.rank_distributions`): the win probabilities with a hand-written
gradient, and the exact Rank-Binomial recursion (Eq. 11-12) as a balanced product tree
(:mod:`tfr_extensions.keras_ops.rank_binomial`: one document at a time). Kept per framework
by ``python -m benchmarks.loss_throughput --cases softndcg10_exact,expected_utility_5``
(SoftNDCG@10 at 0.18-0.24 of the peer in graph mode, 0.03-0.11 under XLA, ``docs/speed.md``).

A polynomial :math:`\prod_i ((1-\pi_{ij}) + \pi_{ij} z)` is a list of coefficient tensors,
multiplied by element-wise products and one ``add_n`` per coefficient (plain arithmetic for
XLA and autodiff), cut to :math:`z^0..z^{R-1}`. Static L <= ``MAX_TREE_LIST_SIZE`` and R <=
``MAX_TREE_RANKS``: one balanced tree, ``ceil(log2 L)`` levels. Otherwise a tree per chunk of
``CHUNK_SIZE`` documents, multiplied into the ``[R, B, L]`` distribution in a ``tf.foldl`` of
``tf.recompute_grad`` steps (one state kept per chunk). Under XLA, the ``XLA_`` sizes.
"""
import math
from typing import List, Optional

import tensorflow as tf

from tfr_extensions.ops import lists

#: documents per step of the exact recursion's loop (a power of 2); XLA_CHUNK_SIZE under XLA
CHUNK_SIZE = 32
XLA_CHUNK_SIZE = 8

#: up to MAX_TREE_LIST_SIZE documents (XLA's CPU runs the loop faster past 64) and
#: MAX_TREE_RANKS ranks, one product tree (fastest); otherwise the loop (least memory)
MAX_TREE_RANKS = 16
MAX_TREE_LIST_SIZE = 2048
XLA_MAX_TREE_LIST_SIZE = 64


def win_probabilities(scaled: tf.Tensor, losers: tf.Tensor, columns: Optional[tf.Tensor],
                      neutral_z: float) -> tf.Tensor:
    r""":math:`\pi_{ij} = \tfrac12(1 + \operatorname{erf}(z_{ij}))`, ``[L_i, B, K]``,
    :math:`z_{ij}` = ``scaled[b, i] - losers[b, k]`` (``losers``: the scaled scores of the
    documents ``columns``, int ``[B, K]``, or all when None), ``neutral_z`` for i == j (``erf``:
    ``erfc`` has no vectorized CPU kernel). The gradient
    :math:`\partial\pi_{ij}/\partial z_{ij} = e^{-z_{ij}^2}/\sqrt\pi` recomputes z: nothing
    ``[L, B, K]`` is kept."""
    dtype = scaled.dtype
    size = tf.shape(scaled)[1]

    @tf.custom_gradient
    def win(winners, losers):
        def differences():  # (built again in the backward pass, none of it kept)
            documents = tf.range(size)
            if columns is None:
                same = tf.equal(documents[:, None, None], documents[None, None, :])  # [L, 1, L]
            else:
                same = tf.equal(documents[:, None, None],
                                tf.cast(columns, documents.dtype)[None, :, :])  # [L, B, K]
            return tf.where(same, tf.constant(neutral_z, dtype),
                            tf.transpose(winners)[:, :, None] - losers[None, :, :])

        def grad(upstream):
            with tf.control_dependencies([upstream]):  # recompute z only now
                z = differences()
            dz = upstream * tf.exp(-tf.square(z))
            scale = tf.constant(1.0 / math.sqrt(math.pi), dtype)
            return (scale * tf.transpose(tf.reduce_sum(dz, axis=2)),
                    -scale * tf.reduce_sum(dz, axis=0))

        return 0.5 + 0.5 * tf.math.erf(differences()), grad

    return win(scaled, losers)


def _multiply(a: List[tf.Tensor], b: List[tf.Tensor], max_len: Optional[int]) -> List[tf.Tensor]:
    """Product of two polynomials (lists of coefficient tensors), truncated to
    ``max_len`` coefficients: ``c_r = sum_{t + u = r} a_t b_u``."""
    size = len(a) + len(b) - 1 if max_len is None else min(len(a) + len(b) - 1, max_len)
    return [tf.add_n([a[t] * b[r - t] for t in range(max(0, r - len(b) + 1), min(r, len(a) - 1) + 1)])
            for r in range(size)]


def _first_level(win: tf.Tensor, max_len: Optional[int]) -> List[tf.Tensor]:
    r"""The products of the factors of ``win``'s two halves in w alone (one product):
    :math:`(1-a)(1-b) = 1 - (a+b) + ab`, :math:`a(1-b) + b(1-a) = (a+b) - 2ab`."""
    first, second = tf.split(win, 2, axis=0)
    both, either = first * second, first + second
    return [(1.0 - either) + both, either - 2.0 * both, both][:max_len]


def _next_level(polys: List[tf.Tensor], max_len: Optional[int]) -> List[tf.Tensor]:
    """The products of the polynomials' two halves along the leading axis."""
    halves = [tf.split(p, 2, axis=0) for p in polys]  # (gradient: one concat)
    return _multiply([a for a, _ in halves], [b for _, b in halves], max_len)


#: Outside XLA, trees of at least this many documents run each level (and its gradient) as
#: one XLA program (one pass over memory); shorter ones stay graph ops (cheaper launches).
COMPILED_LEVELS_MIN_LIST_SIZE = 128
_compiled_first_level = tf.function(_first_level, jit_compile=True, reduce_retracing=True)
_compiled_next_level = tf.function(_next_level, jit_compile=True, reduce_retracing=True)


def _product_tree(win: tf.Tensor, max_len: Optional[int]) -> List[tf.Tensor]:
    r""":math:`\prod_i ((1 - w_i) + w_i\,x)` over the leading axis of ``win`` (a static
    power of 2): ``min(n + 1, max_len)`` coefficient tensors of the trailing shape."""
    first_level, next_level = _first_level, _next_level
    if win.shape[0] >= COMPILED_LEVELS_MIN_LIST_SIZE and not lists.compiling_with_xla():
        first_level, next_level = _compiled_first_level, _compiled_next_level
    polys = first_level(win, max_len)
    for _ in range(int(win.shape[0]).bit_length() - 2):
        polys = next_level(polys, max_len)
    return [p[0] for p in polys]


def _stack(coefficients: List[tf.Tensor], num: int) -> tf.Tensor:
    """``[num, ...]``: the coefficients, zero beyond the last one."""
    out = tf.stack(coefficients)
    if len(coefficients) < num:
        out = tf.pad(out, [[0, num - len(coefficients)]] + [[0, 0]] * (out.shape.rank - 1))
    return out


def exact(win: tf.Tensor, num_ranks, static_ranks: Optional[int]):
    """The Rank-Binomial recursion (Eq. 11-12), ``[R, B, L_j]``, R = ``num_ranks``."""
    xla = lists.compiling_with_xla()
    max_tree = XLA_MAX_TREE_LIST_SIZE if xla else MAX_TREE_LIST_SIZE
    small = static_ranks is not None and static_ranks <= MAX_TREE_RANKS
    if win.shape[0] is not None and win.shape[0] <= max_tree and small:
        size = int(win.shape[0])  # padded with neutral factors (win 0) to a power of 2:
        win = tf.pad(win, [[0, max(2, 1 << (size - 1).bit_length()) - size], [0, 0], [0, 0]])
        return _stack(_product_tree(win, static_ranks), static_ranks)
    size, batch = tf.shape(win)[0], tf.shape(win)[1]
    chunk = XLA_CHUNK_SIZE if xla else CHUNK_SIZE
    if win.shape[0] is not None:  # short static lists: a smaller tree suffices
        chunk = min(chunk, max(2, 1 << (int(win.shape[0]) - 1).bit_length()))
    num_chunks = (size + chunk - 1) // chunk
    win = tf.pad(win, [[0, num_chunks * chunk - size], [0, 0], [0, 0]])
    win = tf.reshape(win, [num_chunks, chunk, batch, -1])  # (the last chunk padded)
    delta = tf.one_hot(tf.zeros(tf.shape(win)[2:], tf.int32), num_ranks, axis=0,
                       dtype=win.dtype)  # [R, B, L]
    if static_ranks is not None:
        delta = tf.ensure_shape(delta, [static_ranks] + delta.shape[1:])
    tree_ranks = static_ranks if small else None  # (large R: the chunk's full product)

    @tf.recompute_grad
    def step(state, chunk_win):
        # (recompute_grad drops static shapes, which the products need)
        chunk_win = tf.ensure_shape(chunk_win, [chunk, None, None])
        state = tf.ensure_shape(state, delta.shape)
        poly = _product_tree(chunk_win, tree_ranks)
        if small:
            return _stack(_multiply(poly, tf.unstack(state), static_ranks), static_ranks)
        # state * poly along axis 0, truncated to the (possibly dynamic) length of state
        length, out = tf.shape(state)[0], poly[0] * state
        for t in range(1, len(poly)):
            out += poly[t] * tf.pad(state, [[t, 0]] + [[0, 0]] * (state.shape.rank - 1))[:length]
        return tf.ensure_shape(out, state.shape)

    return tf.foldl(step, win, initializer=delta)
