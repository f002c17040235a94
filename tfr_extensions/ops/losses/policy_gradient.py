"""The TensorFlow bodies of :mod:`tfr_extensions.losses.policy_gradient` (the math, the
public functions and the Keras classes are there; the ``keras.ops`` twins are
:mod:`tfr_extensions.keras_ops.losses.policy_gradient`), and the rewards they share:
sampled DCG rewards and sampled metrics of Plackett-Luce rankings."""
import numpy as np
import tensorflow as tf

from tfr_extensions.ops import lists
from tfr_extensions.ops import numerics
from tfr_extensions.ops import plackett_luce as pl
from tfr_extensions.ops import rank_metrics
from tfr_extensions.ops import vocabulary


def _ranking_size(rankings: tf.Tensor):
    """n of ``[B, S, n]`` rankings: a Python int when static, else a tensor."""
    size = rankings.shape[-1]
    return int(size) if size is not None else tf.shape(rankings)[-1]


def sampled_dcg_rewards(labels, rankings, mask, normalize: bool = True) -> tf.Tensor:
    r"""Per-position DCG rewards of sampled rankings, ``[B, S, n]``.

    :math:`r_t = (2^{y_{\pi^{-1}(t)}} - 1) / \log_2(1 + t)` for 1-based
    position t, divided by the ideal DCG@n of the list
    (:func:`tfr_extensions.ops.rank_metrics.ideal_dcg` at cutoff n) when
    ``normalize`` (then :math:`\sum_t r_t` is the sampled ranking's nDCG@n).
    ``labels`` must have padded entries 0 (as
    :func:`~tfr_extensions.ops.lists.prepare_lists` gives), so positions holding
    padded documents get 0; so does every position of a list without relevant
    documents. ``mask``: bool ``[B, L]``, True = valid.
    """
    # Padded documents have label 0 here, hence gain 0: no mask needed.
    sampled_gains = lists.gains(tf.gather(labels, rankings, batch_dims=1))
    rewards = sampled_gains * _discounts(rankings, labels.dtype)
    if not normalize:
        return rewards
    ideal = rank_metrics.ideal_dcg(labels, mask, topn=_ranking_size(rankings))  # [B]
    return numerics.safe_divide(rewards, ideal[:, None, None])


def _discounts(rankings, dtype) -> tf.Tensor:
    """1 / log2(1 + position) for positions 1..n (a constant when n is static)."""
    size = _ranking_size(rankings)
    if isinstance(size, int):
        return tf.constant(1.0 / np.log2(np.arange(2, size + 2)), dtype)
    return lists.log2_discount(tf.cast(tf.range(1, size + 1), dtype))


def sampled_metric(metric: str, labels, rankings, mask) -> tf.Tensor:
    """A rank metric at cutoff n of each sampled ranking, ``[B, S]``.

    nDCG uses :func:`sampled_dcg_rewards`; the others place the sampled
    documents at ranks 1..n and every other document at rank n + 1 (beyond the
    cutoff) and call :mod:`tfr_extensions.ops.rank_metrics`.
    """
    metric = vocabulary.canonical_metric(metric)
    if metric == "ndcg":
        return tf.reduce_sum(sampled_dcg_rewards(labels, rankings, mask), axis=-1)
    shape = tf.shape(rankings)  # [B, S, n]
    list_size = tf.shape(labels)[1]
    batch_idx = tf.broadcast_to(tf.range(shape[0])[:, None, None], shape)
    sample_idx = tf.broadcast_to(tf.range(shape[1])[None, :, None], shape)
    indices = tf.stack([batch_idx, sample_idx, rankings], axis=-1)
    positions = tf.broadcast_to(tf.range(1, shape[2] + 1), shape)
    ranks = tf.tensor_scatter_nd_update(
        tf.fill(tf.stack([shape[0], shape[1], list_size]), shape[2] + 1), indices, positions)
    # [B * S, L], spelled out: a reshape to [-1, L] makes [0, 0] lists [1, 0]
    flat_shape = tf.stack([shape[0] * shape[1], list_size])
    flat = lambda t: tf.reshape(  # noqa: E731  [B, L] -> [B * S, L]
        tf.broadcast_to(t[:, None, :], tf.stack([shape[0], shape[1], list_size])), flat_shape)
    values = rank_metrics.RANK_METRICS[metric](
        flat(labels), tf.reshape(tf.cast(ranks, labels.dtype), flat_shape), flat(mask),
        _ranking_size(rankings))
    return tf.reshape(values, shape[:2])


def expected_utility_loss(labels, scores, *, mask=None, metric="ndcg", topn=10, num_samples=1,
                          temperature=1.0, baseline=False, seed=None):
    """The TensorFlow body of :func:`tfr_extensions.losses.expected_utility_loss` (the math,
    the arguments and a doctest are there): inputs screened, options checked."""
    rankings, log_probs = pl.sample_rankings_with_log_probs(
        scores, mask, num_samples, seed=seed, temperature=temperature, topn=topn)
    rewards = tf.stop_gradient(sampled_metric(metric, labels, rankings, mask))  # [B, S]
    weights = tf.cast(lists.has_relevant(labels, mask), scores.dtype)
    advantages = rewards
    if baseline and num_samples > 1:
        others = tf.reduce_sum(rewards, axis=-1, keepdims=True) - rewards
        advantages = rewards - others / float(num_samples - 1)
    surrogate = advantages * tf.reduce_sum(log_probs, axis=-1)
    return -tf.reduce_mean(surrogate, axis=-1), weights, {"sampled_metric": rewards}


def mdprank_loss(labels, scores, *, mask=None, gamma=1.0, topn=10, num_samples=1,
                 temperature=1.0, normalize=True, seed=None):
    """The TensorFlow body of :func:`tfr_extensions.losses.mdprank_loss` (the math,
    the arguments and a doctest are there): inputs screened, options checked."""
    rankings, log_probs = pl.sample_rankings_with_log_probs(
        scores, mask, num_samples, seed=seed, temperature=temperature, topn=topn)  # [B, S, n]
    rewards = sampled_dcg_rewards(labels, rankings, mask, normalize)
    weights = tf.cast(lists.has_relevant(labels, mask), scores.dtype)
    ndcg = rewards if normalize else sampled_dcg_rewards(labels, rankings, mask)
    # gamma^t G_t = sum_{i >= t} gamma^i r_i: a reverse cumulative sum.
    steps = tf.cast(tf.range(tf.shape(rewards)[-1]), rewards.dtype)
    discounts = tf.pow(tf.constant(gamma, rewards.dtype), steps)
    returns = tf.cumsum(rewards * discounts, axis=-1, reverse=True)
    surrogate = tf.reduce_sum(tf.stop_gradient(returns) * log_probs, axis=-1)
    return (-tf.reduce_mean(surrogate, axis=-1), weights,
            {"sampled_metric": tf.reduce_sum(ndcg, axis=-1)})


