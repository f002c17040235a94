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
``CallbackList`` (progress bar, history, ours), the epoch's logs from
``model.get_metrics_result()`` (every worker's metrics, all-reduced).

>>> uses_own_loop(None)
False
"""
from typing import Any, Dict, Optional, Sequence

import tensorflow as tf

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
    where :func:`uses_own_loop`."""
    if uses_own_loop(strategy):
        fit_multi_worker(model, dataset, strategy, epochs=epochs, initial_epoch=initial_epoch,
                         steps_per_epoch=steps_per_epoch, callbacks=callbacks, verbose=verbose)
        return
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
    :func:`fit_multi_worker`, over all workers). Under XLA (``model.jit_compile``)
    as ``fit`` would be."""
    def train_step(iterator):
        logs = strategy.run(model.train_step, args=(next(iterator),))
        return tf.nest.map_structure(lambda value: _first_local_result(strategy, value), logs)

    return tf.function(train_step, jit_compile=bool(model.jit_compile))


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
    for epoch in range(initial_epoch, epochs):
        model.reset_metrics()
        callback_list.on_epoch_begin(epoch)
        for batch in range(steps_per_epoch):
            callback_list.on_train_batch_begin(batch)
            logs = train_function(iterator)
            callback_list.on_train_batch_end(batch, logs)
            if model.stop_training:
                break
        epoch_logs = {name: float(value) for name, value in model.get_metrics_result().items()}
        callback_list.on_epoch_end(epoch, epoch_logs)
        if model.stop_training:
            break
    callback_list.on_train_end(epoch_logs)
    return epoch_logs
