"""What a training run of :mod:`pipelines.train` depends on: :class:`TrainConfig`
(written as the run's ``config.json``, given as ``tfrx-train``'s flags) and the
``--strategy`` names (:data:`STRATEGIES`). The job imports both; ``pipelines.train.TrainConfig``
is this class.
"""
import dataclasses
import os
from typing import Any, Dict, Mapping, Optional

from . import common
from . import flags
from . import trainable
from tfr_extensions import evaluation
from tfr_extensions import models
from tfr_extensions.ops import validation

#: ``--strategy`` -> TF-Ranking's strategy name on TensorFlow (:mod:`tfr_extensions.strategies`);
#: ``data_parallel`` is Keras's ``DataParallel`` distribution on JAX
#: (:mod:`pipelines.keras_runtime`)
STRATEGIES = {"default": None, "mirrored": "MirroredStrategy",
              "multi_worker": "MultiWorkerMirroredStrategy", "data_parallel": None}


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Everything a training run depends on (written as ``config.json``).

    Attributes:
      name: run name; the default output dir is runs/<name>.
      data: 'synthetic' (the embedded data) or a folder with train.txt, vali.txt and test.txt.
      fold: use <data>/Fold<fold> (the synthetic data has folds 1..5).
      loss: any tfrx.losses.get name (ours or TF-Ranking's), or irgan_point, irgan_pair,
        irgan_list: an IRGAN of two scorers.
      loss_args: JSON keyword arguments of the loss (of IRGAN for irgan_*), e.g. '{"topn": 10}'.
      scorer: scorer notation of tfrx.models: R5, CE5, GE5, R4.L, CE4.L, B64..B1024, or SA<n>
        (n self-attention blocks over each list, context-aware).
      hidden_units: hidden units per layer of the scorer.
      batch_norm: batch normalization in the scorer.
      epochs: training epochs.
      batch_size: queries per (global) batch.
      learning_rate: Adam's learning rate (the papers' protocol: 1e-3).
      l2: L2 penalty, as PyTorch's weight decay (the papers' protocol: 1e-3).
      list_size: pad or truncate every list to this size; none: the longest list of each batch.
      seed: the seed of the initial weights, the data order and randomized losses.
      strategy: default (one device), mirrored or multi_worker (TensorFlow:
        MirroredStrategy, MultiWorkerMirroredStrategy from TF_CONFIG), or data_parallel (JAX:
        keras.distribution.DataParallel over every local device).
      output_dir: where the outputs go; none: runs/<name>.
      export_dir: a TF Serving SavedModel version folder, e.g. saved_models/<name>/1; none: no
        export (without TensorFlow the run prints the tfrx-export command that writes it).
      validation_metric: the exact validation metric that picks the best epoch.
      no_relevant: evaluation rule for lists without a relevant document
        (tfr_extensions.evaluation): exclude, count as zero, or count as one.
      drop_no_relevant: drop training lists without a relevant document (they carry no signal).
      steps_per_epoch: training steps per epoch; none: one pass over the training queries.
      test_curve: also evaluate validation_metric on the test set after every epoch (history
        key test_<metric>_<k>, e.g. test_ndcg_5), for learning curves.
      mixed_precision: train under the mixed_float16 policy.
      jit_compile: compile the training step with XLA (TensorFlow) or torch.compile (PyTorch);
        JAX always compiles it.
      tensorboard: write TensorBoard logs to <output_dir>/logs.
      verbose: Keras progress output: 0 silent, 1 a bar, 2 a line per epoch (not part of the
        run's identity).
    """

    name: str = "default"
    data: str = common.SYNTHETIC
    fold: Optional[int] = None
    loss: str = "twin_ndcg_type3"
    loss_args: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    scorer: str = "R4.L"
    hidden_units: int = 100
    batch_norm: bool = True
    epochs: int = 20
    batch_size: int = 32
    learning_rate: float = 1e-3
    l2: float = 1e-3
    list_size: Optional[int] = None
    seed: int = 0
    strategy: str = dataclasses.field(default="default",
                                      metadata=flags.option(choices=tuple(STRATEGIES)))
    output_dir: Optional[str] = None
    export_dir: Optional[str] = None
    validation_metric: str = "ndcg@5"
    no_relevant: str = dataclasses.field(
        default="exclude", metadata=flags.option(choices=evaluation.NO_RELEVANT_RULES))
    drop_no_relevant: bool = dataclasses.field(
        default=True, metadata=flags.option(false_alias="--keep-no-relevant"))
    steps_per_epoch: Optional[int] = None
    test_curve: bool = False
    mixed_precision: bool = False
    jit_compile: bool = False
    tensorboard: bool = True
    verbose: int = 1

    def __post_init__(self):
        validation.validate_choice(self.strategy, tuple(STRATEGIES), "strategy")
        validation.validate_choice(self.no_relevant, evaluation.NO_RELEVANT_RULES, "no_relevant")
        for arg in ("epochs", "batch_size", "hidden_units"):
            validation.validate_int(getattr(self, arg), arg, minimum=1)
        if not isinstance(self.loss_args, Mapping):
            raise ValueError(f"`loss_args` must be a mapping; got {self.loss_args!r}.")
        trainable.model_kind(self.loss).check_loss(self.loss, self.loss_args)
        models.parse_notation(self.scorer, self.hidden_units)
        evaluation.parse_metric(self.validation_metric)

    @property
    def resolved_output_dir(self) -> str:
        return self.output_dir or os.path.join("runs", self.name)

    def to_json(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)
