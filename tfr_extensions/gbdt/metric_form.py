r"""Exact ranks of a padded block and its metric as :math:`M = \frac{1}{Z}\sum_d w_d f(r_d)`.

The four metrics of the paper (Eq. 13-16) are written with positions and
weights held constant (:mod:`tfr_extensions.ops.rank_metrics`): the norm
:math:`Z` per list, the weights :math:`w_d` at the exact 1-based ranks
:math:`r` (one sort; ties broken by a random permutation, Section 4.2, or
shared as midranks), and :math:`f(r) = 1/\log_2(1 + r)` for nDCG, :math:`1/r`
otherwise. Its rank derivative :math:`\delta_d = w_d f'(r_d)/Z` (Eq. 29, 31-33)
is what :mod:`tfr_extensions.gbdt.terms` chains onto the twin-sigmoid pairs.
Arrays are ``[B, L]``, one row per list of a block; padding is invalid.

>>> valid = np.ones((1, 3), bool)
>>> ranks, order = positions(np.array([[0.5, 2.0, 0.5]]), valid, None)
>>> ranks.tolist(), order.tolist()  # ties: the lower index first
([[2, 1, 3]], [[1, 0, 2]])
"""
import numpy as np

_LN2 = float(np.log(2.0))


def ideal_norm(metric, gains, labels, valid, topn):
    """Z per list ``[B]`` (every list here has a relevant document)."""
    size = gains.shape[1]
    n_valid = valid.sum(1)
    if metric == "precision":
        return (n_valid if topn is None else np.minimum(n_valid, topn)).astype(np.float64)
    if metric == "ap":
        return ((labels > 0) & valid).sum(1).astype(np.float64)
    k = size if topn is None else min(topn, size)
    positions = np.arange(1, size + 1, dtype=np.float64)
    if metric == "ndcg":
        ideal = -np.sort(-gains, axis=1)[:, :k]
        return (ideal / np.log2(1.0 + positions[:k])).sum(1)
    stop = stop_probabilities(gains, labels, valid)  # nerr
    ideal = -np.sort(-stop, axis=1)[:, :k]
    return (_err_by_position(ideal) / positions[:k]).sum(1)


def stop_probabilities(gains, labels, valid):
    """Eq. 16's R = (2^y - 1) / 2^{max y}, with the list's maximum label."""
    top = np.where(valid, labels, 0.0).max(1, keepdims=True)
    return gains / np.power(2.0, top)


def _err_by_position(stop_by_position):
    """R_p prod_{q < p} (1 - R_q) for lists in position order."""
    reach = np.cumprod(1.0 - stop_by_position, axis=1)
    reach = np.concatenate([np.ones_like(reach[:, :1]), reach[:, :-1]], axis=1)
    return reach * stop_by_position


def _flat_index(values, index):
    """Indices into ``values.reshape(-1)`` of ``values[b, index[b, k]]``."""
    return index + np.arange(0, values.size, values.shape[1])[:, None]


def _take(values, index):
    """``values[b, index[b, k]]`` (``np.take_along_axis`` on axis 1, without its overhead)."""
    return np.take(values.reshape(-1), _flat_index(values, index))


def _put(out, index, values):
    """``out[b, index[b, k]] = values[b, k]`` (``np.put_along_axis`` on axis 1)."""
    out.reshape(-1)[_flat_index(out, index)] = values


def positions(scores, valid, rng):
    """1-based int positions ``[B, L]`` (descending score, padded last) and
    the order (``order[b, p - 1]`` = the document at position p). Ties: a
    uniformly random order from ``rng`` (a second sort, by tie group and then
    a uniform key), or the lower index first (rng None)."""
    keys = np.where(valid, -scores, np.inf)
    order = np.argsort(keys, axis=1, kind="stable")
    if rng is not None:
        ordered = _take(keys, order)
        tied = (ordered[:, 1:] == ordered[:, :-1]) & np.isfinite(ordered[:, 1:])
        if tied.any():
            group = np.zeros(keys.shape)
            np.cumsum(~tied, axis=1, out=group[:, 1:])
            order = _take(order, np.argsort(group + rng.random(keys.shape), axis=1, kind="stable"))
    result = np.empty_like(order)
    _put(result, order, np.broadcast_to(np.arange(1, keys.shape[1] + 1), order.shape))
    return result, order


def midranks(scores, valid, order):
    """Ranks with tied documents sharing the mean of their positions (Eq. 12
    without tie breaking: sigma+(0) = 1/2)."""
    keys = _take(np.where(valid, scores, -np.inf), order)
    size = keys.shape[1]
    index = np.arange(size)[None, :]
    first = np.ones(keys.shape, bool)
    first[:, 1:] = keys[:, 1:] != keys[:, :-1]
    last = np.ones(keys.shape, bool)
    last[:, :-1] = keys[:, :-1] != keys[:, 1:]
    start = np.maximum.accumulate(np.where(first, index, 0), axis=1)
    end = np.minimum.accumulate(np.where(last, index, size)[:, ::-1], axis=1)[:, ::-1]
    result = np.empty(keys.shape)
    _put(result, order, 1.0 + 0.5 * (start + end))
    return result


def weights(metric, block, positions, order, topn):
    """The weights w ``[B, L]`` of M = (1/Z) sum_d w_d f(r_d) (Eq. 13-16, 30),
    0 at padded documents and past the cutoff."""
    cut = block.valid if topn is None else block.valid & (positions <= topn)
    if metric == "ndcg":
        return np.where(cut, block.gains, 0.0)
    if metric == "precision":
        return np.where(cut & block.relevant, positions, 0.0)
    if metric == "ap":  # Eq. 30: b_d p_d sum_{e: p_d <= p_e <= k} b_e / p_e
        relevant = cut & block.relevant
        by_position = _take(np.where(relevant, 1.0 / positions, 0.0), order)
        suffix = np.cumsum(by_position[:, ::-1], axis=1)[:, ::-1]
        return np.where(relevant, positions * _take(suffix, positions - 1), 0.0)
    by_position = _err_by_position(_take(block.stop, order))  # nerr, Eq. 16
    return np.where(cut, _take(by_position, positions - 1), 0.0)


def transform(metric, ranks):
    """(f(r), f'(r)): 1/log2(1 + r) for nDCG, 1/r otherwise."""
    if metric == "ndcg":
        value = _LN2 / np.log1p(ranks)
        return value, -np.square(value) / (_LN2 * (1.0 + ranks))
    return 1.0 / ranks, -1.0 / np.square(ranks)
