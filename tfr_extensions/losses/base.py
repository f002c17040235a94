"""The functional core of every ``tfrx`` loss, and the one Keras class around it.

Every loss is a pure function, public in :mod:`tfr_extensions.losses`,
``fn(labels, scores, *, mask=None, <options>) -> (losses, weights)``, ``[batch]`` each (a
custom loop's batch loss is e.g. ``sum(losses * weights) / batch``)::

    losses, weights = tfrx.losses.twin_sigmoid_loss(labels, scores, metric="ap", topn=10)

Options are keyword-only, checked at every call (a ``ValueError`` naming the option). The
loss's Keras class (:class:`RankingLoss`, with the recipe for a new one) takes them in an
explicit constructor, checks them at construction and returns them in ``get_config``
(``from_config`` is ``cls(**config)``). :func:`loss_function` puts the math, written once
against :func:`tfr_extensions.arrays.namespace`, under the option checks and the bad-input
policy; a loss whose pairs dominate may name a PyTorch-native body (``torch=``), run in its
place on Keras's PyTorch backend. This module imports no TensorFlow.

Conventions shared by all losses (each loss's docstring says only what differs, and its
``Args`` list only its options):

* ``labels``: float ``[batch, list_size]``, graded relevance, a label < 0 marks padding;
  ``scores``: float ``[batch, list_size]``; ``mask``: optional bool ``[batch, list_size]``,
  True = valid, narrows validity further. On TensorFlow both may be ``tf.RaggedTensor``
  (padded as TF-Ranking does, label -1); the Keras classes take them with ``ragged=True``.
* A list's weight is 1 unless its loss says otherwise; lists without relevant documents (or
  that cannot be ranked) get weight 0, a finite loss (0 where its docstring says so) and
  zero gradient.
* Keras classes (Keras 2, and Keras 3 on every backend): ``y_true`` is labels or keras-rs's
  ``{"labels", "mask"}`` (mask False = padding); ``sample_weight`` is ``[batch, 1]`` per
  list, or ``[batch, list_size]`` per item, made per-list by TF-Ranking's listwise rule (the
  label-weighted mean); the reduction is Keras's (``SUM_OVER_BATCH_SIZE`` by default: the
  weighted sum over lists over the batch size), distribution scaling included.
* Computation and the returned losses are float32 (float64 for float64 scores), also under
  ``mixed_float16``.
* Randomized losses take ``seed``: None (fresh at every call), an int, a pair of ints or a
  seed tensor; a Keras class built with a seed folds a per-instance call counter into it
  (:class:`StepSeeded`): each step samples afresh, and two runs with one seed are identical.

Bad input (``docs/bad_input.md``): one policy for functions and classes,
:mod:`tfr_extensions.ops.screening` (``torch_ops.screening`` around the PyTorch-native
bodies), O(B L) element-wise with no host sync. **Padding** (label < 0 or NaN, or ``mask``
False) is ignored whatever its score, with gradient exactly 0. **A non-finite score** of a
valid document, or a valid label above the loss's maximum
(:data:`~tfr_extensions.ops.conventions.MAX_LABEL`, 31), makes that list's loss NaN (so
``TerminateOnNaN`` stops) with gradient exactly 0: the other lists train as if it were
absent. **A batch of 0 lists** (``[0, L]``, ``[0, 0]``) or lists of 0 documents give losses
``[0]`` and a zero-size (resp. zero) gradient. **Labels** have gain ``2^y - 1``, fractional
ones included; binary metrics count ``label > 0`` as relevant.
"""
import dataclasses
import functools
import inspect
import keyword
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

from tfr_extensions import arrays
from tfr_extensions import backend
from tfr_extensions.backend import keras
from tfr_extensions.ops import conventions
from tfr_extensions.ops import validation

#: what a loss body returns: ``(losses, weights)``, or with a third entry, a dict of auxiliary
#: per-list tensors only the Keras class reads (a policy-gradient loss's sampled metric)
Output = Tuple[Any, ...]

#: the two implementations of the array math, and the rule that picks one
TENSORFLOW, KERAS_OPS = backend.TENSORFLOW, backend.KERAS_OPS
implementation = backend.implementation
#: the optional PyTorch-native body of a loss (:mod:`tfr_extensions.torch_ops`)
TORCH = backend.TORCH
#: the default ``reduction`` of the loss classes: Keras's own
DEFAULT_REDUCTION = backend.DEFAULT_REDUCTION
#: ``torch=`` of a loss whose own math runs on PyTorch, under the PyTorch screening
TORCH_SCREENED_MATH = "math"


#: implementation -> the module of its bad-input policy (``screened_loss``, ``loss_inputs``,
#: ``name_scope``; ``torch_ops.screening`` wraps the PyTorch bodies)
SCREENING = {TENSORFLOW: "tfr_extensions.ops.screening", KERAS_OPS: "tfr_extensions.ops.screening",
             TORCH: "tfr_extensions.torch_ops.screening"}
#: what is imported so far: plain dicts, which ``torch.compile`` reads without a graph break
_LOADED_SCREENING: Dict[str, Any] = {}
_LOADED_BODIES: Dict[str, Callable] = {}


def screening(which: Optional[str] = None):
    """The bad-input policy's module of implementation ``which`` (default: the rule's)."""
    which = which or implementation()
    if which not in _LOADED_SCREENING:  # (on a loss's first call, maybe in a traced function)
        _LOADED_SCREENING[which] = arrays.import_module(SCREENING[which])
    return _LOADED_SCREENING[which]


def load_body(path: str) -> Callable:
    """The function at ``"package.module:function"``, imported on first use.

    Raises:
      tfr_extensions.backend.UnsupportedBackendError: its module does not import here.
    """
    if path not in _LOADED_BODIES:
        module_name, _, name = path.partition(":")
        try:
            _LOADED_BODIES[path] = getattr(arrays.import_module(module_name), name)
        except ImportError as error:
            raise backend.UnsupportedBackendError(
                f"The loss body {path} does not import in this process "
                f"({backend.describe()}): {error}") from error
    return _LOADED_BODIES[path]


#: an option's check: ``check(value, option_name) -> the value to use``; raises ValueError
Check = Callable[[Any, str], Any]


@dataclasses.dataclass(frozen=True, eq=False)
class LossSpec:
    """One loss, declared once by :func:`loss_function` from its math's signature.

    Attributes:
      math: the function :func:`loss_function` decorates, ``math(labels, scores, *, mask,
        <options>)`` on screened inputs (compute dtype, padded labels 0, finite scores,
        ``mask`` a bool tensor) and checked options, written against the array namespace;
        returns :data:`Output`. Its keyword-only parameters but ``mask`` are the options,
        each annotated with its check (``sigma: validation.Positive = 1.0``).
      torch: ``"module:function"`` of a PyTorch-native body, run in place of ``math`` on
        Keras's PyTorch backend (:data:`TORCH_SCREENED_MATH`: ``math`` itself, under the
        PyTorch screening); it keeps its place by the figure its docstring names.
      max_label: ``options -> the largest valid label``; None: ``conventions.MAX_LABEL``.
      presets: more registry keys, each with the options it sets (``twin_ndcg_type3``).
      examples: option sets beyond the defaults that the suites over every loss run.
      function: the public function (``math`` under the checks and the bad-input policy).
    """

    math: Callable[..., Output]
    torch: Optional[str] = None
    max_label: Optional[Callable[[Mapping[str, Any]], float]] = None
    presets: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    examples: Tuple[Mapping[str, Any], ...] = ()
    function: Optional[Callable[..., Tuple[Any, Any]]] = None

    def __post_init__(self):
        name = self.math.__name__
        if not name.endswith("_loss"):
            raise TypeError(f"A loss function's name ends in `_loss`: {name}.")
        if "mask" not in inspect.signature(self.math).parameters:
            raise TypeError(f"{name} must take `mask`.")
        unchecked = sorted(set(self.defaults) - set(self.checks))
        if unchecked:
            raise TypeError(f"{name}: every option is annotated with its check "
                            f"(`sigma: validation.Positive = 1.0`); not {unchecked}.")
        for example in self.examples:
            self.check_options(**example)  # a wrong example fails at import
        if implementation() != TENSORFLOW:  # imported now, not where torch.compile traces
            self.body()                     # (an import breaks its graph); Keras 3 modules
            screening(self.implementation_of())
            arrays.namespace()

    @property
    def key(self) -> str:
        """The function's name without ``_loss`` (whole if that is a keyword: ``lambda_loss``)."""
        stem = self.math.__name__[:-len("_loss")]
        return self.math.__name__ if keyword.iskeyword(stem) else stem

    @functools.cached_property
    def defaults(self) -> Dict[str, Any]:
        """The options and their defaults (the math's keyword-only parameters but ``mask``)."""
        return {name: p.default for name, p in inspect.signature(self.math).parameters.items()
                if p.kind is inspect.Parameter.KEYWORD_ONLY and name != "mask"}

    @functools.cached_property
    def checks(self) -> Dict[str, Check]:
        """Option name -> its check, read from the option's annotation."""
        parameters = inspect.signature(self.math).parameters
        return {name: check for name in self.defaults
                for check in [validation.check_of(parameters[name].annotation)]
                if check is not None}

    def check_options(self, **options) -> Dict[str, Any]:
        """The options with defaults filled in, each through its check."""
        unknown = sorted(set(options) - set(self.defaults))
        if unknown:
            raise TypeError(f"{self.math.__name__}() got unexpected options {unknown}; "
                            f"it takes {sorted(self.defaults)}.")
        options = {**self.defaults, **options}
        return {name: self.checks[name](value, name) for name, value in options.items()}

    def label_limit(self, options: Mapping[str, Any]) -> float:
        """The largest valid label under checked ``options``."""
        return conventions.MAX_LABEL if self.max_label is None else self.max_label(options)

    def implementation_of(self, which: Optional[str] = None) -> str:
        """``which``, or :func:`implementation`'s rule with :data:`TORCH` for :data:`KERAS_OPS`
        on Keras's PyTorch backend where the loss has a PyTorch-native body."""
        if which is not None:
            return which
        which = implementation()
        native = which == KERAS_OPS and self.torch is not None and backend.backend_name() == "torch"
        return TORCH if native else which

    def body(self, which: Optional[str] = None) -> Callable[..., Output]:
        """The body that ``which`` (default: :meth:`implementation_of`) runs: the one
        :attr:`torch` names, or :attr:`math`."""
        native = self.implementation_of(which) == TORCH and self.torch != TORCH_SCREENED_MATH
        return load_body(self.torch) if native else self.math

    def compute(self, labels, scores, mask, options, which: Optional[str] = None) -> Output:
        """``(losses, weights, aux)`` for checked ``options``: the body of implementation
        ``which`` (default: :meth:`implementation_of`) under the bad-input policy."""
        which = self.implementation_of(which)
        run = functools.partial(screening(which).screened_loss, self.body(which), labels,
                                scores, mask, self.label_limit(options), options)
        if which == TORCH or which == arrays.current():
            return run()
        with arrays.use(which):  # another filling than the rule's (tests compare them)
            return run()

    def apply(self, labels, scores, mask=None, **options):
        """What the public function returns: ``(losses, weights)``, options checked."""
        losses, weights, _ = self.compute(labels, scores, mask, self.check_options(**options))
        return losses, weights


def loss_function(*, torch: Optional[str] = None,
                  max_label: Optional[Callable[[Mapping[str, Any]], float]] = None,
                  presets: Optional[Mapping[str, Mapping[str, Any]]] = None,
                  examples: Sequence[Mapping[str, Any]] = ()):
    """Decorator: a loss's math becomes its public function, ``fn(labels, scores, *,
    mask=None, <options>) -> (losses, weights)``; ``fn.spec`` is its :class:`LossSpec`
    (the arguments are its attributes)::

        @base.loss_function(examples=[dict(sigma=2.0)])
        def my_loss(labels, scores, *, mask=None, sigma: validation.Positive = 1.0):
            \"\"\"The math, once (equations, shapes, a doctest).\"\"\"
            xp = arrays.namespace()
            ...
            return losses, weights
    """
    def decorate(math: Callable[..., Output]) -> Callable[..., Tuple[Any, Any]]:
        spec = LossSpec(math, torch=torch, max_label=max_label, presets=dict(presets or {}),
                        examples=tuple(dict(e) for e in examples))

        @functools.wraps(math)
        def function(labels, scores, *, mask=None, **options):
            return spec.apply(labels, scores, mask, **options)

        object.__setattr__(spec, "function", function)
        function.spec = spec
        return function

    return decorate


class StepSeeded:
    """Mixin for randomized losses and models: a seed that changes at every call.

    With ``seed`` set, call ``k`` of this instance uses ``fold_in(seed, k)``: the counter is a
    non-trainable variable on TensorFlow (:mod:`tfr_extensions.ops.step_seeds`: inside
    ``tf.function``, XLA and distribution strategies), a Keras ``SeedGenerator`` on JAX and
    PyTorch (:mod:`tfr_extensions.keras_ops.random`). ``seed=None`` draws fresh every call.
    """

    def _init_seed(self, seed, salt: int = 0) -> None:
        self._seed, self._seed_salt = validation.validate_seed(seed), salt
        self._calls = self._seed_generator = None
        if seed is None:
            return
        if implementation() == TENSORFLOW:
            from tfr_extensions.ops import step_seeds  # pylint: disable=import-outside-toplevel
            self._calls = step_seeds.step_counter(
                self if isinstance(self, keras.layers.Layer) else None)
        else:
            from tfr_extensions.keras_ops import random as keras_random  # pylint: disable=import-outside-toplevel
            self._seed_generator = keras_random.seed_generator(self._seed, salt)

    def seed_generators(self) -> list:
        """The ``keras.random.SeedGenerator`` drawn from (JAX, PyTorch; none on TensorFlow or
        for ``seed=None``): :class:`tfr_extensions.models.TrainingModel` makes them its own."""
        return [] if self._seed_generator is None else [self._seed_generator]

    def next_seed(self):
        """This call's seed: stateless ``int32 [2]`` on TensorFlow; on JAX and PyTorch the
        ``SeedGenerator``'s next, or None for ``seed=None`` (Keras's global stream)."""
        if self._seed_generator is not None:  # (advances in traced JAX code too)
            return self._seed_generator.next()
        if implementation() != TENSORFLOW:
            return None
        from tfr_extensions.ops import step_seeds  # pylint: disable=import-outside-toplevel
        if self._seed is None:
            return step_seeds.fresh_seed()
        return step_seeds.seed_at_step(self._seed, self._seed_salt, self._calls)


class RankingLoss(StepSeeded, keras.losses.Loss):
    """The Keras class of a loss: its function's :class:`LossSpec` and checked options.

    A subclass names its function and writes its constructor explicitly: the function's
    options with its defaults, in its order, then ``ragged``, ``reduction`` and ``name``
    (default: the registry key), handed on whole (the other steps: ``docs/methods.md``)::

        @registry.register
        class MyLoss(base.RankingLoss):
            function = my_loss

            def __init__(self, sigma=1.0, ragged=False, reduction=base.DEFAULT_REDUCTION,
                         name="my"):
                super().__init__(locals())

    The options are checked at construction and returned by :meth:`get_config`; ``seed`` gets
    a step counter (:class:`StepSeeded`); :meth:`call` returns per-list ``losses * weights``.
    """

    #: the loss's public function (set by each subclass) and its :class:`LossSpec`
    function: Callable = None
    spec: LossSpec = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("function") is not None:
            cls.spec = cls.function.spec

    def __init__(self, arguments: Mapping[str, Any], **keywords):
        """From a subclass constructor's ``locals()``: every option of the function, ``ragged``
        (``tf.RaggedTensor`` inputs, TensorFlow only), ``reduction`` (Keras's) and ``name``;
        ``keywords`` may give the last three apart."""
        arguments = {**arguments, **keywords}
        options = {k: v for k, v in arguments.items()
                   if k not in ("self", "__class__", "ragged", "reduction", "name")}
        if set(options) != set(self.spec.defaults):
            raise TypeError(f"{type(self).__name__}'s constructor must take every option of "
                            f"{self.spec.math.__name__}, {sorted(self.spec.defaults)}, and "
                            f"ragged, reduction and name; got {sorted(arguments)}.")
        self.spec.body()  # its body must import here: fail now, naming it
        super().__init__(reduction=backend.standardize_reduction(
            arguments.get("reduction", DEFAULT_REDUCTION)), name=arguments.get("name"))
        self._ragged = validation.validate_bool(arguments.get("ragged", False), "ragged")
        if self._ragged and implementation() != TENSORFLOW:
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
        """The largest valid label (:data:`~tfr_extensions.ops.conventions.MAX_LABEL` unless
        the loss says otherwise); a list with a larger one gets NaN."""
        return self.spec.label_limit(self._options)

    def __call__(self, y_true, y_pred, sample_weight=None):
        """The reduced loss, in ``y_pred``'s dtype (float32 or float64), not Keras 3's floatx."""
        inputs = screening()
        y_true, y_pred, sample_weight, dtype = inputs.loss_inputs(
            y_true, y_pred, sample_weight, self._ragged)
        if not backend.IS_KERAS_3:
            return super().__call__(y_true, y_pred, sample_weight)
        with inputs.name_scope(self.name):
            return backend.reduce_loss(self.call(y_true, y_pred), sample_weight,
                                       self.reduction, dtype)

    def call(self, y_true, y_pred):
        """Per-list weighted losses ``[batch, 1]``, NaN for broken lists."""
        options = self._options
        if self._seed is not None:  # this call's seed: the counter folded in (None: fresh draws)
            options = {**options, "seed": self.next_seed()}
        losses, weights, aux = self.spec.compute(y_true, y_pred, None, options)
        self._record(aux, weights)
        return (losses * weights)[:, None]

    def _record(self, aux: Dict[str, Any], weights) -> None:
        """Hook for the auxiliary outputs of the function (none here)."""
        del aux, weights  # (a body AutoGraph can convert, unlike a docstring alone)

    def get_config(self) -> Dict[str, Any]:
        """Keras's config (``reduction``, ``name``), ``ragged`` and every option as checked."""
        return {**super().get_config(), "ragged": self._ragged, **self._options}

    # Keras 3 saves a compiled model's loss through these (``model.save``, ``BackupAndRestore``):
    # the step counter travels with the weights, so a resumed run draws as an unbroken one.
    def save_own_variables(self, store) -> None:
        if self._calls is not None:
            store[conventions.SEED_STEP] = self._calls.numpy()
        elif self._seed_generator is not None:
            from tfr_extensions.keras_ops import random as keras_random  # pylint: disable=import-outside-toplevel
            store[conventions.SEED_STEP] = keras_random.state_value(self._seed_generator)

    def load_own_variables(self, store) -> None:
        if conventions.SEED_STEP not in store:
            return
        if self._calls is not None:
            self._calls.assign(store[conventions.SEED_STEP][()])
        elif self._seed_generator is not None:
            self._seed_generator.state.assign(store[conventions.SEED_STEP][()])
