"""Keras ``fit`` for :func:`pipelines.train.run`, and the training loop that
replaces it where Keras 3 cannot: under ``MultiWorkerMirroredStrategy``.

:func:`fit` is ``model.fit`` on Keras 2 (any strategy) and on Keras 3 without
a strategy or with ``MirroredStrategy``. On Keras 3 with
``MultiWorkerMirroredStrategy`` (keras-team/keras#20585) ``fit`` fails before
the first step, and Keras's own training function after it (the exact errors
and source lines: ``docs/notes/train_pipeline.md``), so :func:`fit_multi_worker`
runs the same epochs itself: Keras's ``model.train_step`` on each replica
(``strategy.run``: loss, loss scaling, gradients all-reduced across the
workers by the optimizer, compiled metrics), the callbacks through Keras's
``CallbackList`` (progress bar, history, ours), the epoch's logs as ``fit``
makes them (``model.get_metrics_result()``, all-reduced over the workers, or a
custom ``train_step``'s last logs).

Under a strategy of several replicas, a weight that no optimizer updates and
that each replica updates from its own batches (batch normalization's moving
mean and variance: Keras 2 keeps them ``ON_READ`` with ``MEAN`` aggregation,
Keras 3 mirrored with aggregation ``"none"``) has one copy per replica, and the
copies drift apart. A checkpoint holds one value per weight, so a resumed run
would restart every replica from one value where an uninterrupted run kept
its copies apart (IRGAN, which scores in inference mode inside its training
step, then trains differently). :class:`SyncReplicaCopies` sets every copy to
the mean over the replicas at the end of each epoch, before the callbacks read
or save the weights: the value Keras 2 reads and saves anyway (a moving average
is linear in its updates), and the same in both runs.

>>> uses_own_loop(None)
False
"""
from typing import Any, Dict, List, Mapping, Optional, Sequence

import tensorflow as tf

import tfr_extensions as tfrx
from tfr_extensions import backend
from tfr_extensions.backend import keras


def uses_own_loop(strategy: Optional[tf.distribute.Strategy]) -> bool:
    """Whether :func:`fit` trains with :func:`fit_multi_worker` rather than
    ``model.fit``: Keras 3 under ``MultiWorkerMirroredStrategy``."""
    return backend.IS_KERAS_3 and isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)


def fit(model: keras.Model, dataset: tf.data.Dataset,
        strategy: Optional[tf.distribute.Strategy], *, epochs: int, initial_epoch: int,
        steps_per_epoch: int, callbacks: Sequence[keras.callbacks.Callback],
        verbose: int) -> None:
    """Trains ``model`` (compiled, built, inside ``strategy``'s scope) from epoch
    ``initial_epoch`` to ``epochs`` on ``dataset``, a stream of ``(x, labels)``
    batches already shuffled and repeated (``shuffle=False``: Keras 3 would warn),
    ``steps_per_epoch`` batches an epoch: ``model.fit``, or :func:`fit_multi_worker`
    where :func:`uses_own_loop`.

    Keras 3's ``fit`` under a strategy of several replicas (``MirroredStrategy`` on
    several GPUs) first averages one batch across the replicas to build the model,
    which fails on a bool tensor: the mask then goes in as int8
    (:func:`tfr_extensions.data.numeric_masks`; the scorers read any non-zero mask
    as True), and the batch size must split evenly over the replicas."""
    if uses_own_loop(strategy):
        fit_multi_worker(model, dataset, strategy, epochs=epochs, initial_epoch=initial_epoch,
                         steps_per_epoch=steps_per_epoch, callbacks=callbacks, verbose=verbose)
        return
    if backend.IS_KERAS_3 and has_replicas(strategy):
        dataset = tfrx.data.numeric_masks(dataset)  # Keras 3 averages a first batch (bool: no)
    model.fit(dataset, epochs=epochs, initial_epoch=initial_epoch,
              steps_per_epoch=steps_per_epoch, callbacks=list(callbacks), verbose=verbose,
              shuffle=False)


def build_compiled_state(model: keras.Model, element_spec: Any) -> None:
    """Creates, as ``fit`` does before its first step, what ``compile`` left
    unbuilt (the compiled metrics' and loss's state), from the ``(x, labels)``
    ``element_spec`` of the training stream. Keras 3 only (``Model._symbolic_build``,
    which ``fit`` calls after the cross-worker reduction that fails)."""
    build = getattr(model, "_symbolic_build", None)
    if build is None:
        raise RuntimeError(f"{backend.describe()} has no Model._symbolic_build, which "
                           "pipelines.distributed.fit_multi_worker needs.")
    build(data_batch=element_spec)


def _first_local_result(strategy: tf.distribute.Strategy, value):
    return strategy.experimental_local_results(value)[0]


def make_train_function(model: keras.Model, strategy: tf.distribute.Strategy):
    """A ``tf.function`` running ``model.train_step`` on the next distributed batch
    of an iterator on every replica; returns this worker's first replica's logs
    (each worker's running means; the epoch's logs come from
    :func:`fit_multi_worker`, over all workers). As in ``fit``, the step on a batch
    is compiled with XLA when ``model.jit_compile`` is set, the iterator read is not."""
    def step_on_data(data):
        logs = strategy.run(model.train_step, args=(data,))
        return tf.nest.map_structure(lambda value: _first_local_result(strategy, value), logs)

    step_on_data = tf.function(step_on_data, jit_compile=bool(model.jit_compile))
    return tf.function(lambda iterator: step_on_data(next(iterator)))


def has_replicas(strategy: Optional[tf.distribute.Strategy]) -> bool:
    """Whether ``strategy`` runs more than one replica (over all workers)."""
    return strategy is not None and strategy.num_replicas_in_sync > 1


def _tf_variable(variable: Any) -> tf.Variable:
    """The TensorFlow variable of a Keras 2 weight (itself) or a Keras 3 one (``.value``)."""
    return variable if isinstance(variable, tf.Variable) else variable.value


def replica_local_variables(model: keras.Model) -> List[tf.Variable]:
    """The model's floating-point weights kept once per replica: not trainable, and
    ``ON_READ`` (Keras 2) or of aggregation ``NONE`` (Keras 3), e.g. batch
    normalization's moving statistics."""
    local = []
    for weight in model.non_trainable_weights:
        variable = _tf_variable(weight)
        if variable.dtype.is_floating and (
                variable.synchronization == tf.VariableSynchronization.ON_READ
                or variable.aggregation == tf.VariableAggregation.NONE):
            local.append(variable)
    return local


def make_average_function(variables: Sequence[tf.Variable], strategy: tf.distribute.Strategy):
    """A ``tf.function`` setting every replica's copy of each of ``variables`` to their
    mean over all replicas (one all-reduce; every worker must call it)."""
    def average_on_replica():
        context = tf.distribute.get_replica_context()
        means = context.all_reduce(tf.distribute.ReduceOp.MEAN,
                                   [tf.identity(variable) for variable in variables])
        for variable, mean in zip(variables, means):
            variable.assign(mean)  # in replica context: this replica's copy

    return tf.function(lambda: strategy.run(average_on_replica))


class SyncReplicaCopies(keras.callbacks.Callback):
    """At the end of each epoch, sets every replica's copy of the model's
    :func:`replica_local_variables` to their mean over the replicas (module
    docstring). Put it before the callbacks that read or save the weights; with
    one replica it does nothing."""

    def __init__(self, strategy: Optional[tf.distribute.Strategy]):
        super().__init__()
        self._strategy = strategy
        self._average = None

    def on_train_begin(self, logs=None):
        variables = replica_local_variables(self.model) if has_replicas(self._strategy) else []
        self._average = make_average_function(variables, self._strategy) if variables else None

    def on_epoch_end(self, epoch, logs=None):
        if self._average is not None:
            self._average()


def _epoch_logs(model: keras.Model, logs: Mapping[str, Any]) -> Dict[str, float]:
    """An epoch's logs as ``fit`` makes them: the model's metrics (over all workers)
    when they have the names of the last step's ``logs``, else those logs (a custom
    ``train_step``'s, e.g. IRGAN's: this worker's running means)."""
    metric_logs = model.get_metrics_result()  # every worker: it may all-reduce
    chosen = metric_logs if set(metric_logs) == set(logs) else logs
    return {name: float(value) for name, value in chosen.items()}


def fit_multi_worker(model: keras.Model, dataset: tf.data.Dataset,
                     strategy: tf.distribute.Strategy, *, epochs: int, initial_epoch: int,
                     steps_per_epoch: int, callbacks: Sequence[keras.callbacks.Callback],
                     verbose: int) -> Dict[str, float]:
    """``model.fit(dataset, epochs=..., initial_epoch=..., steps_per_epoch=...,
    callbacks=..., verbose=...)`` under ``strategy`` (every worker calls it), for
    the Keras 3 that cannot (module docstring). The dataset is distributed with
    ``strategy.experimental_distribute_dataset`` (its auto-shard policy applies);
    ``model.stop_training`` ends it as it ends ``fit``. Returns the last epoch's logs.

    The callbacks see what ``fit`` gives them: ``set_model``, ``params``
    (``epochs``, ``steps``, ``verbose``), ``on_train_begin``, per epoch
    ``on_epoch_begin``, per batch ``on_train_batch_begin/end`` with the batch's
    logs, ``on_epoch_end`` with the epoch's logs, and ``on_train_end``.
    """
    with strategy.scope():
        build_compiled_state(model, dataset.element_spec)
        train_function = make_train_function(model, strategy)
        iterator = iter(strategy.experimental_distribute_dataset(dataset))
    callback_list = keras.callbacks.CallbackList(
        list(callbacks), add_history=True, add_progbar=verbose != 0, verbose=verbose,
        epochs=epochs, steps=steps_per_epoch, model=model)
    model.stop_training = False
    callback_list.on_train_begin()
    epoch_logs: Dict[str, float] = {}
    logs: Dict[str, Any] = {}
    for epoch in range(initial_epoch, epochs):
        model.reset_metrics()
        callback_list.on_epoch_begin(epoch)
        for batch in range(steps_per_epoch):
            callback_list.on_train_batch_begin(batch)
            logs = train_function(iterator)
            callback_list.on_train_batch_end(batch, logs)
            if model.stop_training:
                break
        epoch_logs = _epoch_logs(model, logs)
        callback_list.on_epoch_end(epoch, epoch_logs)
        if model.stop_training:
            break
    callback_list.on_train_end(epoch_logs)
    return epoch_logs
