"""The Keras callbacks a training run adds to ``fit``: a non-finite-loss stop and a test curve.

:class:`StopOnNonFiniteLoss` ends training at the first batch whose loss is NaN
or infinite; :class:`CurveLogger` adds an exact metric on another data set (the
test set) to every epoch's logs. :func:`history_key` names such a log.
(:class:`tfr_extensions.evaluation.BestEpochCallback`, which keeps the best
validation epoch, and :class:`pipelines.resume.TrainingBackup` live with their
own jobs.)

>>> history_key("val", "ndcg@5"), history_key("test", "ndcg@5", "generator")
('val_ndcg_5', 'test_ndcg_5_generator')
"""
import math

from . import trainable
from tfr_extensions import evaluation
from tfr_extensions.backend import keras


class NonFiniteLossError(RuntimeError):
    """The training loss became NaN or infinite."""


def history_key(part: str, metric: str, player: str = "") -> str:
    """The history (and TensorBoard) key of ``metric`` on ``part`` per epoch, for the
    scorer named ``player`` (``""``: the only one)."""
    name, topn = evaluation.parse_metric(metric)
    return f"{part}_{name}_{topn}{trainable.player_suffix(player)}"


class StopOnNonFiniteLoss(keras.callbacks.Callback):
    """Raises :class:`NonFiniteLossError` at the end of the first batch whose loss (every
    log whose name ends in ``loss``: Keras's running mean of the epoch) is NaN or
    infinite, naming the epoch and the batch. Put it first: nothing after that batch
    runs (no evaluation of NaN weights, no backup of them)."""

    def __init__(self):
        super().__init__()
        self._epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        for key, value in (logs or {}).items():
            if key.endswith("loss") and not math.isfinite(float(value)):
                steps = (getattr(self, "params", None) or {}).get("steps")
                raise NonFiniteLossError(
                    f"The training {key} is {float(value)} in epoch {self._epoch + 1} (batch "
                    f"{batch + 1}{f' of {steps}' if steps else ''}): training stopped. Lower "
                    "the learning rate, or look for NaN/inf in the features or labels.")


class CurveLogger(keras.callbacks.Callback):
    """Adds the exact ``metric`` of ``scorer`` on ``data`` (a ``LibSVMData``, e.g. the
    test set) to every epoch's logs as ``log_key``: a learning curve in the history,
    ``history.json`` (so a resumed run keeps it) and TensorBoard (put it before them).
    A mean over no query is NaN (None in the JSON files). ``scorer`` may be a model
    other than the one being fit (one player of an IRGAN)."""

    def __init__(self, data, metric: str, no_relevant: str, scorer: keras.Model,
                 log_key: str):
        super().__init__()
        self._name, self._topn = evaluation.parse_metric(metric)
        self.data, self.no_relevant, self.scorer, self.log_key = data, no_relevant, scorer, log_key

    def on_epoch_end(self, epoch, logs=None):
        result = evaluation.evaluate_model(self.scorer, self.data, no_relevant=self.no_relevant,
                                           topns=(self._topn,), metrics=(self._name,))
        if logs is not None:
            logs[self.log_key] = float(result.summary[f"{self._name}@{self._topn}"])
