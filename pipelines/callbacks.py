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
import time

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


class StepTimer(keras.callbacks.Callback):
    """Host time of the training steps (from a step's begin to its end, which holds
    fetching its batch) and of the gaps between them (the batch callbacks); with
    ``input_wait`` (a function returning the seconds the steps waited for input so
    far, e.g. :attr:`pipelines.keras_runtime.TrainingStream.wait_seconds`), the share
    of that wait in the training time.

    :meth:`summary`: ``steps``, ``step_seconds``, ``gap_seconds``,
    ``steps_per_second`` and ``input_wait_fraction`` (None without ``input_wait``),
    in all and per epoch."""

    def __init__(self, input_wait=None):
        super().__init__()
        self.steps, self.step_seconds, self.gap_seconds = 0, 0.0, 0.0
        self._input_wait = input_wait
        self._waited_before = input_wait() if input_wait else 0.0
        self._begin = None
        self._last_end = None
        self.epochs = []  # each epoch's summary, in order
        self._epoch_start = None

    def on_epoch_begin(self, epoch, logs=None):
        self._last_end = None
        self._epoch_start = (self.steps, self.step_seconds, self.gap_seconds,
                             self._input_wait() if self._input_wait else None)

    def on_epoch_end(self, epoch, logs=None):
        steps, step_seconds, gap_seconds, waited = self._epoch_start
        self.epochs.append(self._summary(
            self.steps - steps, self.step_seconds - step_seconds,
            self.gap_seconds - gap_seconds,
            self._input_wait() - waited if waited is not None else None))

    def on_train_batch_begin(self, batch, logs=None):
        self._begin = time.perf_counter()
        if self._last_end is not None:
            self.gap_seconds += self._begin - self._last_end

    def on_train_batch_end(self, batch, logs=None):
        self._last_end = time.perf_counter()
        self.step_seconds += self._last_end - self._begin
        self.steps += 1

    @staticmethod
    def _summary(steps, step_seconds, gap_seconds, waited) -> dict:
        total = step_seconds + gap_seconds
        return {"steps": steps, "step_seconds": step_seconds, "gap_seconds": gap_seconds,
                "steps_per_second": steps / total if total > 0 else None,
                "input_wait_seconds": waited,
                "input_wait_fraction": (waited / total if waited is not None and total > 0
                                        else None)}

    def summary(self) -> dict:
        """The totals over every step timed, and ``epochs``: each epoch's."""
        waited = (self._input_wait() - self._waited_before) if self._input_wait else None
        return {**self._summary(self.steps, self.step_seconds, self.gap_seconds, waited),
                "epochs": list(self.epochs)}
