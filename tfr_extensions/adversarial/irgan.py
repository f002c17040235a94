r"""IRGAN: adversarial learning to rank, pointwise, pairwise and listwise.

Wang et al., "IRGAN" (SIGIR 2017) for ``mode="point"`` and ``"pair"``; Yu et
al., "Diagnostic Evaluation of Policy-Gradient-Based Ranking"
(``policy-gradient-ranking-diagnostic.txt``), Section 4.3 and Algorithm 1, for
the listwise ``mode="list"``. A generator scorer :math:`f_\theta` and a
discriminator scorer :math:`f_\phi` (any Keras models mapping the inputs to
scores ``[batch, list_size]``) play the minimax game of Eq. 8; every training
step runs ``d_steps`` discriminator updates, then ``g_steps`` generator updates
(1:1 in the paper). The generator is always trained by policy gradient
(REINFORCE) on samples drawn from its softmax / Plackett-Luce distribution at
``temperature``, with the discriminator's reward held constant.

* ``"point"``: the generator samples ``num_samples`` documents per query with replacement,
  :math:`p_\theta(d) \propto e^{f_\theta(d)/T}`; the discriminator
  :math:`D(d) = \sigma(f_\phi(d))` separates relevant documents (label > 0) from sampled
  ones; generator reward :math:`-\log(1 - D(d)) = \mathrm{softplus}(f_\phi(d))`.
* ``"pair"``: ``num_samples`` pairs per query: a relevant document i drawn uniformly, then
  a less relevant document k drawn from the generator's softmax over the documents with a
  lower label; the discriminator :math:`D(i, k) = \sigma(f_\phi(i) - f_\phi(k))` is trained
  to order the pair (RankNet on generated pairs); generator reward
  :math:`-\log D(i, k) = \mathrm{softplus}(f_\phi(k) - f_\phi(i))` (hard negatives score
  high).
* ``"list"``: the generator samples ``num_samples`` (K) rankings of size
  ``topn`` (10) by PL-sampling (Eq. 12, Gumbel trick); the discriminator is the
  PL likelihood of a ranking under its own scores, :math:`D_\phi(\pi)` (Eq. 14),
  trained by Eq. 13 on ideal rankings (labels sorted, ties broken at random)
  against the sampled ones; the generator minimizes
  :math:`\mathbb{E}_\pi[1 - D_\phi(\pi)]` (Eq. 10, without the log) with the
  estimator of Eq. 11.

Lists without a relevant document (and, for ``"list"``, with fewer than two
valid documents) take no part in either update. ``sample_weight`` is ignored.

Numerics: :math:`\log(1 - D)` is :func:`~tfr_extensions.ops.numerics.log1mexp`
of :math:`\log D`, with :math:`\log D` capped at ``_MAX_LOG_LIKELIHOOD`` so a
ranking the discriminator is certain of costs a large finite loss, not -inf.
Scores that are differentiated are gathered with
:func:`~tfr_extensions.ops.lists.batch_gather`, whose gradient also works for
a batch of 0 lists.

Randomness: with ``seed``, step k draws from ``fold_in(seed, k)``
(:class:`~tfr_extensions.losses.base.StepSeeded`: a counter synchronized
across replicas), and under a distribution strategy each replica folds in
its replica id, so the replicas draw different samples at every step and a
run is reproducible. Under a strategy the losses are scaled by the number of
replicas before the gradients are summed across them, as Keras does.

Evaluation and export: ``irgan(inputs)`` returns the scores of the player
named by ``serve`` (``"discriminator"`` or ``"generator"``), so
``irgan.evaluate`` measures it; ``irgan.generator`` and
``irgan.discriminator`` are ordinary Keras scorers to evaluate or export
(e.g. with :func:`tfr_extensions.serving.export`).

>>> g = keras.Sequential([keras.layers.Dense(1), keras.layers.Flatten()])
>>> d = keras.Sequential([keras.layers.Dense(1), keras.layers.Flatten()])
>>> gan = IRGAN(g, d, mode="list", topn=3, seed=0)
>>> gan.compile()
>>> x, y = tf.random.normal([4, 5, 2], seed=1), tf.constant([[2., 0, 1, 0, 0]] * 4)
>>> sorted(gan.train_on_batch(x, y, return_dict=True))
['d_loss', 'g_loss', 'reward']
"""
from typing import Optional

import tensorflow as tf

from tfr_extensions import backend
from tfr_extensions.backend import keras
from tfr_extensions.losses.base import StepSeeded
from tfr_extensions.ops import lists
from tfr_extensions.ops import numerics
from tfr_extensions.ops import plackett_luce as pl
from tfr_extensions.ops import screening
from tfr_extensions.ops import sorting
from tfr_extensions.ops import validation

MODES = ("point", "pair", "list")
#: the two scorers, in the one order every caller (e.g. a pipeline's report) uses
PLAYERS = ("generator", "discriminator")
# Section 5.2: 5 or 10 sampled documents / pairs, 1 or 5 sampled rankings.
DEFAULT_NUM_SAMPLES = {"point": 5, "pair": 5, "list": 1}
# The largest log D(pi) used in log(1 - D): a certain discriminator costs
# log(1 - e^{-1e-6}) ~ -13.8 instead of log(0).
_MAX_LOG_LIKELIHOOD = -1e-6


def _masked_logits(scores, valid, temperature):
    """scores / T where valid, the finite excluded logit elsewhere."""
    return tf.where(valid, scores / tf.constant(temperature, scores.dtype),
                    tf.constant(scores.dtype.min, scores.dtype))


def _sample_categorical(logits, valid, num_samples, seed):
    """``num_samples`` draws with replacement from softmax(logits) over ``valid``
    (Gumbel-max), ``[B, K]``; ``logits``/``valid`` are ``[B, L]`` or ``[B, K, L]``."""
    batch_shape = tf.shape(valid)[:1]
    shape = tf.concat([batch_shape, [num_samples], tf.shape(valid)[-1:]], axis=0)
    if valid.shape.rank == 2:
        logits, valid = logits[:, None, :], valid[:, None, :]
    keys = tf.where(valid, logits + pl.gumbel_noise(shape, seed, logits.dtype),
                    tf.constant(-float("inf"), logits.dtype))  # sort key only
    return tf.argmax(keys, axis=-1, output_type=tf.int32)


def _log_softmax_at(logits, valid, index):
    """log softmax(logits)[index] over ``valid``; logits/valid ``[B, K, L]``, index ``[B, K]``."""
    masked = tf.where(valid, logits, tf.constant(logits.dtype.min, logits.dtype))
    shape = tf.shape(masked)
    flat = tf.reshape(masked, tf.stack([shape[0] * shape[1], shape[2]]))  # [B K, L]
    chosen = tf.reshape(lists.batch_gather(flat, tf.reshape(index, [-1, 1])), shape[:2])
    return chosen - tf.reduce_logsumexp(masked, axis=-1)


def _weighted_mean(values, weights):
    """sum(w * v) / sum(w), 0 without weight."""
    return numerics.safe_divide(tf.reduce_sum(values * weights), tf.reduce_sum(weights))


def _weighted_mean_per_list(values, weights):
    """Per-list weighted mean ``[B]`` of ``[B, L]`` values (0 for empty lists)."""
    return numerics.safe_divide(tf.reduce_sum(values * weights, axis=-1),
                                tf.reduce_sum(weights, axis=-1))


def _pair_candidates(labels, valid, positives):
    """Bool [B, K, L]: documents less relevant than each sampled positive."""
    positive_labels = tf.gather(labels, positives, batch_dims=1)  # [B, K]
    return tf.logical_and(valid[:, None, :], labels[:, None, :] < positive_labels[..., None])


def _ideal_rankings(labels, valid, seed, topn):
    """[B, 1, n]: labels sorted descending, ties broken uniformly at random."""
    order = sorting.sort_order(labels, valid, sorting.random_tie_keys(tf.shape(labels), seed))
    return order[:, None, :topn]


def _d_log_likelihoods(d_scores, rankings, valid):
    """log D(pi) of Eq. 14 (PL likelihood of each top-n ranking), capped."""
    log_d = pl.plackett_luce_log_prob(d_scores, rankings, valid)
    return tf.minimum(log_d, _MAX_LOG_LIKELIHOOD)


class _Objective:
    """One mode's game, on float32 scores ``[B, L]`` of the generator (``g_scores``)
    and the discriminator (``d_scores``), labels and ``valid`` ``[B, L]``, and the
    per-list weights ``[B]`` of the lists that take part:

    * :meth:`draw`: the generator's samples (no gradient);
    * :meth:`d_loss`: the discriminator's scalar loss on them;
    * :meth:`g_terms`: per sample, the generator's log-probability, its reward
      (held constant by the caller) and its weight, for the REINFORCE surrogate
      ``mean(-reward * log_prob)``.

    ``min_valid``: lists with fewer valid documents take no part.
    """

    min_valid = 1

    def __init__(self, num_samples: int, temperature: float, topn: int):
        self.num_samples, self.temperature, self.topn = num_samples, temperature, topn

    def draw(self, g_scores, labels, valid, seed):
        raise NotImplementedError

    def d_loss(self, d_scores, samples, labels, valid, weights, seed):
        raise NotImplementedError

    def g_terms(self, g_scores, d_scores, samples, labels, valid, weights):
        raise NotImplementedError


class _PointObjective(_Objective):
    """Sampled documents ``[B, K]``; D(d) = sigma(f_phi(d)) separates relevant documents
    from them; reward -log(1 - D(d)) = softplus(f_phi(d))."""

    def draw(self, g_scores, labels, valid, seed):
        return _sample_categorical(
            _masked_logits(g_scores, valid, self.temperature), valid, self.num_samples, seed)

    def d_loss(self, d_scores, samples, labels, valid, weights, seed):
        relevant = tf.cast(tf.logical_and(valid, labels > 0), tf.float32)
        positive = _weighted_mean_per_list(tf.math.softplus(-d_scores), relevant)
        sampled = lists.batch_gather(d_scores, samples)
        negative = tf.reduce_mean(tf.math.softplus(sampled), axis=-1)
        return _weighted_mean(positive + negative, weights)

    def g_terms(self, g_scores, d_scores, samples, labels, valid, weights):
        logits = _masked_logits(g_scores, valid, self.temperature)
        num = tf.shape(samples)[1]
        tiled = tf.broadcast_to(logits[:, None, :], tf.stack([tf.shape(logits)[0], num,
                                                              tf.shape(logits)[1]]))
        log_probs = _log_softmax_at(tiled, tf.broadcast_to(valid[:, None, :], tf.shape(tiled)),
                                    samples)
        reward = tf.math.softplus(lists.batch_gather(d_scores, samples))
        return log_probs, reward, tf.broadcast_to(weights[:, None], tf.shape(reward))


class _PairObjective(_Objective):
    """Sampled pairs ``(positives, negatives, pair_valid)`` ``[B, K]``; D(i, k) =
    sigma(f_phi(i) - f_phi(k)) orders them (RankNet); reward -log D(i, k)."""

    def draw(self, g_scores, labels, valid, seed):
        relevant = tf.logical_and(valid, labels > 0)
        positives = _sample_categorical(
            tf.zeros_like(g_scores), relevant, self.num_samples, lists.fold_in(seed, 0))
        candidates = _pair_candidates(labels, valid, positives)
        logits = _masked_logits(g_scores, valid, self.temperature)[:, None, :]
        negatives = _sample_categorical(
            tf.broadcast_to(logits, tf.shape(candidates)), candidates, self.num_samples,
            lists.fold_in(seed, 1))
        return positives, negatives, tf.reduce_any(candidates, axis=-1)

    def d_loss(self, d_scores, samples, labels, valid, weights, seed):
        positives, negatives, pair_valid = samples
        diffs = lists.batch_gather(d_scores, positives) - lists.batch_gather(d_scores, negatives)
        pair_weights = tf.cast(pair_valid, tf.float32) * weights[:, None]
        return _weighted_mean(tf.math.softplus(-diffs), pair_weights)

    def g_terms(self, g_scores, d_scores, samples, labels, valid, weights):
        positives, negatives, pair_valid = samples
        logits = _masked_logits(g_scores, valid, self.temperature)
        candidates = _pair_candidates(labels, valid, positives)
        tiled = tf.broadcast_to(logits[:, None, :], tf.shape(candidates))
        log_probs = _log_softmax_at(tiled, candidates, negatives)
        reward = tf.math.softplus(lists.batch_gather(d_scores, negatives)
                                  - lists.batch_gather(d_scores, positives))
        return log_probs, reward, tf.cast(pair_valid, tf.float32) * weights[:, None]


class _ListObjective(_Objective):
    """Sampled top-n rankings ``[B, K, n]`` (PL, Eq. 12); the discriminator's Eq. 13
    against ideal rankings; reward D(pi) - 1 (Eq. 10-11)."""

    min_valid = 2

    def draw(self, g_scores, labels, valid, seed):
        return pl.sample_rankings(g_scores, valid, self.num_samples, seed=seed,
                                  temperature=self.temperature, topn=self.topn)

    def d_loss(self, d_scores, samples, labels, valid, weights, seed):
        ideal = _ideal_rankings(labels, valid, seed, self.topn)
        log_d_ideal = _d_log_likelihoods(d_scores, ideal, valid)[:, 0]
        log_d_sampled = _d_log_likelihoods(d_scores, samples, valid)
        per_list = -(log_d_ideal + tf.reduce_mean(numerics.log1mexp(log_d_sampled), axis=-1))
        return _weighted_mean(per_list, weights)

    def g_terms(self, g_scores, d_scores, samples, labels, valid, weights):
        log_probs = pl.plackett_luce_log_prob(g_scores, samples, valid,
                                              temperature=self.temperature)
        # Eq. 10-11: minimizing E[1 - D] = maximizing the reward D - 1 (<= 0).
        reward = tf.math.expm1(_d_log_likelihoods(d_scores, samples, valid))
        return log_probs, reward, tf.broadcast_to(weights[:, None], tf.shape(reward))


#: the game of each mode
OBJECTIVES = {"point": _PointObjective, "pair": _PairObjective, "list": _ListObjective}


class IRGAN(StepSeeded, keras.Model):
    """A generator and a discriminator scorer trained adversarially (Algorithm 1).

    Args:
      generator: a Keras scorer, inputs -> scores ``[batch, list_size]``.
      discriminator: a Keras scorer, inputs -> scores ``[batch, list_size]``.
      mode: ``"point"``, ``"pair"`` or ``"list"``.
      num_samples: documents (point), pairs (pair) or rankings (list) sampled
        per query; default 5, 5, 1 (Section 5.2 tests 5/10 and 1/5).
      topn: size of sampled and ideal rankings in ``"list"`` mode (10).
      temperature: T > 0 of the generator's softmax / PL distribution (1.0).
      d_steps, g_steps: discriminator and generator updates per batch (1:1).
      serve: the player whose scores ``call`` returns (for evaluate/predict).
      seed: None, an int or a pair of ints; a step counter is folded in.

    ``fit`` logs ``d_loss``, ``g_loss`` (the REINFORCE surrogate) and
    ``reward``, the generator's mean reward: softplus of the discriminator's
    logit (point, pair) or D - 1 (list, so -1 <= reward <= 0).

    Inputs are ``x`` as the scorers take it (a ``{"features", "mask"}`` dict
    from :func:`tfr_extensions.data.ranking_dataset`, or a tensor) and labels
    ``[batch, list_size]`` with -1 on padding; an optional ``"mask"`` entry of
    ``x`` narrows validity further.
    """

    def __init__(self, generator: keras.Model, discriminator: keras.Model,
                 mode: str = "list", num_samples: Optional[int] = None, topn: int = 10,
                 temperature: float = 1.0, d_steps: int = 1, g_steps: int = 1,
                 serve: str = "discriminator", seed: lists.Seed = None,
                 name: str = "irgan", **kwargs):
        backend.require_tensorflow_backend("tfrx.adversarial.IRGAN")
        super().__init__(name=name, **kwargs)
        self.mode = validation.validate_choice(mode, MODES, "mode")
        self.num_samples = validation.validate_int(
            DEFAULT_NUM_SAMPLES[mode] if num_samples is None else num_samples, "num_samples",
            minimum=1)
        self.topn = validation.validate_int(topn, "topn", minimum=1)
        self.temperature = validation.validate_positive(temperature, "temperature")
        self.d_steps = validation.validate_int(d_steps, "d_steps", minimum=1)
        self.g_steps = validation.validate_int(g_steps, "g_steps", minimum=1)
        self._serve = validation.validate_choice(serve, PLAYERS, "serve")
        self._objective = OBJECTIVES[self.mode](self.num_samples, self.temperature, self.topn)
        self.generator = generator
        self.discriminator = discriminator
        self._init_seed(seed)
        self.d_loss_tracker = keras.metrics.Mean(name="d_loss")
        self.g_loss_tracker = keras.metrics.Mean(name="g_loss")
        self.reward_tracker = keras.metrics.Mean(name="reward")

    # ------------------------------------------------------------------ Keras API
    def compile(self, d_optimizer=None, g_optimizer=None, **kwargs):
        """Optimizers of both players (Adam, lr 1e-3, as Section 5.2 by default),
        built here for built players; ``kwargs`` (``metrics``, ``jit_compile``, ...)
        go to ``Model.compile`` and apply to the served player in ``evaluate``."""
        super().compile(**kwargs)
        self.d_optimizer = d_optimizer or keras.optimizers.Adam(1e-3)
        self.g_optimizer = g_optimizer or keras.optimizers.Adam(1e-3)
        # the optimizers' state now, outside any traced step: under a distribution
        # strategy it cannot be created inside the first one (an unbuilt player's
        # optimizer builds lazily, as Keras's own does)
        for optimizer, player in ((self.d_optimizer, self.discriminator),
                                  (self.g_optimizer, self.generator)):
            if player.built:
                backend.build_optimizer(optimizer, player.trainable_variables)

    @property
    def metrics(self):
        # Keras 3 lists the trackers itself (attributes); each once, trackers first
        metrics = [self.d_loss_tracker, self.g_loss_tracker, self.reward_tracker]
        return metrics + [m for m in super().metrics if all(m is not t for t in metrics)]

    @property
    def serve(self) -> str:
        """The player ``call`` (and so ``evaluate``/``predict``) uses; settable."""
        return self._serve

    @serve.setter
    def serve(self, which: str) -> None:
        self._serve = validation.validate_choice(which, PLAYERS, "serve")
        # Traced evaluate/predict functions captured the previous player.
        self.test_function = None
        self.predict_function = None

    def player(self, which: str) -> keras.Model:
        """The ``"generator"`` or ``"discriminator"`` scorer."""
        validation.validate_choice(which, PLAYERS, "which")
        return self.generator if which == "generator" else self.discriminator

    def call(self, inputs, training=None):
        return self.player(self.serve)(inputs, training=training)

    def train_step(self, data):
        x, labels = data[0], data[1]
        labels, valid = self._labels_and_mask(x, labels)
        step_seed = self.next_seed()
        for k in range(self.d_steps):
            d_loss = self._update(self.discriminator, self.d_optimizer, self._d_loss,
                                  x, labels, valid, lists.fold_in(step_seed, 2 * k))
        for k in range(self.g_steps):
            g_loss, reward = self._update(self.generator, self.g_optimizer, self._g_loss,
                                          x, labels, valid, lists.fold_in(step_seed, 2 * k + 1))
        self.d_loss_tracker.update_state(d_loss)
        self.g_loss_tracker.update_state(g_loss)
        self.reward_tracker.update_state(reward)
        return {m.name: m.result() for m in self.metrics if m.name in ("d_loss", "g_loss", "reward")}

    def test_step(self, data):
        x, labels = data[0], data[1]
        scores = self(x, training=False)
        results = self.compute_metrics(x, labels, scores, None)  # the compiled metrics
        return {name: value for name, value in results.items()
                if name not in ("d_loss", "g_loss", "reward", "loss")}

    # --------------------------------------------------------------- internals
    @staticmethod
    def _labels_and_mask(x, labels):
        labels = tf.cast(labels, tf.float32)
        valid = screening.valid_documents(labels, x.get("mask") if isinstance(x, dict) else None)
        return tf.where(valid, labels, tf.zeros_like(labels)), valid

    def _update(self, model, optimizer, loss_fn, x, labels, valid, seed):
        with tf.GradientTape() as tape:
            outputs = loss_fn(x, labels, valid, seed)
            loss = outputs[0] if isinstance(outputs, tuple) else outputs
            total = loss + tf.add_n([tf.cast(l, loss.dtype) for l in model.losses]) \
                if model.losses else loss
            # the optimizer sums the replicas' gradients: scale as Keras's train_step does
            total = total / tf.distribute.get_strategy().num_replicas_in_sync
        grads = tape.gradient(total, model.trainable_variables)
        optimizer.apply_gradients(
            [(g, v) for g, v in zip(grads, model.trainable_variables) if g is not None])
        return outputs

    def _scores(self, which, x, training):
        return tf.cast(self.player(which)(x, training=training), tf.float32)

    def _list_weights(self, labels, valid):
        """1.0 for the lists that take part (a relevant document and at least
        the objective's ``min_valid`` valid documents), else 0.0; ``[B]``."""
        weights = screening.has_relevant(labels, valid)
        if self._objective.min_valid > 1:
            num_valid = tf.reduce_sum(tf.cast(valid, tf.int32), axis=-1)
            weights = tf.logical_and(weights, num_valid >= self._objective.min_valid)
        return tf.cast(weights, tf.float32)

    # -- the discriminator's loss (Eq. 13 and IRGAN's point / pair objectives)
    def _d_loss(self, x, labels, valid, seed):
        g_scores = tf.stop_gradient(self._scores("generator", x, training=False))
        samples = self._objective.draw(g_scores, labels, valid, lists.fold_in(seed, 0))
        d_scores = self._scores("discriminator", x, training=True)
        weights = self._list_weights(labels, valid)
        return self._objective.d_loss(d_scores, samples, labels, valid, weights,
                                      lists.fold_in(seed, 1))

    # -- the generator's REINFORCE surrogate (Eq. 11 and IRGAN's)
    def _g_loss(self, x, labels, valid, seed):
        g_scores = self._scores("generator", x, training=True)
        samples = self._objective.draw(tf.stop_gradient(g_scores), labels, valid,
                                       lists.fold_in(seed, 0))
        d_scores = tf.stop_gradient(self._scores("discriminator", x, training=False))
        weights = self._list_weights(labels, valid)
        log_probs, reward, sample_weights = self._objective.g_terms(
            g_scores, d_scores, samples, labels, valid, weights)
        reward = tf.stop_gradient(reward)
        surrogate = -reward * log_probs
        return (_weighted_mean(surrogate, sample_weights),
                _weighted_mean(reward, sample_weights))

    # ------------------------------------------------------------------ diagnostics
    def discriminator_gap(self, x, labels, num_samples: int = 20, seed: lists.Seed = 0):
        """Mean over lists of log D(ideal) - log D(sampled): how much more likely
        the discriminator's PL model (Eq. 14) finds ideal top-n rankings than
        the generator's samples. Larger = better separated."""
        labels, valid = self._labels_and_mask(x, labels)
        seed_t = lists.seed_tensor(seed)
        g_scores = self._scores("generator", x, training=False)
        d_scores = self._scores("discriminator", x, training=False)
        sampled = pl.sample_rankings(g_scores, valid, num_samples, seed=seed_t,
                                     temperature=self.temperature, topn=self.topn)
        ideal = _ideal_rankings(labels, valid, lists.fold_in(seed_t, 1), self.topn)
        gap = (pl.plackett_luce_log_prob(d_scores, ideal, valid)[:, 0]
               - tf.reduce_mean(pl.plackett_luce_log_prob(d_scores, sampled, valid), axis=-1))
        weights = tf.cast(tf.logical_and(
            screening.has_relevant(labels, valid),
            tf.reduce_sum(tf.cast(valid, tf.int32), axis=-1) >= 2), tf.float32)
        return _weighted_mean(gap, weights)

