r"""Policy-gradient ranking losses: ExptUtility and MDPRank (REINFORCE).

Yu et al., "Diagnostic Evaluation of Policy-Gradient-Based Ranking"
(``policy-gradient-ranking-diagnostic.txt``), Sections 4.1, 4.2 and 4.4.
Both losses sample rankings from the Plackett-Luce model of the scores
(PL-sampling, :func:`tfr_extensions.ops.sample_rankings`) and weight the
log-probability of each sampled ranking, or of each of its positions, by a
reward computed from the labels:

* :func:`expected_utility_loss` (ExptUtility, Eq. 4-5): one weight per sampled
  ranking, its metric (nDCG@topn by default), for every document of it.
* :func:`mdprank_loss` (MDPRank, Eq. 6-7): position t weighted by
  :math:`\gamma^t G_t`, the discounted return from position t on.

The loss *value* is the REINFORCE surrogate, minus the weighted
log-probabilities with the weights held constant (``tf.stop_gradient``), so
its gradient is exactly the estimator of Eq. 5 / Eq. 7 with the sign flipped
for minimization. It is not the expected metric; that one is logged instead:
each call of the Keras classes (:class:`ExpectedUtilityLoss`,
:class:`MDPRankLoss`) stores the mean metric of its sampled rankings (over
lists with a relevant document) in :attr:`sampled_metric`, and
:class:`SampledRankingMetric` reports it in ``model.compile``/``fit``::

    loss = tfrx.losses.ExpectedUtilityLoss(topn=10, seed=0)
    model.compile("adam", loss=loss,
                  metrics=[tfrx.losses.SampledRankingMetric(loss)])
    history = model.fit(ds)   # history.history["sampled_ndcg_10"]

The functions sample with their ``seed`` (None: fresh randomness); the
classes fold a step counter into theirs
(:class:`~tfr_extensions.losses.base.StepSeeded`): fresh rankings at every
call, reproducible for a fixed ``seed``. On Keras's JAX and PyTorch backends
the classes compute with the ``keras.ops`` twins
(:mod:`tfr_extensions.keras_ops.losses.policy_gradient`) and draw one seed per
call from a ``keras.random.SeedGenerator``, inside ``model.fit``'s jitted JAX
steps too (:mod:`tfr_extensions.keras_ops.random`). A sampled
ranking of a list shorter than ``topn`` ends with padded documents, which get
no reward and no log-probability term; an all-padding list, or a list without
relevant documents, has reward 0, weight 0 and zero gradient.
"""
from typing import Optional

from tfr_extensions import backend
from tfr_extensions.backend import keras
from tfr_extensions.losses import base
from tfr_extensions.losses.registry import register
from tfr_extensions.ops import validation
from tfr_extensions.ops import vocabulary


_SAMPLING_CHECKS = {
    "topn": validation.validate_topn,
    "num_samples": validation.integer(minimum=1),
    "temperature": validation.validate_positive,
    "seed": validation.validate_seed,
}


def expected_utility_loss(labels, scores, *, mask=None, metric="ndcg", topn=10, num_samples=1,
                          temperature=1.0, baseline=False, seed=None):
    r"""ExptUtility: REINFORCE on the expected metric of PL-sampled rankings.

    Minimizes :math:`R_{EU} = -\mathbb{E}_{\pi \sim P_\theta}[M(\pi, y^*)]`
    (Eq. 4) with the score-function estimator of Eq. 5:

    .. math::
        \ell = -\frac{1}{K}\sum_{k=1}^{K}
               \mathrm{sg}\big[M(\pi_k, y^*) - b_k\big] \log P_\theta(\pi_k),

    :math:`K` = ``num_samples`` rankings of size n = ``topn`` (10 in the paper)
    drawn at ``temperature``, :math:`M` = ``metric`` at cutoff n,
    :math:`P_\theta` the PL probability of Eq. 12, sg = stop-gradient, and
    :math:`b_k` the mean metric of the other K - 1 samples with ``baseline=True``
    (0 otherwise, as in the paper, and always 0 for K = 1).

    Args:
      labels: float ``[batch, list_size]``, graded relevance; < 0 = padding.
      scores: float ``[batch, list_size]``.
      mask: optional bool ``[batch, list_size]``, True = valid.
      metric: a name of :mod:`~tfr_extensions.ops.vocabulary` (``"ndcg"``,
        ``"ap"``, ``"precision"``, ``"nerr"``, ...).
      topn: sampled ranking size and metric cutoff; None = full rankings.
      num_samples: K >= 1.
      temperature: PL temperature T > 0 (scores are divided by T).
      baseline: subtract the leave-one-out mean reward (needs K >= 2 to act).
      seed: None, an int, a pair of ints or a seed tensor.

    Returns:
      ``(losses, weights)``, ``[batch]`` each: the REINFORCE surrogate (its
      value is not the metric), and 1 for lists with a relevant document.

    >>> losses, weights = expected_utility_loss([[0., 1., 2.]], [[3., 2., 1.]], topn=2,
    ...                                         num_samples=4, seed=0)
    >>> bool(losses[0] > 0), float(weights[0])
    (True, 1.0)
    """
    return EXPECTED_UTILITY.apply(labels, scores, mask, metric=metric, topn=topn,
                                  num_samples=num_samples, temperature=temperature,
                                  baseline=baseline, seed=seed)


def mdprank_loss(labels, scores, *, mask=None, gamma=1.0, topn=10, num_samples=1,
                 temperature=1.0, normalize=True, seed=None):
    r"""MDPRank: REINFORCE on the discounted return of PL-sampled rankings.

    Ranking as an MDP (Wei et al. 2017; Eq. 6-7): at step t (0-based) the policy
    picks the next document with PL probability
    :math:`P(a_t|s_t) = e^{f(x)/T} / \sum_{x' \in X_t} e^{f(x')/T}`; the reward
    is the DCG gain of the chosen document at its position,
    :math:`r_{t+1} = (2^{y}-1)/\log_2(t+2)` (divided by the ideal DCG@n when
    ``normalize``), and :math:`G_t = \sum_{i \ge 1} \gamma^{i-1} r_{t+i}`:

    .. math::
        \ell = -\frac{1}{K}\sum_{k=1}^{K}\sum_{t=0}^{n-1}
               \mathrm{sg}\big[\gamma^t G_t^{(k)}\big] \log P(a_t^{(k)}|s_t^{(k)}).

    With ``gamma=1`` and ``normalize=True``, :math:`G_0` is the sampled
    ranking's nDCG@n and the expected gradient equals ExptUtility's; the
    per-position weights only change the variance.

    Args:
      labels: float ``[batch, list_size]``, graded relevance; < 0 = padding.
      scores: float ``[batch, list_size]``.
      mask: optional bool ``[batch, list_size]``, True = valid.
      gamma: discount rate in (0, 1].
      topn: sampled ranking size n (10 in the paper); None = full rankings.
      num_samples: K >= 1.
      temperature: PL temperature T > 0.
      normalize: divide rewards by the list's ideal DCG@n (a per-list constant
        scale, so lists with many relevant documents do not dominate).
      seed: None, an int, a pair of ints or a seed tensor.

    Returns:
      ``(losses, weights)``, ``[batch]`` each: the REINFORCE surrogate, and 1
      for lists with a relevant document.

    >>> losses, _ = mdprank_loss([[0., 1., 2.]], [[3., 2., 1.]], topn=2, num_samples=4, seed=0)
    >>> bool(losses[0] > 0)
    True
    """
    return MDPRANK.apply(labels, scores, mask, gamma=gamma, topn=topn, num_samples=num_samples,
                         temperature=temperature, normalize=normalize, seed=seed)


EXPECTED_UTILITY = base.LossSpec(expected_utility_loss, {
    base.TENSORFLOW: "tfr_extensions.ops.losses.policy_gradient:expected_utility_loss",
    base.KERAS_OPS: "tfr_extensions.keras_ops.losses.policy_gradient:expected_utility_loss",
}, {
    "metric": vocabulary.canonical_metric, "baseline": validation.validate_bool,
    **_SAMPLING_CHECKS})


MDPRANK = base.LossSpec(mdprank_loss, {
    base.TENSORFLOW: "tfr_extensions.ops.losses.policy_gradient:mdprank_loss",
    base.KERAS_OPS: "tfr_extensions.keras_ops.losses.policy_gradient:mdprank_loss",
}, {
    "gamma": validation.number(0.0, 1.0, open_minimum=True),
    "normalize": validation.validate_bool, **_SAMPLING_CHECKS})


class _PolicyGradientLoss(base.RankingLoss):
    """The Keras classes' shared part: the logged sampled metric.

    On Keras's TensorFlow backend it is a ``tf.Variable`` that each call
    assigns. On JAX and PyTorch it is a :class:`_SampledMetricRecord`: a Keras
    variable that eager calls assign (PyTorch's ``fit`` is eager), and, inside
    traced JAX code (``model.fit``'s jitted steps, where a loss's variable
    updates are dropped), an ordered host callback that
    :class:`SampledRankingMetric` reads back in the same step.
    """

    def __init__(self, options, *, ragged=False, reduction=base.DEFAULT_REDUCTION, name=None):
        super().__init__(options, ragged=ragged, reduction=reduction, name=name)
        if base.implementation() != base.TENSORFLOW:
            self._record_store = _SampledMetricRecord()
            return
        tf = backend.tensorflow()
        with tf.init_scope():
            self._sampled_metric = tf.Variable(
                0.0, dtype=tf.float32, trainable=False, name="sampled_metric",
                synchronization=tf.VariableSynchronization.ON_WRITE,
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)

    @property
    def sampled_metric(self):
        """Mean metric (nDCG@topn for MDPRank) of the rankings sampled by the
        last call, over the lists with a relevant document (a variable)."""
        if base.implementation() != base.TENSORFLOW:
            return self._record_store.variable
        return self._sampled_metric

    @property
    def metric_name(self) -> str:
        """``sampled_<metric>[_<topn>]``, the default name of its logging metric."""
        metric, topn = self._options.get("metric", "ndcg"), self._options["topn"]
        return f"sampled_{metric}_{topn}" if topn else f"sampled_{metric}"

    def _record(self, aux, weights):
        """Stores the weighted mean over lists of the per-list mean sampled metric."""
        if base.implementation() != base.TENSORFLOW:
            self._record_store.write(aux["sampled_metric"], weights)
            return
        tf = backend.tensorflow()
        from tfr_extensions.ops import numerics  # pylint: disable=import-outside-toplevel
        per_list = tf.reduce_mean(aux["sampled_metric"], axis=-1)
        mean = numerics.safe_divide(tf.reduce_sum(per_list * weights), tf.reduce_sum(weights))
        self._sampled_metric.assign(tf.cast(mean, tf.float32))

    def _last_sampled_metric(self):
        """The last call's sampled metric as a scalar tensor, where a metric's
        ``update_state`` runs (in traced JAX code: read back from the host)."""
        if base.implementation() != base.TENSORFLOW:
            return self._record_store.read()
        return self._sampled_metric


class _SampledMetricRecord:
    """The sampled metric of a policy-gradient loss's last call on JAX and PyTorch.

    :attr:`variable` is a Keras variable. Where its assignment persists (eager
    calls; PyTorch's ``fit``), :meth:`write` assigns it. Inside traced JAX code
    or a ``StatelessScope`` that does not map it (``model.fit``'s steps, where a
    loss's own variables are not threaded), :meth:`write` sends the value to the
    host by an ordered ``io_callback`` and :meth:`read` fetches it back by
    another, so a metric updated later in the same step reads this step's value;
    the host value reaches :attr:`variable` at its next eager read.
    """

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
        """The Keras variable, with the value of the host callbacks written in
        (when read eagerly)."""
        if self._pending and not self._host_path(self._variable):
            with self._lock:
                value, self._pending = self._host, False
            self._variable.assign(value)
        return self._variable

    def _store(self, value):
        with self._lock:
            self._host, self._pending = float(value), True

    def _load(self):
        import numpy as np  # pylint: disable=import-outside-toplevel
        with self._lock:
            return np.asarray(self._host, np.float32)

    def write(self, sampled, weights) -> None:
        """Records the weighted mean over lists of the per-list mean ``sampled``."""
        from tfr_extensions.keras_ops import numerics as keras_numerics  # pylint: disable=import-outside-toplevel
        ops = keras.ops
        per_list = ops.mean(ops.stop_gradient(sampled), axis=-1)
        weights = ops.stop_gradient(weights)
        mean = ops.cast(keras_numerics.safe_divide(ops.sum(per_list * weights), ops.sum(weights)),
                        "float32")
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


@register
class ExpectedUtilityLoss(_PolicyGradientLoss):
    r"""Keras loss of :func:`expected_utility_loss` (ExptUtility, Eq. 4-5).

    The options are :func:`expected_utility_loss`'s; ``ragged`` accepts
    ``tf.RaggedTensor`` labels and scores. Each call logs the mean metric of
    its sampled rankings in :attr:`sampled_metric`.

    >>> loss = ExpectedUtilityLoss(topn=2, num_samples=4, seed=0)
    >>> value = loss([[0., 1., 2.]], [[3., 2., 1.]])
    >>> bool(value > 0), 0.0 <= float(loss.sampled_metric) <= 1.0
    (True, True)
    """

    spec = EXPECTED_UTILITY

    def __init__(self, metric="ndcg", topn=10, num_samples=1, temperature=1.0, baseline=False,
                 seed=None, ragged=False, reduction=base.DEFAULT_REDUCTION,
                 name="expected_utility"):
        super().__init__(dict(metric=metric, topn=topn, num_samples=num_samples,
                              temperature=temperature, baseline=baseline, seed=seed),
                         ragged=ragged, reduction=reduction, name=name)

    def get_config(self):
        config = super().get_config()  # ragged, reduction, name
        options = self.options
        config.update(metric=options["metric"], topn=options["topn"],
                      num_samples=options["num_samples"], temperature=options["temperature"],
                      baseline=options["baseline"], seed=options["seed"])
        return config


@register
class MDPRankLoss(_PolicyGradientLoss):
    r"""Keras loss of :func:`mdprank_loss` (MDPRank, Eq. 6-7).

    The options are :func:`mdprank_loss`'s; ``ragged`` accepts
    ``tf.RaggedTensor`` labels and scores. :attr:`sampled_metric` logs
    nDCG@n of the samples whatever ``gamma``.

    >>> loss = MDPRankLoss(topn=2, num_samples=4, seed=0)
    >>> bool(loss([[0., 1., 2.]], [[3., 2., 1.]]) > 0)
    True
    """

    spec = MDPRANK

    def __init__(self, gamma=1.0, topn=10, num_samples=1, temperature=1.0, normalize=True,
                 seed=None, ragged=False, reduction=base.DEFAULT_REDUCTION, name="mdprank"):
        super().__init__(dict(gamma=gamma, topn=topn, num_samples=num_samples,
                              temperature=temperature, normalize=normalize, seed=seed),
                         ragged=ragged, reduction=reduction, name=name)

    def get_config(self):
        config = super().get_config()  # ragged, reduction, name
        options = self.options
        config.update(gamma=options["gamma"], topn=options["topn"],
                      num_samples=options["num_samples"], temperature=options["temperature"],
                      normalize=options["normalize"], seed=options["seed"])
        return config


@keras.utils.register_keras_serializable(package="tfr_extensions")
class SampledRankingMetric(keras.metrics.Mean):
    """Mean over steps of a policy-gradient loss's :attr:`sampled_metric`.

    For ``model.compile(loss=loss, metrics=[SampledRankingMetric(loss)])``:
    Keras updates metrics after computing the loss of the step, so each update
    reads the metric of the rankings that step sampled (``y_true``/``y_pred``
    are ignored). From a config it rebuilds its own copy of the loss, which a
    model never calls: the metric is for logging a live training run.

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
        return super().update_state(self._loss._last_sampled_metric())  # pylint: disable=protected-access

    def get_config(self):
        config = super().get_config()
        config["loss"] = keras.losses.serialize(self._loss)
        return config
