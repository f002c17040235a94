r"""Policy-gradient ranking losses: ExptUtility and MDPRank (REINFORCE).

Yu et al., "Diagnostic Evaluation of Policy-Gradient-Based Ranking"
(``policy-gradient-ranking-diagnostic.txt``), Sections 4.1, 4.2 and 4.4. Both sample rankings
from the Plackett-Luce model of the scores (:func:`tfr_extensions.ops.sample_rankings`) and
weight the log-probability of each sampled ranking (ExptUtility, Eq. 4-5: by its metric) or of
each of its positions (MDPRank, Eq. 6-7: by the discounted return from there on). Both take
``topn`` (n, the sampled rankings' size; None = full), ``num_samples`` (K >= 1),
``temperature`` (T > 0, dividing the scores) and ``seed`` (the sampling's).

The loss *value* is the REINFORCE surrogate (minus the weighted log-probabilities, weights
held constant), whose gradient is the estimator of Eq. 5 / Eq. 7, sign flipped. Each call of
a Keras class stores the mean metric of its samples in :attr:`sampled_metric`, which
:class:`SampledRankingMetric` logs in ``fit``::

    loss = tfrx.losses.ExpectedUtilityLoss(topn=10, seed=0)
    model.compile("adam", loss=loss,
                  metrics=[tfrx.losses.SampledRankingMetric(loss)])
    history = model.fit(ds)   # history.history["sampled_ndcg_10"]

A sampled ranking of a list shorter than ``topn`` ends with padded documents: no reward, no
log-probability term.
"""
from typing import Optional

import numpy as np

from tfr_extensions import arrays
from tfr_extensions import backend
from tfr_extensions.backend import keras
from tfr_extensions.losses import base
from tfr_extensions.losses.registry import register
from tfr_extensions.ops import validation
from tfr_extensions.ops import vocabulary


def sampled_dcg_rewards(labels, rankings, mask, normalize: bool = True):
    r"""Per-position DCG rewards of sampled rankings, ``[B, S, n]``.

    :math:`r_t = (2^{y_{\pi^{-1}(t)}} - 1) / \log_2(1 + t)` for 1-based position t, divided
    by the list's ideal DCG@n when ``normalize`` (then :math:`\sum_t r_t` is nDCG@n).
    ``labels``: screened (padding 0, so it gets 0); ``mask``: bool ``[B, L]``.
    """
    xp = arrays.namespace()
    dtype, size = xp.dtype_name(labels), rankings.shape[-1]
    if size is not None:  # 1 / log2(1 + t), t = 1..n: a constant when n is static
        discounts = xp.convert_to_tensor(1.0 / np.log2(np.arange(2, size + 2)), dtype)
    else:
        discounts = xp.lists.log2_discount(
            xp.cast(xp.arange(1, xp.shape(rankings)[-1] + 1), dtype))
    rewards = xp.lists.gains(xp.lists.batch_gather(labels, rankings)) * discounts
    if not normalize:
        return rewards
    ideal = xp.rank_metrics.ideal_dcg(labels, mask, topn=xp.shape(rankings)[-1])  # [B]
    return xp.safe_divide(rewards, ideal[:, None, None])


def sampled_metric(metric: str, labels, rankings, mask):
    """A rank metric at cutoff n of each sampled ranking, ``[B, S]``: nDCG by
    :func:`sampled_dcg_rewards`, the others by ``rank_metrics`` at ranks 1..n (n + 1 unplaced)."""
    xp = arrays.namespace()
    metric = vocabulary.canonical_metric(metric)
    if metric == "ndcg":
        return xp.sum(sampled_dcg_rewards(labels, rankings, mask), axis=-1)
    batch, samples, size = xp.shape(rankings)  # (a dimension TensorFlow does not know: a tensor)
    list_size = xp.shape(labels)[-1]
    if any(isinstance(d, int) and d == 0 for d in (batch, list_size)):
        return xp.zeros((batch, samples), xp.dtype_name(labels))  # (as safe_divide gives)
    shape = (batch, samples, size)
    batch_idx = xp.broadcast_to(xp.arange(batch, dtype="int32")[:, None, None], shape)
    sample_idx = xp.broadcast_to(xp.arange(samples, dtype="int32")[None, :, None], shape)
    indices = xp.reshape(xp.stack([batch_idx, sample_idx, rankings], axis=-1), (-1, 3))
    positions = xp.broadcast_to(xp.arange(1, size + 1, dtype="int32"), shape)
    beyond = size + 1  # the rank of the documents a ranking does not place
    unplaced = (xp.full((batch, samples, list_size), beyond, "int32") if isinstance(beyond, int)
                else xp.broadcast_to(beyond, (batch, samples, list_size)))
    ranks = xp.scatter_update(unplaced, indices, xp.reshape(positions, (-1,)))

    def flat(t):  # [B, S, L] or [B, L] -> [B * S, L] (not [-1, L]: [0, 0] would be [1, 0])
        return xp.reshape(xp.broadcast_to(t if len(t.shape) == 3 else t[:, None, :],
                                          (batch, samples, list_size)),
                          (batch * samples, list_size))

    values = xp.rank_metrics.RANK_METRICS[metric](
        flat(labels), flat(xp.cast(ranks, xp.dtype_name(labels))), flat(mask), size)
    return xp.reshape(values, (batch, samples))


@base.loss_function(examples=[
    dict(metric="nerr", topn=3, num_samples=5, temperature=0.7, baseline=True, seed=[3, 4]),
    dict(metric="nerr", topn=2, num_samples=4, temperature=0.7, baseline=True, seed=5)])
def expected_utility_loss(labels, scores, *, mask=None,
                          metric: vocabulary.Metric = "ndcg", topn: validation.TopN = 10,
                          num_samples: validation.Integer(minimum=1) = 1,
                          temperature: validation.Positive = 1.0, baseline: validation.Flag = False,
                          seed: validation.Seed = None):
    r"""ExptUtility: REINFORCE on the expected metric of PL-sampled rankings.

    Minimizes :math:`R_{EU} = -\mathbb{E}_{\pi \sim P_\theta}[M(\pi, y^*)]` (Eq. 4) with
    the score-function estimator of Eq. 5:

    .. math::
        \ell = -\frac{1}{K}\sum_{k=1}^{K}
               \mathrm{sg}\big[M(\pi_k, y^*) - b_k\big] \log P_\theta(\pi_k),

    K = ``num_samples`` rankings of size n = ``topn``, :math:`M` = ``metric`` at cutoff n,
    :math:`P_\theta` the PL probability of Eq. 12, sg = stop-gradient, :math:`b_k` the mean
    metric of the other K - 1 samples with ``baseline=True`` (else 0, as in the paper).

    Args:
      metric: a name of :mod:`~tfr_extensions.ops.vocabulary` (``"ndcg"``, ``"ap"``, ...).
      topn, num_samples, temperature, seed: module docstring (``topn``: the metric's cutoff too).
      baseline: subtract the leave-one-out mean reward (needs K >= 2 to act).

    Returns:
      ``(losses, weights)``, ``[batch]`` each: the REINFORCE surrogate (not the metric).

    >>> losses, weights = expected_utility_loss([[0., 1., 2.]], [[3., 2., 1.]], topn=2,
    ...                                         num_samples=4, seed=0)
    >>> bool(losses[0] > 0), float(weights[0])
    (True, 1.0)
    """
    xp = arrays.namespace()
    rankings, log_probs = xp.plackett_luce.sample_rankings_with_log_probs(
        scores, mask, num_samples, seed=seed, temperature=temperature, topn=topn)  # [B, S, n]
    rewards = xp.stop_gradient(sampled_metric(metric, labels, rankings, mask))  # [B, S]
    weights = xp.cast(xp.screening.has_relevant(labels, mask), scores.dtype)
    advantages = rewards
    if baseline and num_samples > 1:
        others = xp.sum(rewards, axis=-1, keepdims=True) - rewards
        advantages = rewards - others / float(num_samples - 1)
    surrogate = advantages * xp.sum(log_probs, axis=-1)
    # (the mean as a sum over the samples: Keras's mean computes float64 in float32)
    return -xp.sum(surrogate, axis=-1) / num_samples, weights, {"sampled_metric": rewards}


@base.loss_function(examples=[
    dict(gamma=0.8, topn=3, num_samples=5, temperature=0.7, normalize=False, seed=[3, 4]),
    dict(gamma=0.8, topn=None, num_samples=2, temperature=0.5, normalize=False, seed=5)])
def mdprank_loss(labels, scores, *, mask=None,
                 gamma: validation.Number(0.0, 1.0, open_minimum=True) = 1.0,
                 topn: validation.TopN = 10, num_samples: validation.Integer(minimum=1) = 1,
                 temperature: validation.Positive = 1.0, normalize: validation.Flag = True,
                 seed: validation.Seed = None):
    r"""MDPRank: REINFORCE on the discounted return of PL-sampled rankings.

    Ranking as an MDP (Wei et al. 2017; Eq. 6-7): at step t (0-based) the policy picks the
    next document with :math:`P(a_t|s_t) = e^{f(x)/T} / \sum_{x' \in X_t} e^{f(x')/T}`; the
    reward is its DCG gain there, :math:`r_{t+1} = (2^{y}-1)/\log_2(t+2)` (over the ideal
    DCG@n when ``normalize``), and :math:`G_t = \sum_{i \ge 1} \gamma^{i-1} r_{t+i}`:

    .. math::
        \ell = -\frac{1}{K}\sum_{k=1}^{K}\sum_{t=0}^{n-1}
               \mathrm{sg}\big[\gamma^t G_t^{(k)}\big] \log P(a_t^{(k)}|s_t^{(k)}).

    With ``gamma=1`` and ``normalize=True``, :math:`G_0` is nDCG@n and the expected gradient
    equals ExptUtility's (the per-position weights only change the variance).

    Args:
      gamma: discount rate in (0, 1].
      topn, num_samples, temperature, seed: module docstring.
      normalize: divide rewards by the list's ideal DCG@n.

    Returns:
      ``(losses, weights)``, ``[batch]`` each: the REINFORCE surrogate.

    >>> losses, _ = mdprank_loss([[0., 1., 2.]], [[3., 2., 1.]], topn=2, num_samples=4, seed=0)
    >>> bool(losses[0] > 0)
    True
    """
    xp = arrays.namespace()
    rankings, log_probs = xp.plackett_luce.sample_rankings_with_log_probs(
        scores, mask, num_samples, seed=seed, temperature=temperature, topn=topn)  # [B, S, n]
    rewards = sampled_dcg_rewards(labels, rankings, mask, normalize)
    weights = xp.cast(xp.screening.has_relevant(labels, mask), scores.dtype)
    ndcg = rewards if normalize else sampled_dcg_rewards(labels, rankings, mask)
    # gamma^t G_t = sum_{i >= t} gamma^i r_i: a reverse cumulative sum.
    dtype = xp.dtype_name(rewards)
    discounts = xp.power(xp.constant(gamma, dtype),
                         xp.cast(xp.arange(xp.shape(rewards)[-1], dtype="int32"), dtype))
    returns = xp.flip(xp.cumsum(xp.flip(rewards * discounts, axis=-1), axis=-1), axis=-1)
    surrogate = xp.sum(xp.stop_gradient(returns) * log_probs, axis=-1)
    return (-xp.sum(surrogate, axis=-1) / num_samples, weights,
            {"sampled_metric": xp.sum(ndcg, axis=-1)})


class _PolicyGradientLoss(base.RankingLoss):
    """The Keras classes' shared part: each call records its mean sampled metric."""

    def __init__(self, arguments):
        super().__init__(arguments)
        self._record_store = _RECORDS[base.implementation()]()

    @property
    def sampled_metric(self):
        """Mean metric (nDCG@topn for MDPRank) of the rankings sampled by the last call,
        over the lists with a relevant document (a variable)."""
        return self._record_store.variable

    @property
    def metric_name(self) -> str:
        """``sampled_<metric>[_<topn>]``, the default name of its logging metric."""
        metric, topn = self._options.get("metric", "ndcg"), self._options["topn"]
        return f"sampled_{metric}_{topn}" if topn else f"sampled_{metric}"

    def _record(self, aux, weights):
        xp = arrays.namespace()
        per_list = xp.mean(xp.stop_gradient(aux["sampled_metric"]), axis=-1)
        weights = xp.stop_gradient(weights)
        mean = xp.safe_divide(xp.sum(per_list * weights), xp.sum(weights))
        self._record_store.write(xp.cast(mean, "float32"))


class _VariableRecord:
    """The last call's sampled metric on TensorFlow: a ``tf.Variable`` (synchronized on write,
    the first replica's value), assigned in graphs, XLA and distribution strategies alike."""

    def __init__(self):
        tf = backend.tensorflow()
        with tf.init_scope():
            self.variable = tf.Variable(
                0.0, dtype=tf.float32, trainable=False, name="sampled_metric",
                synchronization=tf.VariableSynchronization.ON_WRITE,
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)

    def write(self, mean) -> None:
        self.variable.assign(mean)

    def read(self):
        return self.variable


class _SampledMetricRecord:
    """The last call's sampled metric on JAX and PyTorch: a Keras variable that :meth:`write`
    assigns where the assignment persists (eager calls, PyTorch's ``fit``). In traced JAX
    code (``fit``'s steps, which do not thread a loss's variables) :meth:`write` sends it to
    the host by an ordered ``io_callback`` and :meth:`read` fetches it back, so a metric
    updated later in the step reads this step's value; :attr:`variable` gets it eagerly."""

    def __init__(self):
        import threading  # pylint: disable=import-outside-toplevel
        self._variable = keras.Variable(0.0, dtype="float32", trainable=False,
                                        name="sampled_metric")
        self._lock = threading.Lock()
        self._host = 0.0  # the last value a host callback received
        self._pending = False  # ... not yet written into the variable

    @staticmethod
    def _host_path(variable) -> bool:
        from tfr_extensions.keras_ops import random as keras_random  # pylint: disable=import-outside-toplevel
        return (keras.backend.backend() == "jax"
                and not keras_random.assignment_persists(variable))

    @property
    def variable(self):
        """The Keras variable, with the host callbacks' value written in (eagerly)."""
        if self._pending and not self._host_path(self._variable):
            with self._lock:
                value, self._pending = self._host, False
            self._variable.assign(value)
        return self._variable

    def _store(self, value):
        with self._lock:
            self._host, self._pending = float(value), True

    def _load(self):
        with self._lock:
            return np.asarray(self._host, np.float32)

    def write(self, mean) -> None:
        """Records ``mean``, a float32 scalar."""
        if self._host_path(self._variable):
            from jax.experimental import io_callback  # pylint: disable=import-outside-toplevel
            io_callback(self._store, None, mean, ordered=True)
        else:
            with self._lock:
                self._pending = False  # this value is newer than the host's
            self._variable.assign(mean)

    def read(self):
        """The recorded value, where a metric's ``update_state`` runs."""
        if self._host_path(self._variable):
            import jax  # pylint: disable=import-outside-toplevel
            from jax.experimental import io_callback  # pylint: disable=import-outside-toplevel
            return io_callback(self._load, jax.ShapeDtypeStruct((), "float32"), ordered=True)
        return self.variable.value


#: implementation -> the record of the sampled metric that its Keras classes keep
_RECORDS = {base.TENSORFLOW: _VariableRecord, base.KERAS_OPS: _SampledMetricRecord}


@register
class ExpectedUtilityLoss(_PolicyGradientLoss):
    r"""Keras loss of :func:`expected_utility_loss` (ExptUtility, Eq. 4-5).

    >>> loss = ExpectedUtilityLoss(topn=2, num_samples=4, seed=0)
    >>> value = loss([[0., 1., 2.]], [[3., 2., 1.]])
    >>> bool(value > 0), 0.0 <= float(loss.sampled_metric) <= 1.0
    (True, True)
    """

    function = expected_utility_loss

    def __init__(self, metric="ndcg", topn=10, num_samples=1, temperature=1.0, baseline=False,
                 seed=None, ragged=False, reduction=base.DEFAULT_REDUCTION,
                 name="expected_utility"):
        super().__init__(locals())


@register
class MDPRankLoss(_PolicyGradientLoss):
    r"""Keras loss of :func:`mdprank_loss` (MDPRank, Eq. 6-7).

    :attr:`sampled_metric` logs nDCG@n of the samples whatever ``gamma``.

    >>> loss = MDPRankLoss(topn=2, num_samples=4, seed=0)
    >>> bool(loss([[0., 1., 2.]], [[3., 2., 1.]]) > 0)
    True
    """

    function = mdprank_loss

    def __init__(self, gamma=1.0, topn=10, num_samples=1, temperature=1.0, normalize=True,
                 seed=None, ragged=False, reduction=base.DEFAULT_REDUCTION, name="mdprank"):
        super().__init__(locals())


@keras.utils.register_keras_serializable(package="tfr_extensions")
class SampledRankingMetric(keras.metrics.Mean):
    """Mean over steps of a policy-gradient loss's :attr:`sampled_metric`.

    For ``model.compile(loss=loss, metrics=[SampledRankingMetric(loss)])``: Keras updates
    metrics after the step's loss, so each update reads that step's samples (``y_true`` and
    ``y_pred`` are ignored). From a config it rebuilds its own, uncalled copy of the loss: it
    logs a live training run only.

    >>> loss = MDPRankLoss(topn=2, seed=0)
    >>> metric = SampledRankingMetric(loss)
    >>> _ = loss([[0., 2.]], [[1., 0.]])
    >>> _ = metric.update_state(None, None)
    >>> 0.0 < float(metric.result()) <= 1.0
    True
    """

    def __init__(self, loss, name: Optional[str] = None, dtype=None):
        if isinstance(loss, dict):
            loss = keras.losses.deserialize(loss)
        if not isinstance(loss, _PolicyGradientLoss):
            raise ValueError("`loss` must be an ExpectedUtilityLoss or MDPRankLoss; "
                             f"got {loss!r}.")
        self._loss = loss
        super().__init__(name=name or loss.metric_name, dtype=dtype)

    def update_state(self, y_true=None, y_pred=None, sample_weight=None):
        # the last call's sampled metric (in traced JAX code: read back from the host)
        return super().update_state(self._loss._record_store.read())  # pylint: disable=protected-access

    def get_config(self):
        config = super().get_config()
        config["loss"] = keras.losses.serialize(self._loss)
        return config
