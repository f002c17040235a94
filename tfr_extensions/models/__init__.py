r"""Scoring networks for listwise training, named in the papers' notation.

A feed-forward scorer (``R4.L``, ``B64``, ...) maps each document's feature vector to a
score, independently of the other documents of its list except through the per-query
feature normalization, which is a layer *inside* the model so that an exported
SavedModel takes raw features. A context-aware scorer (``SA<n>``) scores each document
in the context of its list, through self-attention over the list's valid documents.

Input: a dict ``{"features": float [B, L, F], "mask": bool [B, L]}`` (``mask``
optional: every document valid when absent; a numeric mask, such as the int8 of
``tfrx.data.numeric_masks``, means non-zero = valid), or the features ``[B, L, F]``
alone, as :class:`tfrx.data.RankingPyDataset` yields them by default: every document
valid (the labels' -1 still marks padding for the losses; with ``with_mask=True`` the
dataset's mask also keeps padding out of the z-score and the batch-normalization
moments). Output: scores ``float32 [B, L]``
(also under the ``mixed_float16`` policy: the output layer computes in
float32). Padded documents get finite scores that mean nothing; losses and
metrics ignore them through their labels (< 0).

Notation (:func:`parse_notation`):

* ``R5``, ``CE5``, ``GE5``, ``R4.L``, ``CE4.L`` (Yu et al.'s twin-sigmoid paper,
  Sec. 5.1, and the policy-gradient diagnostic, Sec. 5, both after PT-Ranking):
  the letters name the activation, ``R`` = ReLU, ``CE`` = CELU with
  :math:`\alpha = 1`, ``GE`` = GELU (exact, erf form). Without ``.L`` the digit
  :math:`n` counts all dense layers and every one is followed by the activation,
  the 1-unit output layer included (so ``R5`` = 4 hidden layers + an output ReLU
  and its scores are >= 0). With ``.L`` the digit counts the activated hidden
  layers and a linear 1-unit output layer follows (``R4.L`` = 4 hidden layers +
  linear output = 5 layers, the papers' "5-layer network"). Hidden layers have
  ``hidden_units`` (100) units; with ``batch_norm`` each hidden layer is
  ``Dense -> BatchNormalization -> activation`` ("batch normalization between
  consecutive layers", PT-Ranking's ordering).
* ``B64``, ``B128``, ``B256``, ``B512``, ``B1024`` (Bruch et al., "Revisiting
  approximate metric optimization", Sec. 5.3): ReLU hidden layers of widths
  ``w, w/2, ..., 16`` (``B64`` = 64, 32, 16; ``B1024`` = 1024 ... 16, seven
  layers), each ``Dense -> BatchNormalization -> ReLU``, and a linear 1-unit
  output, as in TF-Ranking's DNN scorers. ``hidden_units`` is ignored.
* ``SA1``, ``SA2``, ``SA4``, ... (Pobrotyn et al., "Context-Aware Learning to Rank with
  Self-Attention", allRank's model): a linear projection of each document to
  ``hidden_units`` dimensions (with ``batch_norm``, then ``BatchNormalization``), ``n``
  Transformer encoder blocks over the documents of each list
  (:class:`tfr_extensions.models.attention.EncoderBlock`: ``attention_heads`` heads, a
  feed-forward layer of ``4 * hidden_units``, pre-norm residuals, ``dropout``), a final
  layer normalization and a linear 1-unit output. Padded documents are never attended
  to, so a list's scores do not change when padding is added anywhere; there is no
  positional input, so permuting a list's documents permutes its scores. Attention costs
  O(L^2) per list in time and memory (``benchmarks/attention_scorer.py``). allRank's
  configuration for MSLR-WEB30K is ``scorer("SA4", 136, hidden_units=128,
  attention_heads=4, dropout=0.3, batch_norm=False)``.

``dropout`` (0 by default) applies after each hidden layer's activation of the
feed-forward scorers, and inside the encoder blocks of ``SA<n>``.

Batch normalization computes its moments over the valid documents only (Keras's
masked ``BatchNormalization``), so padding does not shift them (a valid document
with a NaN feature scores NaN alone in inference; in training it would enter the
batch's moments, which is why training data is checked when it is read).

Implementations (:data:`USES_KERAS_OPS`, one rule): on Keras 3 the scorers compute
with ``keras.ops`` on every backend, TensorFlow, JAX and PyTorch alike (the z-score is
:func:`tfr_extensions.keras_ops.normalization.query_zscore`), and this module imports
no TensorFlow; one set of weights (or one ``.keras`` file) scores the same on all
three. On Keras 2 they compute with TensorFlow's ops
(:func:`tfr_extensions.data.normalization.query_zscore`). Only what is TensorFlow by
nature needs it: :func:`input_signature_of` (``tf.TensorSpec``) and
:meth:`Scorer.export` (a SavedModel, from Keras's TensorFlow backend).

>>> import numpy as np
>>> model = scorer("R4.L", num_features=3, hidden_units=8)
>>> tuple(model({"features": np.ones([2, 5, 3], np.float32)}).shape)
(2, 5)
>>> tuple(model(np.ones([2, 5, 3], np.float32)).shape)  # the features alone: all valid
(2, 5)
"""
import dataclasses
import re
from typing import Optional, Tuple

import numpy as np

from tfr_extensions import backend
from tfr_extensions.backend import keras
from tfr_extensions.data.dense import NORMALIZATIONS
from tfr_extensions.models import attention
from tfr_extensions.ops import validation

#: The one rule that picks the scorers' array math: Keras 3 computes with ``keras.ops``
#: on every backend (TensorFlow, JAX and PyTorch alike, so one set of weights gives the
#: same scores everywhere); Keras 2, which is TensorFlow's, with TensorFlow's ops.
USES_KERAS_OPS = backend.IS_KERAS_3

if USES_KERAS_OPS:
    from keras import ops
    from tfr_extensions.keras_ops import numerics
    from tfr_extensions.keras_ops.normalization import query_zscore
else:  # Keras 2: TensorFlow is the point
    import tensorflow as tf
    from tfr_extensions.data.normalization import query_zscore

ACTIVATIONS = {"R": "relu", "CE": "celu", "GE": "gelu"}
BRUCH_WIDTHS = (64, 128, 256, 512, 1024)
#: the notations :func:`scorer` accepts (the papers' ``R4.L``, ``CE4.L``, ``B64`` ...)
ACCEPTED_FORMS = ("R<n>", "CE<n>", "GE<n>", "R<n>.L", "CE<n>.L", "GE<n>.L",
                  "B64", "B128", "B256", "B512", "B1024", "SA<n>")
#: the width of an encoder block's feed-forward layer, in units of ``hidden_units``
#: (allRank's 512 at 128)
FEED_FORWARD_RATIO = 4

_PAPER_NOTATION = re.compile(r"^(R|CE|GE)([1-9][0-9]*)(\.L)?$")
_BRUCH_NOTATION = re.compile(r"^B([0-9]+)$")
_ATTENTION_NOTATION = re.compile(r"^SA([1-9][0-9]*)$")


def celu(x):
    r"""CELU with :math:`\alpha = 1`: :math:`\max(0, x) + \min(0, e^x - 1)`.

    Numerics: ``exp`` only sees ``min(x, 0)``, so it cannot overflow and the
    gradient is finite everywhere (1 for x > 0, :math:`e^x` for x <= 0).

    >>> [round(float(v), 4) for v in celu([-1e4, -1., 0., 2.])]
    [-1.0, -0.6321, 0.0, 2.0]
    """
    if USES_KERAS_OPS:
        x = ops.convert_to_tensor(x)
        return ops.relu(x) + ops.expm1(numerics.minimum(x, 0.0))
    x = tf.convert_to_tensor(x)
    return tf.nn.relu(x) + tf.math.expm1(tf.minimum(x, tf.zeros_like(x)))


def gelu(x):
    r"""GELU, exact (erf) form: :math:`x\,\Phi(x) = \tfrac{x}{2}(1 + \mathrm{erf}(x/\sqrt{2}))`."""
    if USES_KERAS_OPS:
        return ops.gelu(x, approximate=False)
    return tf.nn.gelu(x, approximate=False)


def relu(x):
    r"""ReLU: :math:`\max(0, x)`."""
    return ops.relu(x) if USES_KERAS_OPS else tf.nn.relu(x)


_ACTIVATION_FUNCTIONS = {"relu": relu, "celu": celu, "gelu": gelu}


def _features_and_mask(inputs):
    """``(features float32 [B, L, F], mask bool [B, L])`` of a scorer's input: a dict
    ``{"features", "mask"}`` or the features alone. A missing mask is all True, a
    numeric one is True where non-zero."""
    if isinstance(inputs, dict):
        if "features" not in inputs:
            raise ValueError("The scorer's input dict must have the key 'features' "
                             "[batch, list_size, num_features] (and optionally 'mask'); "
                             f"got the keys {sorted(inputs)}.")
        features, mask = inputs["features"], inputs.get("mask")
    else:
        features, mask = inputs, None
    features = _cast(features, "float32")
    shape = features.shape
    rank = shape.rank if hasattr(shape, "rank") else len(shape)  # TensorShape or tuple
    if rank is not None and rank != 3:
        raise ValueError("The scorer's input must be the features [batch, list_size, "
                         "num_features] or a dict {'features': ..., 'mask': ...}; got "
                         f"features of shape {tuple(shape)}.")
    if USES_KERAS_OPS:
        if mask is None:
            return features, ops.ones(ops.shape(features)[:2], dtype="bool")
        return features, ops.cast(mask, "bool")
    if mask is None:
        return features, tf.ones(tf.shape(features)[:2], tf.bool)
    return features, tf.cast(mask, tf.bool)


def _cast(x, dtype):
    return ops.cast(x, dtype) if USES_KERAS_OPS else tf.cast(x, dtype)


def _import_tensorflow(feature: str):
    """TensorFlow, for what is TensorFlow by nature; an ImportError naming ``feature``
    where it is not installed."""
    try:
        import tensorflow  # pylint: disable=import-outside-toplevel
    except ImportError as error:
        raise ImportError(f"{feature} needs TensorFlow, which does not import here "
                          f"({backend.describe()}).") from error
    return tensorflow


@dataclasses.dataclass(frozen=True)
class Architecture:
    """What a notation means: hidden widths, activation, output activation, and the
    number of self-attention blocks (0: a feed-forward scorer; otherwise ``hidden`` is
    the width of the documents' projection and ``activation`` the feed-forward layers')."""

    hidden: Tuple[int, ...]
    activation: str
    output_activation: bool
    attention_blocks: int = 0


def parse_notation(notation: str, hidden_units: int = 100) -> Architecture:
    """Parses ``R5``/``CE4.L``/``B256``-style notation (see the module docstring).

    >>> parse_notation("R4.L", 100)  # doctest: +NORMALIZE_WHITESPACE
    Architecture(hidden=(100, 100, 100, 100), activation='relu', output_activation=False,
                 attention_blocks=0)
    >>> parse_notation("B128").hidden
    (128, 64, 32, 16)
    >>> parse_notation("SA2", 64)
    Architecture(hidden=(64,), activation='relu', output_activation=False, attention_blocks=2)

    Raises:
      ValueError: naming ``notation`` and listing the accepted forms.
    """
    accepted = ", ".join(ACCEPTED_FORMS)
    if not isinstance(notation, str):
        raise ValueError(f"`notation` must be a string such as 'R4.L'; got {notation!r}. "
                         f"Accepted forms: {accepted}.")
    paper = _PAPER_NOTATION.match(notation)
    if paper:
        letters, digits, linear = paper.groups()
        layers = int(digits)
        num_hidden = layers if linear else layers - 1
        return Architecture(hidden=(int(hidden_units),) * num_hidden,
                            activation=ACTIVATIONS[letters],
                            output_activation=not linear)
    bruch = _BRUCH_NOTATION.match(notation)
    if bruch and int(bruch.group(1)) in BRUCH_WIDTHS:
        widths, width = [], int(bruch.group(1))
        while width >= 16:
            widths.append(width)
            width //= 2
        return Architecture(hidden=tuple(widths), activation="relu", output_activation=False)
    context = _ATTENTION_NOTATION.match(notation)
    if context:
        return Architecture(hidden=(int(hidden_units),), activation="relu",
                            output_activation=False, attention_blocks=int(context.group(1)))
    raise ValueError(f"`notation` {notation!r} is not a known scorer. Accepted forms: "
                     f"{accepted} (<n> = number of layers >= 1, e.g. R5, CE4.L; of "
                     "self-attention blocks for SA<n>).")


@keras.utils.register_keras_serializable(package="tfr_extensions")
class QueryZScore(keras.layers.Layer):
    """Per-list z-score of every feature over the valid documents.

    A layer around ``query_zscore`` (the one formula, shared with the dataset
    option): :func:`tfr_extensions.keras_ops.normalization.query_zscore` on Keras 3,
    :func:`tfr_extensions.data.normalization.query_zscore` on Keras 2
    (:data:`USES_KERAS_OPS`). ``call(features [B, L, F], valid [B, L])``.
    """

    def __init__(self, **kwargs):
        kwargs.setdefault("dtype", "float32")  # statistics in float32, also under mixed_float16
        super().__init__(**kwargs)

    def call(self, features, valid):
        return query_zscore(features, valid)


@keras.utils.register_keras_serializable(package="tfr_extensions")
class Scorer(keras.Model):
    """A feed-forward or a context-aware (``SA<n>``) scorer over ``{"features", "mask"}``
    dicts or features ``[B, L, F]`` alone.

    Build it with :func:`scorer`. ``call`` returns float32 scores ``[B, L]``.
    """

    def __init__(self, notation: str = "R4.L", num_features: int = 1,
                 hidden_units: int = 100, batch_norm: bool = True,
                 normalization: str = "query_zscore", l2: float = 0.0,
                 attention_heads: int = 4, dropout: float = 0.0,
                 name: Optional[str] = None, **kwargs):
        architecture = parse_notation(notation, hidden_units)
        # autocast=False: raw features reach the z-score in float32 (never rounded to
        # float16 under mixed_float16); the dense layers cast what they get.
        kwargs.setdefault("autocast", False)
        super().__init__(name=name or "scorer_" + notation.replace(".", "_"), **kwargs)
        validation.validate_choice(normalization, NORMALIZATIONS, "normalization")
        num_features = validation.validate_int(num_features, "num_features", minimum=1)
        hidden_units = validation.validate_int(hidden_units, "hidden_units", minimum=1)
        l2 = validation.validate_number(l2, "l2", minimum=0.0)
        attention_heads = validation.validate_int(attention_heads, "attention_heads",
                                                  minimum=1)
        dropout = validation.validate_number(dropout, "dropout", minimum=0.0)
        if dropout >= 1.0:
            raise ValueError(f"`dropout` must be in [0, 1); got {dropout}.")
        self.architecture = architecture
        self._config = dict(notation=notation, num_features=num_features,
                            hidden_units=hidden_units, batch_norm=bool(batch_norm),
                            normalization=normalization, l2=float(l2),
                            attention_heads=attention_heads, dropout=float(dropout))
        # PyTorch's Adam(weight_decay=l2) adds l2 * w to the gradient, which is
        # the gradient of (l2 / 2) * ||w||^2: Keras's l2(c) penalizes c * ||w||^2.
        regularizer = keras.regularizers.l2(l2 / 2.0) if l2 > 0 else None
        self.normalizer = (QueryZScore(name="query_zscore")
                           if normalization == "query_zscore" else None)
        self.dense_layers = [
            keras.layers.Dense(width, kernel_regularizer=regularizer, name=f"dense_{i}")
            for i, width in enumerate(self.architecture.hidden)]
        self.norm_layers = [
            keras.layers.BatchNormalization(name=f"batch_norm_{i}")
            for i in range(len(self.architecture.hidden))] if batch_norm else []
        self.dropout_layer = (keras.layers.Dropout(dropout)  # (SA<n>: inside its blocks)
                              if dropout > 0 and not architecture.attention_blocks else None)
        self.encoder_blocks = [
            attention.EncoderBlock(hidden_units, attention_heads,
                                   FEED_FORWARD_RATIO * hidden_units, dropout,
                                   name=f"encoder_block_{i}")
            for i in range(architecture.attention_blocks)]
        self.encoder_norm = keras.layers.LayerNormalization(
            epsilon=attention.LAYER_NORM_EPSILON,
            name="encoder_norm") if self.encoder_blocks else None
        # float32 output layer: scores are float32 under mixed_float16 too.
        self.output_layer = keras.layers.Dense(
            1, kernel_regularizer=regularizer, dtype="float32", name="score")
        self._act = _ACTIVATION_FUNCTIONS[self.architecture.activation]

    def call(self, inputs, training=None):
        features, mask = _features_and_mask(inputs)
        if self.normalizer is not None:
            features = self.normalizer(features, mask)
        hidden = _cast(features, self.compute_dtype)
        if self.encoder_blocks:
            return self._score_in_context(hidden, mask, training)
        for i, dense in enumerate(self.dense_layers):
            hidden = dense(hidden)
            if self.norm_layers:
                hidden = self.norm_layers[i](hidden, training=training, mask=mask)
            hidden = self._act(hidden)
            if self.dropout_layer is not None:
                hidden = self.dropout_layer(hidden, training=training)
        scores = self.output_layer(hidden)[..., 0]
        if self.architecture.output_activation:
            scores = self._act(scores)
        return scores

    def _score_in_context(self, hidden, mask, training):
        """``SA<n>``: the projection, the encoder blocks over each list's valid documents
        (the padded rows zeroed, so that no value of theirs, NaN included, reaches a
        valid document), the final layer norm and the linear output."""
        hidden = self.dense_layers[0](hidden)
        if self.norm_layers:
            hidden = self.norm_layers[0](hidden, training=training, mask=mask)
        hidden = attention.zero_padding(hidden, mask)
        pairs = attention.pair_mask(mask)
        for block in self.encoder_blocks:
            hidden = block(hidden, pairs, training=training)
        return self.output_layer(self.encoder_norm(hidden))[..., 0]

    def get_config(self):
        return dict(self._config, name=self.name)

    def export(self, filepath, format="tf_saved_model", verbose=None, input_signature=None,
               **kwargs):
        """Keras's ``Model.export`` (a SavedModel with a ``serve`` endpoint), by default
        with this scorer's input signature (:func:`input_signature_of`: any batch and
        list size, a bool mask), which Keras cannot infer for a dict of mixed dtypes.
        For TF Serving's signatures (ELWC, ``tf.Example``) use
        :func:`tfr_extensions.serving.export` instead.

        Raises:
          UnsupportedBackendError: on Keras 3's JAX or PyTorch backend (a SavedModel is
            written from the TensorFlow backend: save a ``.keras`` file and export it
            there, e.g. with ``tfrx-export``).
        """
        if backend.backend_name() != "tensorflow":
            raise backend.UnsupportedBackendError(
                f"Scorer.export writes a TensorFlow SavedModel, from Keras's TensorFlow "
                f"backend only; this process runs {backend.describe()}. Save the model "
                "as a .keras file (model.save('model.keras'), which loads on every backend) "
                "and export it where TensorFlow is installed, with KERAS_BACKEND=tensorflow: "
                "`tfrx-export model.keras saved_models/<name>/1`.")
        if input_signature is None:
            input_signature = [input_signature_of(self._config["num_features"])]
        if backend.IS_KERAS_3:
            return super().export(filepath, format=format, verbose=verbose,
                                  input_signature=input_signature, **kwargs)
        # Keras 2's export takes the path only and fixes the first call's shapes
        archive = keras.export.ExportArchive()
        archive.track(self)
        archive.add_endpoint("serve", lambda inputs: self(inputs, training=False),
                             input_signature=input_signature)
        archive.write_out(filepath)

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def input_signature_of(num_features: int):
    """A scorer's input as ``tf.TensorSpec``s: ``{"features": float32 [None, None, F],
    "mask": bool [None, None]}``.

    >>> import pytest
    >>> tf = pytest.importorskip("tensorflow")  # TensorSpecs need TensorFlow
    >>> input_signature_of(3)["mask"]
    TensorSpec(shape=(None, None), dtype=tf.bool, name='mask')
    """
    tensorflow = _import_tensorflow("tfrx.models.input_signature_of")
    return {"features": tensorflow.TensorSpec([None, None, num_features], tensorflow.float32,
                                              name="features"),
            "mask": tensorflow.TensorSpec([None, None], tensorflow.bool, name="mask")}


def scorer(notation: str, num_features: int, hidden_units: int = 100,
           batch_norm: bool = True, normalization: str = "query_zscore",
           l2: float = 0.0, attention_heads: int = 4, dropout: float = 0.0,
           name: Optional[str] = None) -> Scorer:
    """A built scoring network (see the module docstring for the notation).

    Args:
      notation: ``R5``, ``CE5``, ``GE5``, ``R4.L``, ``CE4.L`` (any layer count),
        ``B64`` ... ``B1024``, or ``SA<n>`` (``n`` self-attention blocks).
      num_features: F, the feature vector's length.
      hidden_units: width of the papers' hidden layers (100 there); of the documents'
        representation for ``SA<n>`` (allRank: 128).
      batch_norm: batch normalization after each hidden dense layer (for ``SA<n>``, after
        the projection).
      normalization: ``"query_zscore"`` (per-list z-score inside the model, as
        the papers do) or ``"none"`` (features used as given).
      l2: L2 regularization of the kernels, as PyTorch's ``weight_decay``
        (the papers use 1e-3); 0 = none.
      attention_heads: the heads of each self-attention block (``SA<n>`` only).
      dropout: the dropout rate of the hidden layers (of the encoder blocks for
        ``SA<n>``; allRank: 0.3); 0 = none.
      name: the Keras model's name.

    Returns:
      A built :class:`Scorer`: ``{"features": [B, L, F], "mask": [B, L]}``, or the
      features ``[B, L, F]`` alone (every document valid) -> float32 scores ``[B, L]``.
    """
    model = Scorer(notation, num_features, hidden_units=hidden_units,
                   batch_norm=batch_norm, normalization=normalization, l2=l2,
                   attention_heads=attention_heads, dropout=dropout, name=name)
    model({"features": np.zeros([1, 2, model.get_config()["num_features"]], np.float32),
           "mask": np.ones([1, 2], bool)})
    return model


class TrainingModel(keras.Model):
    """The model that ``fit`` trains: ``scorer``'s scores, with the random state of
    ``loss`` (a seeded randomized loss of :mod:`tfr_extensions.losses`) as its own
    non-trainable variables.

    Such a loss draws one seed per step from a ``keras.random.SeedGenerator``
    (:mod:`tfr_extensions.keras_ops.random`). Keras's JAX trainer threads the model's
    variables through each jitted step, not a loss's, so the loss alone asks the host
    for each seed through an ordered callback, which holds a GPU stream until Python
    answers. Keras tracks a model's ``SeedGenerator`` like a layer's (``Dropout``'s):
    here the trainer threads the loss's generators, their draws are the same stream,
    and no callback is traced. On the other backends (the state is a variable that
    every step assigns) nothing changes.

    Save and export :attr:`scorer`, which holds no variable of the loss; the loss's
    state is saved with the loss (``save_own_variables``).

    >>> import tfr_extensions as tfrx
    >>> scorer = tfrx.models.scorer("R2.L", 3, hidden_units=4)
    >>> loss = tfrx.losses.get("twin_ndcg_type3", seed=0)
    >>> model = TrainingModel(scorer, loss)
    >>> model.compile("adam", loss=loss)
    >>> inputs = {"features": np.ones([1, 2, 3], np.float32), "mask": np.ones([1, 2], bool)}
    >>> tuple(model(inputs).shape)  # the scorer's scores
    (1, 2)
    """

    def __init__(self, scorer: keras.Model, loss, **kwargs):
        super().__init__(name=kwargs.pop("name", f"training_{scorer.name}"), **kwargs)
        self.scorer = scorer
        self.loss_seed_generators = self.seed_generators_of(loss)
        self.built = scorer.built

    @staticmethod
    def seed_generators_of(loss) -> list:
        """The ``SeedGenerator``s ``loss`` draws from (none for a loss without seeds:
        then a :class:`TrainingModel` only passes the scores on)."""
        generators = getattr(loss, "seed_generators", None)
        return list(generators()) if generators else []

    def call(self, inputs, training=None):
        return self.scorer(inputs, training=training)

#: the public names, in the order a user meets them (the API reference documents these)
__all__ = [
    "scorer",
    "parse_notation",
    "Scorer",
    "TrainingModel",
    "QueryZScore",
    "Architecture",
    "input_signature_of",
    "ACCEPTED_FORMS",
    "attention",
]
