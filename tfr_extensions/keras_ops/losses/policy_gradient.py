r"""Policy-gradient ranking losses, ExptUtility and MDPRank (REINFORCE): the
``keras.ops`` twin of the bodies in :mod:`tfr_extensions.losses.policy_gradient`
(the same names, signatures and returns).

Yu et al., "Diagnostic Evaluation of Policy-Gradient-Based Ranking", Sections
4.1, 4.2 and 4.4. Both sample rankings from the Plackett-Luce model of the
scores (:func:`tfr_extensions.keras_ops.plackett_luce.sample_rankings_with_log_probs`)
and weight the log-probabilities of the samples, or of their positions, by
rewards held constant (``ops.stop_gradient``): the loss value is the REINFORCE
surrogate, whose gradient is the estimator of Eq. 5 / Eq. 7 with the sign
flipped. The bodies take ``seed`` as the sampler does (None, an int, a pair or
a seed tensor ``[2]``); the Keras classes pass one seed per call from their
``SeedGenerator`` (:mod:`tfr_extensions.keras_ops.random`).

>>> from keras import ops
>>> labels, scores = ops.array([[0., 1., 2.]]), ops.array([[3., 2., 1.]])
>>> losses, weights, aux = expected_utility_loss(labels, scores, mask=labels >= 0, topn=2,
...                                              num_samples=4, seed=0)
>>> bool(losses[0] > 0), float(weights[0]), tuple(aux["sampled_metric"].shape)
(True, 1.0, (1, 4))
"""
import numpy as np

from keras import ops

from tfr_extensions.keras_ops import lists
from tfr_extensions.keras_ops import numerics
from tfr_extensions.keras_ops import plackett_luce as pl
from tfr_extensions.keras_ops import rank_metrics
from tfr_extensions.ops import vocabulary


def _discounts(rankings, dtype):
    """1 / log2(1 + position) for positions 1..n (a constant)."""
    return ops.convert_to_tensor(1.0 / np.log2(np.arange(2, rankings.shape[-1] + 2)), dtype)


def sampled_dcg_rewards(labels, rankings, mask, normalize: bool = True):
    r"""Per-position DCG rewards of sampled rankings, ``[B, S, n]``:
    :math:`r_t = (2^{y_{\pi^{-1}(t)}} - 1) / \log_2(1 + t)`, divided by the ideal
    DCG@n (:func:`tfr_extensions.keras_ops.rank_metrics.ideal_dcg` at cutoff n) when
    ``normalize`` (then :math:`\sum_t r_t` is nDCG@n). ``labels`` must be 0 at
    padded documents; ``mask``: bool ``[B, L]``, True = valid."""
    dtype = lists.dtype_name(labels)
    rewards = lists.gains(lists.batch_gather(labels, rankings)) * _discounts(rankings, dtype)
    if not normalize:
        return rewards
    ideal = rank_metrics.ideal_dcg(labels, mask, topn=rankings.shape[-1])  # [B]
    return numerics.safe_divide(rewards, ideal[:, None, None])


def sampled_metric(metric: str, labels, rankings, mask):
    """A rank metric at cutoff n of each sampled ranking, ``[B, S]``: nDCG from
    :func:`sampled_dcg_rewards`; the others place the sampled documents at ranks
    1..n and every other document at rank n + 1 and call
    :mod:`tfr_extensions.keras_ops.rank_metrics`."""
    metric = vocabulary.canonical_metric(metric)
    if metric == "ndcg":
        return ops.sum(sampled_dcg_rewards(labels, rankings, mask), axis=-1)
    batch, samples, size = (ops.shape(rankings)[i] for i in range(3))
    list_size = labels.shape[-1]
    if 0 in (batch, list_size):  # no list or no document: 0 (as safe_divide gives)
        return ops.zeros((batch, samples), labels.dtype)
    batch_idx = ops.broadcast_to(ops.arange(batch, dtype="int32")[:, None, None],
                                 (batch, samples, size))
    sample_idx = ops.broadcast_to(ops.arange(samples, dtype="int32")[None, :, None],
                                  (batch, samples, size))
    indices = ops.reshape(ops.stack([batch_idx, sample_idx, rankings], axis=-1), (-1, 3))
    positions = ops.broadcast_to(ops.arange(1, size + 1, dtype="int32"), (batch, samples, size))
    ranks = ops.scatter_update(numerics.full((batch, samples, list_size), size + 1, "int32"),
                               indices, ops.reshape(positions, (-1,)))

    def flat(t):  # [B, S, L] (or [B, L], broadcast) -> [B * S, L]
        return ops.reshape(ops.broadcast_to(t if len(t.shape) == 3 else t[:, None, :],
                                            (batch, samples, list_size)),
                           (batch * samples, list_size))

    values = rank_metrics.RANK_METRICS[metric](
        flat(labels), flat(ops.cast(ranks, labels.dtype)), flat(mask), size)
    return ops.reshape(values, (batch, samples))


def expected_utility_loss(labels, scores, *, mask=None, metric="ndcg", topn=10, num_samples=1,
                          temperature=1.0, baseline=False, seed=None):
    r"""ExptUtility: REINFORCE on the expected metric of PL-sampled rankings.

    Minimizes :math:`R_{EU} = -\mathbb{E}_{\pi \sim P_\theta}[M(\pi, y^*)]`
    (Eq. 4) with the score-function estimator of Eq. 5:

    .. math::
        \ell = -\frac{1}{K}\sum_{k=1}^{K}
               \mathrm{sg}\big[M(\pi_k, y^*) - b_k\big] \log P_\theta(\pi_k),

    :math:`K` = ``num_samples`` rankings of size n = ``topn`` drawn at
    ``temperature``, :math:`M` = ``metric`` at cutoff n, :math:`P_\theta` the PL
    probability of Eq. 12, and :math:`b_k` the mean metric of the other K - 1
    samples with ``baseline=True`` (else 0).

    Returns:
      ``(losses, weights, {"sampled_metric": [B, K]})``: the surrogate, 1 for
      lists with a relevant document, and the metric of each sample.
    """
    rankings, log_probs = pl.sample_rankings_with_log_probs(
        scores, mask, num_samples, seed=seed, temperature=temperature, topn=topn)
    rewards = ops.stop_gradient(sampled_metric(metric, labels, rankings, mask))  # [B, S]
    weights = ops.cast(lists.has_relevant(labels, mask), scores.dtype)
    advantages = rewards
    if baseline and num_samples > 1:
        others = ops.sum(rewards, axis=-1, keepdims=True) - rewards
        advantages = rewards - others / float(num_samples - 1)
    surrogate = advantages * ops.sum(log_probs, axis=-1)
    # (the mean as a sum over the samples: Keras's mean computes float64 in float32)
    return -ops.sum(surrogate, axis=-1) / num_samples, weights, {"sampled_metric": rewards}


def mdprank_loss(labels, scores, *, mask=None, gamma=1.0, topn=10, num_samples=1,
                 temperature=1.0, normalize=True, seed=None):
    r"""MDPRank: REINFORCE on the discounted return of PL-sampled rankings.

    At step t (0-based) the policy picks the next document with PL probability
    :math:`P(a_t|s_t) = e^{f(x)/T} / \sum_{x' \in X_t} e^{f(x')/T}` (Eq. 7); the
    reward is :math:`r_{t+1} = (2^{y}-1)/\log_2(t+2)` (over the ideal DCG@n when
    ``normalize``) and :math:`G_t = \sum_{i \ge 1} \gamma^{i-1} r_{t+i}`:

    .. math::
        \ell = -\frac{1}{K}\sum_{k=1}^{K}\sum_{t=0}^{n-1}
               \mathrm{sg}\big[\gamma^t G_t^{(k)}\big] \log P(a_t^{(k)}|s_t^{(k)}).

    Returns:
      ``(losses, weights, {"sampled_metric": [B, K]})``: the surrogate, 1 for
      lists with a relevant document, and nDCG@n of each sample.
    """
    rankings, log_probs = pl.sample_rankings_with_log_probs(
        scores, mask, num_samples, seed=seed, temperature=temperature, topn=topn)  # [B, S, n]
    rewards = sampled_dcg_rewards(labels, rankings, mask, normalize)
    weights = ops.cast(lists.has_relevant(labels, mask), scores.dtype)
    ndcg = rewards if normalize else sampled_dcg_rewards(labels, rankings, mask)
    # gamma^t G_t = sum_{i >= t} gamma^i r_i: a reverse cumulative sum.
    discounts = ops.convert_to_tensor(gamma ** np.arange(rewards.shape[-1]),
                                      lists.dtype_name(rewards))
    returns = ops.flip(ops.cumsum(ops.flip(rewards * discounts, axis=-1), axis=-1), axis=-1)
    surrogate = ops.sum(ops.stop_gradient(returns) * log_probs, axis=-1)
    return (-ops.sum(surrogate, axis=-1) / num_samples, weights,
            {"sampled_metric": ops.sum(ndcg, axis=-1)})
