"""TF-Ranking's Keras pipelines with our losses, our metrics and LibSVM data.

TF-Ranking's ``tfr.keras.pipeline.SimplePipeline`` looks its loss up in a fixed
name table and reads ELWC TFRecords only. This module plugs into it:

* :class:`SimplePipeline` is TF-Ranking's, with ``build_loss`` resolving
  ``hparams.loss`` through :func:`tfr_extensions.losses.get` (every ``tfrx``
  name, then TF-Ranking's), with keyword arguments from ``hparams.loss_args``,
  and with metrics that add exact nERR@10 and nDCG@k under an explicit rule for
  lists without a relevant document (:class:`PipelineHparams`).
* :class:`LibSVMDatasetBuilder` is a ``tfr.keras.pipeline.AbstractDatasetBuilder``
  over LibSVM/LETOR files or :class:`~tfr_extensions.data.LibSVMData`. It yields
  TF-Ranking's pipeline format, ``({feature_name: [B, L, F], mask_feature_name:
  [B, L]}, labels [B, L])`` with label ``-1`` on padding, from
  :func:`tfr_extensions.data.ranking_dataset`, and TF-Ranking's serving
  signatures (``serving_default``/``regress`` over ``tf.Example``,
  ``predict`` over ELWC), so ``export_saved_model`` and ``export_best_model``
  work unchanged.
* :class:`UnivariateScorer` puts a ``tfrx.models`` scorer (``R4.L``, ``CE5``,
  ``B256``, ...) into ``tfr.keras.model.ModelBuilder``, and :class:`ListwiseScorer`
  a context-aware one (``SA<n>``: self-attention over each list's documents);
  :class:`QueryZScorePreprocessor` z-scores the features per list inside the
  model (so an exported model takes raw features).

TF-Ranking's own dataset builders are unchanged and work with all of this: the
ELWC files that :func:`tfr_extensions.data.to_elwc` writes carry the same
``features``/``relevance`` names.

Example (the LibSVM files of a LETOR fold)::

    import tensorflow_ranking as tfr
    import tfr_extensions as tfrx

    data = tfrx.tfranking.LibSVMDatasetBuilder(
        "Fold1/train.txt", "Fold1/vali.txt", train_batch_size=32, list_size=200)
    model_builder = tfr.keras.model.ModelBuilder(
        input_creator=tfr.keras.model.FeatureSpecInputCreator(*data.feature_specs()),
        preprocessor=tfrx.tfranking.QueryZScorePreprocessor(),
        scorer=tfrx.tfranking.UnivariateScorer("R4.L"),
        mask_feature_name=data.mask_feature_name, name="r4l")
    hparams = tfrx.tfranking.PipelineHparams(
        model_dir="runs/r4l", num_epochs=20, steps_per_epoch=100, validation_steps=None,
        learning_rate=1e-3, loss="twin_ndcg_type3", loss_args={"topn": 10, "seed": 0},
        export_best_model=True, best_exporter_metric="ndcg_5",
        best_exporter_metric_higher_better=True)
    tfrx.tfranking.SimplePipeline(model_builder, data, hparams).train_and_validate()

This module needs TF-Ranking (``tensorflow-ranking``, which pins TF < 2.16);
without it, importing it raises an ``ImportError`` that says what to use instead.
Its old name, ``tfr_extensions.pipeline``, still imports these same objects, with a
``DeprecationWarning``.
"""
import dataclasses
import os
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import tensorflow as tf

from tfr_extensions import compat
from tfr_extensions import losses as tfrx_losses
from tfr_extensions import metrics as tfrx_metrics
from tfr_extensions import models as tfrx_models
from tfr_extensions.backend import keras
from tfr_extensions.data import dataset as tfrx_dataset
from tfr_extensions.data import elwc as tfrx_elwc
from tfr_extensions.data.libsvm import read_libsvm
from tfr_extensions.data.libsvm_data import LibSVMData
from tfr_extensions.data.normalization import query_zscore

tfr = compat.require_tf_ranking(
    "tfr_extensions.tfranking (TF-Ranking's pipeline classes)",
    instead="Without TF-Ranking, train with `python -m pipelines.train` or with Keras `fit` on "
            "`tfr_extensions.data.ranking_dataset`; every loss, metric, model and "
            "`tfr_extensions.serving` export works without it.")

DataSource = Union[str, os.PathLike, LibSVMData]


# --------------------------------------------------------------------------- pipeline


@dataclasses.dataclass
class PipelineHparams(tfr.keras.pipeline.PipelineHparams):
    """TF-Ranking's ``PipelineHparams`` and three more fields.

    Attributes:
      loss_args: keyword arguments of the loss, e.g. ``{"topn": 10, "seed": 0}``
        (``lambda_weight`` may name a TF-Ranking lambda weight, see
        :func:`tfr_extensions.losses.get`).
      no_relevant: how our nDCG metrics count lists without a relevant document:
        ``"exclude"`` (default), ``"zero"`` or ``"one"``; the metric names say it.
      metric_topns: the cutoffs of our nDCG metrics.
    """

    loss_args: Dict[str, Any] = dataclasses.field(default_factory=dict)
    no_relevant: str = "exclude"
    metric_topns: Tuple[int, ...] = (1, 5, 10)


class SimplePipeline(tfr.keras.pipeline.SimplePipeline):
    """TF-Ranking's ``SimplePipeline`` that knows every ``tfrx`` loss.

    ``hparams`` is a :class:`PipelineHparams`, or TF-Ranking's own (then the
    loss has no extra arguments and the metrics use the ``"exclude"`` rule).

    Metrics (all under TF-Ranking's ``metric/`` prefix, so
    ``best_exporter_metric`` can name any of them):

    * TF-Ranking's ``ndcg_1``, ``ndcg_5``, ``ndcg_10``, ``ndcg`` (lists without
      a relevant document count 0);
    * ``nerr_10``: exact nERR@10 (Eq. 16 of the twin-sigmoid paper; TF-Ranking
      has no ERR metric);
    * ``ndcg_<k>_<rule>``: exact nDCG@k under ``hparams.no_relevant``, equal to
      :func:`tfr_extensions.evaluation.evaluate`'s mean with that rule.
    """

    def build_loss(self) -> keras.losses.Loss:
        if not isinstance(self._hparams.loss, str):
            raise TypeError(f"`hparams.loss` must be a loss name (str); got "
                            f"{type(self._hparams.loss).__name__}.")
        loss_args = dict(getattr(self._hparams, "loss_args", None) or {})
        loss_args.setdefault("reduction", self._hparams.loss_reduction)
        return tfrx_losses.get(self._hparams.loss, **loss_args)

    def _our_metrics(self, prefix: str):
        rule = getattr(self._hparams, "no_relevant", "exclude")
        topns = getattr(self._hparams, "metric_topns", (1, 5, 10))
        metrics = [tfrx_metrics.RankingMetric("nerr", topn=10, name=f"{prefix}nerr_10")]
        metrics += [tfrx_metrics.RankingMetric("ndcg", topn=k, no_relevant=rule,
                                               name=f"{prefix}ndcg_{k}_{rule}") for k in topns]
        return metrics

    def build_metrics(self):
        return super().build_metrics() + self._our_metrics("metric/")

    def build_weighted_metrics(self):
        return super().build_weighted_metrics() + self._our_metrics("weighted_metric/")


# --------------------------------------------------------------------------- data


def _load(source: DataSource, num_features: Optional[int], what: str) -> LibSVMData:
    if isinstance(source, LibSVMData):
        if num_features is not None and source.num_features != num_features:
            raise ValueError(f"`{what}` has {source.num_features} features; "
                             f"`num_features` is {num_features}.")
        return source
    if isinstance(source, (str, os.PathLike)):
        return read_libsvm(source, num_features=num_features)
    raise TypeError(f"`{what}` must be a LibSVM/LETOR file path or a LibSVMData; "
                    f"got {type(source).__name__}.")


class LibSVMDatasetBuilder(tfr.keras.pipeline.AbstractDatasetBuilder):
    """LibSVM/LETOR data for TF-Ranking's ``ModelFitPipeline``/``SimplePipeline``.

    Elements are ``({feature_name: float32 [B, L, F], mask_feature_name: bool
    [B, L]}, labels float32 [B, L])``, labels ``-1`` on padded documents (the
    format of TF-Ranking's ``SimpleDatasetBuilder`` with the feature specs of
    :meth:`feature_specs`). The train dataset repeats forever (set
    ``steps_per_epoch``, as with TF-Ranking's builders); the validation dataset
    is one pass over the validation queries in file order, so
    ``validation_steps=None`` validates on every list.

    Args:
      train, valid: LibSVM/LETOR file paths (read with
        :func:`~tfr_extensions.data.read_libsvm`, cached) or ``LibSVMData``.
      train_batch_size, valid_batch_size: lists per batch (``valid_batch_size``
        defaults to ``train_batch_size``).
      list_size, valid_list_size: None pads each batch to its longest list; an
        int pads or truncates (seeded shuffle first) to exactly that many
        documents. ``valid_list_size`` defaults to None: validation sees whole lists.
      shuffle: shuffle the training queries (a new order every epoch).
      normalization: ``"none"`` (default: the features as in the file, as
        TF-Ranking's builders give them) or ``"query_zscore"`` (each query's
        features z-scored over all its documents, as
        :func:`tfr_extensions.data.ranking_dataset` does with that
        normalization). With ``"query_zscore"`` the serving signatures z-score
        each served list the same way (:func:`tfr_extensions.data.query_zscore`)
        before the model, so an exported model takes raw features.
        (Or keep ``"none"`` and put :class:`QueryZScorePreprocessor` in the model.)
      drop_no_relevant: drop training queries without a relevant document.
      seed: seed of the shuffling.
      num_features: F; None reads it from the training file.
      feature_name, mask_feature_name: the keys of the feature dict.
    """

    def __init__(self, train: DataSource, valid: DataSource, *,
                 train_batch_size: int = 32, valid_batch_size: Optional[int] = None,
                 list_size: Optional[int] = None, valid_list_size: Optional[int] = None,
                 shuffle: bool = True, normalization: str = "none",
                 drop_no_relevant: bool = False, seed: int = 0,
                 num_features: Optional[int] = None, feature_name: str = "features",
                 mask_feature_name: str = "list_mask"):
        # Options are checked here; no TensorFlow work before the pipeline's
        # strategy exists (MultiWorkerMirroredStrategy must come first).
        for batch_size, list_size_ in ((train_batch_size, list_size),
                                       (valid_batch_size or train_batch_size, valid_list_size)):
            tfrx_dataset.check_options(list_size_, batch_size, seed, normalization)
        if feature_name == mask_feature_name:
            raise ValueError(f"`feature_name` and `mask_feature_name` must differ; both are "
                             f"{feature_name!r}.")
        self.train_data = _load(train, num_features, "train")
        self.valid_data = _load(valid, self.train_data.num_features, "valid")
        self.feature_name = feature_name
        self.mask_feature_name = mask_feature_name
        self.normalization = normalization
        self._options = dict(train_batch_size=train_batch_size,
                             valid_batch_size=valid_batch_size or train_batch_size,
                             list_size=list_size, valid_list_size=valid_list_size,
                             shuffle=shuffle, drop_no_relevant=drop_no_relevant, seed=seed)

    @classmethod
    def from_hparams(cls, hparams: tfr.keras.pipeline.DatasetHparams,
                     **kwargs) -> "LibSVMDatasetBuilder":
        """From TF-Ranking's ``DatasetHparams`` whose input patterns name LibSVM files."""
        return cls(hparams.train_input_pattern, hparams.valid_input_pattern,
                   train_batch_size=hparams.train_batch_size,
                   valid_batch_size=hparams.valid_batch_size, list_size=hparams.list_size,
                   valid_list_size=hparams.valid_list_size, **kwargs)

    @property
    def num_features(self) -> int:
        return self.train_data.num_features

    def feature_specs(self) -> Tuple[Dict[str, Any], Dict[str, tf.io.FixedLenFeature]]:
        """``(context_feature_spec, example_feature_spec)`` of this data as ELWC,
        for ``tfr.keras.model.FeatureSpecInputCreator`` and the signatures."""
        return {}, tfrx_elwc.feature_spec(self.num_features, self.feature_name)

    def _dataset(self, data: LibSVMData, batch_size: int, list_size: Optional[int],
                 training: bool) -> tf.data.Dataset:
        options = self._options
        dataset = tfrx_dataset.ranking_dataset(
            data, list_size=list_size, batch_size=batch_size,
            shuffle=training and options["shuffle"], normalization=self.normalization,
            drop_no_relevant=training and options["drop_no_relevant"], seed=options["seed"],
            feature_key=self.feature_name, mask_feature_name=self.mask_feature_name)
        return dataset.repeat() if training else dataset

    def build_train_dataset(self) -> tf.data.Dataset:
        options = self._options
        return self._dataset(self.train_data, options["train_batch_size"],
                             options["list_size"], training=True)

    def build_valid_dataset(self) -> tf.data.Dataset:
        options = self._options
        return self._dataset(self.valid_data, options["valid_batch_size"],
                             options["valid_list_size"], training=False)

    def build_signatures(self, model: keras.Model) -> Dict[str, Any]:
        """TF-Ranking's signatures (``serving_default`` = regress over
        ``tf.Example``, ``predict`` over ELWC) for raw features; with
        ``normalization="query_zscore"`` each served list is z-scored first."""
        context_spec, example_spec = self.feature_specs()
        if self.normalization == "query_zscore":
            model = _ZScoredInputs(model, self.feature_name, self.mask_feature_name)
        return tfr.keras.saved_model.Signatures(
            model, context_feature_spec=context_spec, example_feature_spec=example_spec,
            mask_feature_name=self.mask_feature_name)()


class _ZScoredInputs(tf.Module):
    """Calls ``model`` on its inputs with the features z-scored per list."""

    def __init__(self, model: keras.Model, feature_name: str, mask_feature_name: str):
        super().__init__()
        self.model = model
        self._feature_name = feature_name
        self._mask_feature_name = mask_feature_name

    def __call__(self, inputs, training=False):
        inputs = dict(inputs)
        inputs[self._feature_name] = query_zscore(
            inputs[self._feature_name], inputs.get(self._mask_feature_name))
        return self.model(inputs, training=training)


# --------------------------------------------------------------------------- model


class QueryZScorePreprocessor(tfr.keras.model.Preprocessor):
    """A ``ModelBuilder`` preprocessor: every float example feature is z-scored
    over the valid documents of its list (:func:`tfr_extensions.data.query_zscore`);
    context features pass through. Inside the model, so a SavedModel exported
    from it takes raw features."""

    def __call__(self, context_inputs, example_inputs, mask):
        normalized = {}
        for name, value in example_inputs.items():
            if value.dtype.is_floating and value.shape.rank == 3:
                value = tfrx_models.QueryZScore(name=f"query_zscore_{name}")(value, mask)
            normalized[name] = value
        return dict(context_inputs), normalized


def _concatenated(example_features, feature_names=None):
    """The example features in ``feature_names`` order (default: all, sorted by name),
    float32 and concatenated on the last axis; a ValueError names the missing ones."""
    names = feature_names or sorted(example_features)
    missing = [name for name in names if name not in example_features]
    if missing:
        raise ValueError(f"Example features {missing} not among the model's inputs "
                         f"{sorted(example_features)}.")
    return tf.concat([tf.cast(example_features[name], tf.float32) for name in names], axis=-1)


class UnivariateScorer(tfr.keras.model.UnivariateScorer):
    """A ``tfrx.models`` scoring network as TF-Ranking's ``UnivariateScorer``.

    Each document is scored alone from its example features (concatenated in
    ``feature_names`` order, default all of them sorted by name) by the network
    that ``notation`` names (``R4.L``, ``CE5``, ``B256``, ... see
    :func:`tfr_extensions.models.parse_notation`). Per-list normalization
    belongs to the dataset or to :class:`QueryZScorePreprocessor`: a univariate
    scorer sees flattened documents, so its network normalizes nothing itself.

    >>> scorer = UnivariateScorer("R2.L", hidden_units=8)
    >>> logits = scorer({}, {"features": tf.ones([2, 3, 4])}, tf.ones([2, 3], tf.bool))
    >>> logits.shape.as_list()
    [2, 3]
    """

    def __init__(self, notation: str = "R4.L", hidden_units: int = 100,
                 batch_norm: bool = True, l2: float = 0.0,
                 feature_names: Optional[Sequence[str]] = None):
        tfrx_models.parse_notation(notation, hidden_units)  # fail early on a bad notation
        self._config = dict(notation=notation, hidden_units=hidden_units,
                            batch_norm=batch_norm, l2=l2)
        self._feature_names = None if feature_names is None else list(feature_names)

    def _score_flattened(self, context_features, example_features):
        flat = _concatenated(example_features, self._feature_names)  # [B * L, F]
        network = tfrx_models.Scorer(num_features=int(flat.shape[-1]),
                                     normalization="none", **self._config)
        # Each document is a list of one: [B * L, 1, F] -> scores [B * L, 1].
        return network({"features": flat[:, None, :]})


class ListwiseScorer(tfr.keras.model.Scorer):
    """A ``tfrx.models`` scoring network over whole lists as TF-Ranking's ``Scorer``: the
    context-aware ``SA<n>`` (self-attention over each list's valid documents, ``mask``;
    see :func:`tfr_extensions.models.scorer`), or any other notation.

    The documents' example features (concatenated in ``feature_names`` order, default
    all of them sorted by name) reach the network as ``[B, L, F]`` with the pipeline's
    mask. Per-list normalization belongs to the dataset or to
    :class:`QueryZScorePreprocessor`, as for :class:`UnivariateScorer`.

    >>> scorer = ListwiseScorer("SA1", hidden_units=8, attention_heads=2)
    >>> logits = scorer({}, {"features": tf.ones([2, 3, 4])}, tf.ones([2, 3], tf.bool))
    >>> logits.shape.as_list()
    [2, 3]
    """

    def __init__(self, notation: str = "SA4", hidden_units: int = 100,
                 batch_norm: bool = True, l2: float = 0.0, attention_heads: int = 4,
                 dropout: float = 0.0, feature_names: Optional[Sequence[str]] = None):
        tfrx_models.parse_notation(notation, hidden_units)  # fail early on a bad notation
        self._config = dict(notation=notation, hidden_units=hidden_units,
                            batch_norm=batch_norm, l2=l2, attention_heads=attention_heads,
                            dropout=dropout)
        self._feature_names = None if feature_names is None else list(feature_names)

    def __call__(self, context_features, example_features, mask):
        features = _concatenated(example_features, self._feature_names)  # [B, L, F]
        network = tfrx_models.Scorer(num_features=int(features.shape[-1]),
                                     normalization="none", **self._config)
        return network({"features": features, "mask": mask})
