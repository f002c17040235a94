"""The functional core of every ``tfrx`` loss, and the one Keras class around it.

Every loss is first a pure function of tensors, public in :mod:`tfr_extensions.losses`::

    losses, weights = tfrx.losses.twin_sigmoid_loss(labels, scores, metric="ap", topn=10)

``fn(labels, scores, *, mask=None, <options>)`` returns per-list losses
``[batch]`` and per-list weights ``[batch]``; the batch loss of a custom
training loop (or of a gradient-boosting objective) is then, for example,
``tf.reduce_sum(losses * weights) / batch``. The options are keyword-only and
validated at every call (a ``ValueError`` naming the option). The Keras class
of a loss (:class:`RankingLoss`) holds the loss's :class:`LossSpec` and its options: its
constructor validates them (errors come at construction), ``get_config``
returns them and ``from_config`` is ``cls(**config)``, so every option
round-trips through a JSON config without any code of its own.

Conventions shared by all losses (written once here, not in each loss):

* ``labels`` ``[batch, list_size]``, a label < 0 marks padding; ``scores``
  ``[batch, list_size]``; ``mask`` (optional, bool, True = valid) narrows
  validity further. Both may be ``tf.RaggedTensor`` (padded as TF-Ranking
  does, label -1); the Keras classes take them with ``ragged=True``.
* Lists without relevant documents (or that cannot be ranked at all) get
  weight 0, a finite loss and zero gradient.
* Keras classes (Keras 2, and Keras 3 on every backend: on JAX and PyTorch they
  compute with the bodies' ``keras.ops`` twins, :func:`neutral_body`):
  ``y_true`` is labels or keras-rs's ``{"labels", "mask"}`` (mask False =
  padding); ``sample_weight`` is ``[batch, 1]`` per list, or
  ``[batch, list_size]`` per item, turned into a per-list weight by
  TF-Ranking's listwise rule (the label-weighted mean of the item weights);
  the reduction is Keras's (``SUM_OVER_BATCH_SIZE`` by default: the weighted
  sum over lists divided by the batch size), distribution scaling included.
* Computation is float32 (float64 for float64 scores), also under
  ``mixed_float16``; the returned losses have that dtype.
* Randomized losses take ``seed``: None (fresh randomness at every call), an
  int, a pair of ints or an int32 ``[2]`` seed tensor, for TF's stateless
  random ops. A Keras class built with a seed folds a per-instance call
  counter into it (:class:`StepSeeded`), so each training step sees fresh
  samples and two runs with one seed are identical.

Bad input (the policy of every loss, applied in one place, :meth:`LossSpec.compute`,
so that the functions and the classes behave identically):

* **Padding** (label < 0, or NaN, or ``mask`` False): ignored whatever its
  score, NaN and infinite scores included; its gradient is exactly 0.
* **A non-finite score** (NaN, +inf or -inf) of a valid document, or a valid
  label above the loss's maximum label (31,
  :data:`~tfr_extensions.ops.lists.MAX_LABEL`, +inf included): that list's
  loss is NaN, so a weighted sum or mean over lists is NaN (Keras's
  ``TerminateOnNaN`` stops, whatever the list's weight or sample weight), and
  the list's gradient is exactly 0: the other lists of the batch train as if
  it were absent, and no NaN reaches the gradient from the loss (a NaN that the
  model itself produced may still reach its own weights through the chain rule).
  A loss is never finite over a non-finite gradient.
* **A batch of 0 lists** (``[0, L]``, also ``[0, 0]``) or lists of 0
  documents: losses ``[0]`` (a reduced loss of 0) and a zero-size (resp.
  zero) gradient.
* **Labels**: graded relevance, fractional ones included (gain ``2^y - 1``,
  so 2.5 has gain ``2^2.5 - 1``); metrics with binary relevance count
  ``label > 0`` as relevant.

The screening costs O(B L) element-wise operations and no host sync.
"""
import dataclasses
import functools
import importlib
import inspect
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

import tensorflow as tf

from tfr_extensions import backend
from tfr_extensions.backend import keras
from tfr_extensions.ops import lists
from tfr_extensions.ops import numerics
from tfr_extensions.ops import validation

#: what a loss function's body returns: ``(losses, weights)``, or with a third
#: entry, a dict of auxiliary per-list tensors that only the Keras class reads
#: (e.g. the metric of a policy-gradient loss's sampled rankings, for logging)
Output = Tuple[tf.Tensor, ...]
#: the name of a seeded loss's or model's step counter (its variable, and its entry
#: in a Keras 3 weights file)
SEED_STEP = "seed_step"


def listwise_sample_weights(labels: tf.Tensor, sample_weight) -> tf.Tensor:
    """Per-list weights ``[batch, 1]`` from per-list or per-item sample weights.

    Per-item weights follow TF-Ranking's ``_ListwiseLoss``: the mean of the item
    weights weighted by the (valid, non-negative) labels.
    """
    weights = tf.cast(tf.convert_to_tensor(sample_weight), labels.dtype)
    if weights.shape.rank == 0:
        return tf.fill([tf.shape(labels)[0], 1], weights)
    if weights.shape.rank == 1:
        return weights[:, None]
    if weights.shape.rank == 2 and weights.shape[1] == 1:
        return weights
    relevance = tf.where(labels >= 0, labels, tf.constant(0, labels.dtype))
    total = tf.reduce_sum(relevance, axis=1, keepdims=True)
    weighted = tf.reduce_sum(weights * relevance, axis=1, keepdims=True)
    return numerics.safe_divide(weighted, total)


def screen_lists(labels: tf.Tensor, scores: tf.Tensor, max_label: float, mask=None):
    """The bad-input policy of the module docstring, as tensors.

    Args:
      labels, scores: ``[batch, list_size]`` in the compute dtype.
      max_label: the largest label a valid document may have.
      mask: optional bool ``[batch, list_size]``, False for more padding.

    Returns:
      ``(labels, scores, mask, broken)``: ``mask`` bool ``[batch, list_size]``,
      True for valid documents (label >= 0 and ``mask``; NaN labels are
      padding); labels 0 at padded documents and capped at ``max_label``;
      scores with every NaN or infinite entry set to 0 by ``tf.where`` (so its
      gradient is exactly 0); ``broken`` bool ``[batch]``, the lists with a
      valid document whose score is not finite or whose label exceeds
      ``max_label``. What a loss computes for a broken list is discarded, but
      it is finite: no NaN or inf reaches a loss, so none reaches another list
      through a batch-wide reduction.

    Only the per-element selects feed the loss (so that XLA, which fuses them
    into the O(L^2) kernels that read the scores, repeats as little as
    possible there); ``broken`` is one reduction beside them.
    """
    lists.check_list_shapes(labels, scores)
    valid = tf.greater_equal(labels, 0.0)
    if mask is not None:
        valid = tf.logical_and(valid, tf.cast(mask, tf.bool))
    finite = tf.math.is_finite(scores)
    zero = tf.constant(0, scores.dtype)
    bad = tf.logical_and(valid, tf.logical_not(
        tf.logical_and(finite, tf.less_equal(labels, max_label))))
    broken = tf.reduce_any(bad, axis=-1)
    labels = tf.where(valid, tf.minimum(labels, max_label), zero)
    return labels, tf.where(finite, scores, zero), valid, broken


def _no_gradient_where(broken: tf.Tensor, scores: tf.Tensor) -> tf.Tensor:
    """``scores`` whose gradient is exactly 0 in the lists where ``broken`` is set.

    The select sits on the scores, after the loss's backward pass, not on the
    loss's upstream gradient: an upstream that depends on ``broken`` (a
    reduction over each list) led XLA to recompute that reduction inside the
    loss's O(L^2) backward loop (``docs/notes/twin_sigmoid_speed.md``).
    """
    return tf.where(broken[:, None], tf.stop_gradient(scores), scores)


def _nan_where(broken: tf.Tensor, losses: tf.Tensor) -> tf.Tensor:
    """``losses`` with NaN in the lists where ``broken`` is set, and the same
    gradient (the NaN is a constant of the backward pass)."""
    nan = tf.where(broken, tf.constant(float("nan"), losses.dtype),
                   tf.constant(0, losses.dtype))
    return losses + tf.stop_gradient(nan)


def _dense(labels, scores, mask):
    """Ragged inputs padded as TF-Ranking does; dense ones pass through."""
    if isinstance(labels, tf.RaggedTensor) or isinstance(scores, tf.RaggedTensor):
        labels, scores, _, _ = lists.ragged_to_dense(labels, scores)
        if isinstance(mask, tf.RaggedTensor):
            mask = mask.to_tensor(False)
    return labels, scores, mask


@functools.lru_cache(maxsize=None)
def neutral_body(body: Callable) -> Callable:
    """The ``keras.ops`` twin of a TensorFlow loss body: the function of the same name
    in the same module under :mod:`tfr_extensions.keras_ops.losses`
    (``tfr_extensions.losses.pairwise.ranknet_loss`` ->
    ``tfr_extensions.keras_ops.losses.pairwise.ranknet_loss``).

    Raises:
      tfr_extensions.backend.UnsupportedBackendError: the loss has no such twin
        (it runs on Keras's TensorFlow backend only).
    """
    module_name = body.__module__.replace("tfr_extensions.losses.",
                                          "tfr_extensions.keras_ops.losses.", 1)
    try:
        return getattr(importlib.import_module(module_name), body.__name__)
    except (ImportError, AttributeError) as error:
        raise backend.UnsupportedBackendError(
            f"{body.__name__} has no keras.ops implementation ({module_name}."
            f"{body.__name__}): it runs on Keras's TensorFlow backend only; this process "
            f"runs {backend.describe()}.") from error


#: an option's check: ``check(value, option_name) -> the value to use``; raises ValueError
Check = Callable[[Any, str], Any]


@dataclasses.dataclass(frozen=True, eq=False)
class LossSpec:
    """One loss, declared once: its body, the check of each option, its name.

    The body is written ``body(labels, scores, *, mask=None, <options with
    defaults>)`` and documented as the public function; it sees inputs already
    through :func:`screen_lists` (compute dtype, padded labels 0, finite
    scores, ``mask`` a bool tensor) and options already checked. It returns
    ``(losses, weights)`` ``[batch]`` each, or ``(losses, weights, aux)``
    (see :data:`Output`). Its keras.ops twin, for Keras's JAX and PyTorch
    backends, is found by name (:func:`neutral_body`).

    Attributes:
      body: the loss body.
      key: the registry key, the body's name without ``_loss`` (the rule of
        :mod:`~tfr_extensions.losses.registry`) and the Keras class's default name.
      checks: option name -> :data:`Check`, exactly one per keyword-only option
        of the body but ``mask`` (enforced).
      max_label: ``options -> the largest valid label``;
        :data:`lists.MAX_LABEL` when None.
      presets: more registry keys, each with the options it sets (e.g.
        ``twin_ndcg_type3``).

    Adding a loss takes its body, its spec, and a Keras class that names the
    spec (:class:`RankingLoss`), registered with one decorator::

        def my_loss(labels, scores, *, mask=None, sigma=1.0):
            ...
        MY = LossSpec(my_loss, "my", {"sigma": validation.validate_positive})
        my_loss = MY.function

        @registry.register
        class MyLoss(RankingLoss):
            spec = MY
    """

    body: Callable[..., Output]
    key: str
    checks: Mapping[str, Check]
    max_label: Optional[Callable[[Mapping[str, Any]], float]] = None
    presets: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        parameters = inspect.signature(self.body).parameters
        if set(self.defaults) != set(self.checks) or "mask" not in parameters:
            raise TypeError(f"{self.body.__name__}: `checks` must cover exactly its keyword-only "
                            f"options {sorted(self.defaults)} (and it must take `mask`); "
                            f"got {sorted(self.checks)}.")
        if self.body.__name__ != f"{self.key}_loss":
            raise TypeError(f"A loss's key is its body's name without `_loss`: "
                            f"{self.body.__name__} cannot have the key {self.key!r}.")

    @functools.cached_property
    def defaults(self) -> Dict[str, Any]:
        """The options and their defaults (the body's keyword-only parameters but ``mask``)."""
        return {name: p.default for name, p in inspect.signature(self.body).parameters.items()
                if p.kind is inspect.Parameter.KEYWORD_ONLY and name != "mask"}

    def check_options(self, **options) -> Dict[str, Any]:
        """The options with defaults filled in, each through its check."""
        unknown = sorted(set(options) - set(self.defaults))
        if unknown:
            raise TypeError(f"{self.body.__name__}() got unexpected options {unknown}; "
                            f"it takes {sorted(self.defaults)}.")
        options = {**self.defaults, **options}
        return {name: self.checks[name](value, name) for name, value in options.items()}

    def label_limit(self, options: Mapping[str, Any]) -> float:
        """The largest valid label under checked ``options``."""
        return lists.MAX_LABEL if self.max_label is None else self.max_label(options)

    def compute(self, labels, scores, mask, options) -> Output:
        """``(losses, weights, aux)`` for checked ``options``, with the TensorFlow
        body and the bad-input policy of the module docstring."""
        labels, scores, mask = _dense(labels, scores, mask)
        scores = tf.convert_to_tensor(scores)
        dtype = lists.compute_dtype(scores)
        labels, scores, valid, broken = screen_lists(
            tf.cast(tf.convert_to_tensor(labels), dtype), tf.cast(scores, dtype),
            self.label_limit(options), mask)
        losses, weights, *aux = self.body(labels, scores=_no_gradient_where(broken, scores),
                                          mask=valid, **options)
        return _nan_where(broken, losses), weights, (aux[0] if aux else {})

    def compute_neutral(self, labels, scores, mask, options) -> Output:
        """:meth:`compute` with the body's ``keras.ops`` twin (:func:`neutral_body`),
        on Keras's backend."""
        from tfr_extensions.keras_ops import lists as keras_lists  # pylint: disable=import-outside-toplevel
        return keras_lists.screened_loss(neutral_body(self.body), labels, scores, mask,
                                         self.label_limit(options), options)

    @functools.cached_property
    def function(self) -> Callable:
        """The public loss function: the body's name, signature and docstring;
        ragged inputs padded, options checked, the bad-input policy applied;
        returns ``(losses, weights)``. Its ``spec`` is this spec."""
        @functools.wraps(self.body)
        def function(labels, scores, *, mask=None, **options):
            losses, weights, _ = self.compute(labels, scores, mask, self.check_options(**options))
            return losses, weights

        function.spec = self
        return function


class StepSeeded:
    """Mixin for randomized losses and models: a seed that changes at every call.

    With ``seed`` set, call ``k`` of this instance uses ``fold_in(seed, k)``;
    the counter is a non-trainable variable (a Keras weight of a model), so it
    works inside ``tf.function``, XLA and distribution strategies (synchronized on write,
    updated once per step by the first replica). Under a strategy with more
    than one replica, each replica folds in its replica id as well, so the
    replicas draw different samples at every step while a run stays
    reproducible. With ``seed=None`` every call draws a fresh seed.
    """

    def _init_seed(self, seed: lists.Seed, salt: int = 0) -> None:
        self._seed = validation.validate_seed(seed)
        self._seed_salt = salt
        self._calls = None
        self._seed_generator = None
        if seed is None:
            return
        if backend.uses_tensorflow_ops():
            self._calls = self._step_counter()
        else:  # JAX, PyTorch: Keras's own seeded stream (keras_ops.random)
            from tfr_extensions.keras_ops import random as keras_random  # pylint: disable=import-outside-toplevel
            self._seed_generator = keras_random.seed_generator(self._seed, salt)

    def _step_counter(self):
        """The call counter: a Keras weight of a layer or model (so Keras saves it with
        the model's weights), a plain ``tf.Variable`` elsewhere (a loss)."""
        if isinstance(self, keras.layers.Layer):
            replicas = ({"aggregation": "only_first_replica"} if backend.IS_KERAS_3 else
                        {"synchronization": tf.VariableSynchronization.ON_WRITE,
                         "aggregation": tf.VariableAggregation.ONLY_FIRST_REPLICA})
            return self.add_weight(name=SEED_STEP, shape=(), dtype="int64",
                                   initializer="zeros", trainable=False, **replicas)
        with tf.init_scope():
            return tf.Variable(0, dtype=tf.int64, trainable=False, name=SEED_STEP,
                               synchronization=tf.VariableSynchronization.ON_WRITE,
                               aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)

    def next_seed(self) -> tf.Tensor:
        """The stateless seed ``int32 [2]`` for this call (on JAX and PyTorch, the
        next seed of Keras's ``SeedGenerator``, see :mod:`tfr_extensions.keras_ops.random`)."""
        if self._seed_generator is not None:
            from tfr_extensions.keras_ops import random as keras_random  # pylint: disable=import-outside-toplevel
            return keras_random.next_seed(self._seed_generator)
        if self._seed is None:
            if not backend.uses_tensorflow_ops():
                return None  # keras_ops draws from Keras's global stream
            return lists.fresh_seed()
        step = self._calls.assign_add(1) - 1
        seed = lists.fold_in(lists.seed_tensor(self._seed, self._seed_salt), step)
        replica = tf.distribute.get_replica_context()
        if replica is not None and replica.num_replicas_in_sync > 1:
            seed = lists.fold_in(seed, replica.replica_id_in_sync_group)
        return seed


class RankingLoss(StepSeeded, keras.losses.Loss):
    """The Keras class of a loss: its :class:`LossSpec` and checked options.

    A subclass sets ``spec`` and its docstring; its constructor is built from
    the spec (:meth:`__init_subclass__`): the loss's options with their
    defaults, in order, then ``ragged``, ``reduction`` and ``name`` (default:
    the spec's key). This base class checks the options (the spec's checks,
    so errors come at construction), returns them from ``get_config`` (so
    ``from_config``, Keras's ``cls(**config)``, rebuilds the loss), folds a
    step counter into ``seed`` for randomized losses (:class:`StepSeeded`),
    and in :meth:`call` applies the loss: per-list ``losses * weights``, NaN
    for broken lists (module docstring).
    """

    #: the loss (set by each subclass)
    spec: LossSpec = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        spec = cls.__dict__.get("spec")
        if spec is None:
            return
        keyword = inspect.Parameter.POSITIONAL_OR_KEYWORD
        signature = inspect.Signature(
            [inspect.Parameter("self", keyword)]
            + [inspect.Parameter(option, keyword, default=default)
               for option, default in spec.defaults.items()]
            + [inspect.Parameter("ragged", keyword, default=False),
               inspect.Parameter("reduction", keyword, default=backend.DEFAULT_REDUCTION),
               inspect.Parameter("name", keyword, default=spec.key)])

        def __init__(self, *args, **kwargs):  # pylint: disable=redefined-outer-name
            arguments = signature.bind(self, *args, **kwargs)
            arguments.apply_defaults()
            options = dict(arguments.arguments)
            del options["self"]
            self._setup(options)

        __init__.__signature__ = signature
        __init__.__qualname__ = f"{cls.__qualname__}.__init__"
        __init__.__doc__ = f"{cls.__name__}({', '.join(list(signature.parameters)[1:])})"
        cls.__init__ = __init__

    def _setup(self, options: Dict[str, Any]) -> None:
        """Construction from the bound constructor arguments (options, ``ragged``,
        ``reduction``, ``name``); subclasses extend it."""
        if not backend.uses_tensorflow_ops():
            neutral_body(self.spec.body)  # no keras.ops twin: fail now, naming it
        reduction = backend.standardize_reduction(
            options.pop("reduction", backend.DEFAULT_REDUCTION))
        name = options.pop("name", None)
        ragged = options.pop("ragged", False)
        super().__init__(reduction=reduction, name=name)
        self._ragged = validation.validate_bool(ragged, "ragged")
        if self._ragged and not backend.uses_tensorflow_ops():
            raise ValueError(f"`ragged=True` takes tf.RaggedTensor inputs, which exist on Keras's "
                             f"TensorFlow backend only; this process runs {backend.describe()}. "
                             "Pad the lists (label -1) instead.")
        self._options = self.spec.check_options(**options)
        self._init_seed(self._options.get("seed"))  # a step counter only when seeded

    @property
    def options(self) -> Dict[str, Any]:
        """The loss function's options, as checked (a copy)."""
        return dict(self._options)

    @property
    def max_label(self) -> float:
        """The largest valid label this loss accepts (:data:`lists.MAX_LABEL`
        unless the loss says otherwise); a list with a larger one gets NaN."""
        return self.spec.label_limit(self._options)

    def _to_dense(self, y_true, y_pred, sample_weight):
        if self._ragged or isinstance(y_true, tf.RaggedTensor):
            y_true, y_pred, sample_weight, _ = lists.ragged_to_dense(
                y_true, y_pred, sample_weight)
        return y_true, y_pred, sample_weight

    def __call__(self, y_true, y_pred, sample_weight=None):
        """The reduced loss; ``y_true`` may be keras-rs's ``{"labels", "mask"}``
        (mask False = padding). Computes in the dtype of ``y_pred`` (float32, or
        float64 for float64 scores), not in Keras 3's floatx."""
        if not backend.uses_tensorflow_ops():
            return self._neutral_call(y_true, y_pred, sample_weight)
        y_true = lists.labels_with_mask(y_true)
        y_true, y_pred, sample_weight = self._to_dense(y_true, y_pred, sample_weight)
        y_pred = tf.convert_to_tensor(y_pred)
        dtype = lists.compute_dtype(y_pred)
        y_pred = tf.cast(y_pred, dtype)
        y_true = tf.cast(tf.convert_to_tensor(y_true), dtype)
        if sample_weight is not None:
            sample_weight = listwise_sample_weights(y_true, sample_weight)
        if not backend.IS_KERAS_3:
            return super().__call__(y_true, y_pred, sample_weight)
        with tf.name_scope(self.name):
            return backend.reduce_loss(self.call(y_true, y_pred), sample_weight,
                                       self.reduction, dtype)

    def _neutral_call(self, y_true, y_pred, sample_weight):
        """:meth:`__call__` on Keras's JAX and PyTorch backends, in ``keras.ops``."""
        from keras import ops  # pylint: disable=import-outside-toplevel
        from tfr_extensions.keras_ops import lists as keras_lists  # pylint: disable=import-outside-toplevel
        y_true = keras_lists.labels_with_mask(y_true)
        y_pred = ops.convert_to_tensor(y_pred)
        dtype = keras_lists.compute_dtype(y_pred)
        y_pred = ops.cast(y_pred, dtype)
        y_true = ops.cast(ops.convert_to_tensor(y_true), dtype)
        if sample_weight is not None:
            sample_weight = keras_lists.listwise_sample_weights(y_true, sample_weight)
        return backend.reduce_loss(self.call(y_true, y_pred), sample_weight, self.reduction,
                                   dtype)

    def call(self, y_true, y_pred):
        """Per-list weighted losses ``[batch, 1]``, NaN for broken lists."""
        options = self._options
        if self._seed is not None:  # this call's seed: the counter folded in (None: fresh draws)
            options = {**options, "seed": self.next_seed()}
        compute = (self.spec.compute if backend.uses_tensorflow_ops()
                   else self.spec.compute_neutral)
        losses, weights, aux = compute(y_true, y_pred, None, options)
        self._record(aux, weights)
        return (losses * weights)[:, None]

    def _record(self, aux: Dict[str, tf.Tensor], weights: tf.Tensor) -> None:
        """Hook for the auxiliary outputs of the function (none here)."""
        del aux, weights  # (a body AutoGraph can convert, unlike a docstring alone)

    def get_config(self) -> Dict[str, Any]:
        config = super().get_config()
        config["ragged"] = self._ragged
        config.update(self._options)
        return config

    # Keras 3 saves a compiled model's loss through these (``model.save``,
    # ``save_weights``, ``BackupAndRestore``): the step counter of a seeded loss
    # travels with the model's weights, so a resumed run draws what an
    # uninterrupted one would. A store without it (weights saved before
    # ``compile``) leaves the counter as it is.
    def save_own_variables(self, store) -> None:
        if self._calls is not None:
            store[SEED_STEP] = self._calls.numpy()
        elif self._seed_generator is not None:
            from keras import ops  # pylint: disable=import-outside-toplevel
            store[SEED_STEP] = ops.convert_to_numpy(self._seed_generator.state.value)

    def load_own_variables(self, store) -> None:
        if SEED_STEP not in store:
            return
        if self._calls is not None:
            self._calls.assign(store[SEED_STEP][()])
        elif self._seed_generator is not None:
            self._seed_generator.state.assign(store[SEED_STEP][()])
