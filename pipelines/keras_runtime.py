"""How :func:`pipelines.train.run` trains on Keras 3's JAX and PyTorch backends: the
input stream, the devices, ``fit``. No TensorFlow.

* **Input**: :class:`TrainingStream`, a ``keras.utils.PyDataset`` over
  :class:`tfr_extensions.data.RankingPyDataset` batches: epoch after epoch of the
  training queries, each epoch in its own seeded order, batch ``i`` of epoch ``e``
  a function of ``(seed, e, i)`` alone, so that :data:`INPUT_WORKERS` threads build
  :data:`INPUT_QUEUE` batches ahead of the step and a resumed run starts at its
  next epoch; it measures how long the step waited for them. Batches are padded to
  :func:`~tfr_extensions.data.dense.bucket_width`
  of their longest list, so that the compiled step sees a few shapes.
* **Devices** (``--strategy``): ``default`` trains on one device (the first GPU
  where there is one); ``data_parallel`` (JAX) trains with
  ``keras.distribution.DataParallel`` over every device, each batch split over
  them (a batch of the epoch that does not split evenly leaves out its last few
  queries, and the run says how many). PyTorch trains on one device.
  TensorFlow's strategies (``mirrored``, ``multi_worker``) need the TensorFlow
  backend.
* **Processes** (JAX, ``data_parallel``): where Keras's environment variables
  name several processes (``KERAS_DISTRIBUTION_JOB_ADDRESSES`` with the
  coordinator first, ``KERAS_DISTRIBUTION_NUM_PROCESSES``,
  ``KERAS_DISTRIBUTION_PROCESS_ID``), :func:`join_processes` joins them through
  ``jax.distributed.initialize`` (``keras.distribution.initialize``; on CPUs with
  gloo's collectives) before anything else runs; every process builds the same
  global batch and feeds its own slice of it (:class:`TrainingStream`), the model
  is the same everywhere, and process 0 is the chief that writes the outputs.

>>> check_strategy("default", "jax")
>>> check_strategy("mirrored", "jax")
Traceback (most recent call last):
...
ValueError: `strategy` 'mirrored' is a TensorFlow distribution strategy; Keras's jax backend trains with 'default' or 'data_parallel'. Run with KERAS_BACKEND=tensorflow (TensorFlow installed) for 'mirrored'.
"""
import concurrent.futures
import contextlib
import os
import time
from typing import Any, Dict, Optional

import numpy as np

from tfr_extensions import data as tfrx_data
from tfr_extensions.backend import keras

#: the strategies of this runtime, by backend
STRATEGIES = {"jax": ("default", "data_parallel"), "torch": ("default",)}
#: threads that build input batches ahead of the training step
INPUT_WORKERS = 2
#: batches built ahead of the training step
INPUT_QUEUE = 8


def check_strategy(strategy: str, backend_name: Optional[str] = None) -> None:
    """ValueError for a ``strategy`` that Keras's ``backend_name`` backend cannot train with."""
    backend_name = backend_name or keras.backend.backend()
    allowed = STRATEGIES.get(backend_name, ("default",))
    if strategy in allowed:
        return
    if strategy in ("mirrored", "multi_worker"):
        raise ValueError(
            f"`strategy` {strategy!r} is a TensorFlow distribution strategy; Keras's "
            f"{backend_name} backend trains with {' or '.join(map(repr, allowed))}. Run with "
            f"KERAS_BACKEND=tensorflow (TensorFlow installed) for {strategy!r}.")
    raise ValueError(f"`strategy` {strategy!r} is not available on Keras's {backend_name} "
                     f"backend, which trains with {' or '.join(map(repr, allowed))} (PyTorch "
                     "trains on one device here).")


#: Keras's environment variable of the number of processes of a run
NUM_PROCESSES_VARIABLE = "KERAS_DISTRIBUTION_NUM_PROCESSES"


def join_processes(strategy: str) -> int:
    """Joins the JAX processes that Keras's environment variables name (module
    docstring), with ``data_parallel``; returns the number of processes (1: none to
    join). Call it before any JAX computation."""
    processes = int(os.environ.get(NUM_PROCESSES_VARIABLE, "1") or 1)
    if processes <= 1:
        return 1
    if strategy != "data_parallel" or keras.backend.backend() != "jax":
        raise ValueError(f"{NUM_PROCESSES_VARIABLE}={processes} asks for a run of several "
                         "processes, which trains with --strategy data_parallel on JAX; got "
                         f"strategy {strategy!r} on {keras.backend.backend()}.")
    import jax  # pylint: disable=import-outside-toplevel
    if not _JOINED:  # (a job run twice in one process joins once)
        # gloo's collectives for the CPU devices (a GPU's are NCCL's whatever this says);
        # nothing here may touch a device before the join
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        keras.distribution.initialize()
        _JOINED.append(processes)
    return jax.process_count()


_JOINED = []


def process_index() -> int:
    """This process's index among the run's processes (0: the chief)."""
    if keras.backend.backend() != "jax":
        return 0
    import jax  # pylint: disable=import-outside-toplevel
    return jax.process_index()


def process_count() -> int:
    """The run's processes."""
    if keras.backend.backend() != "jax":
        return 1
    import jax  # pylint: disable=import-outside-toplevel
    return jax.process_count()


def sync_processes(name: str) -> None:
    """A barrier: returns once every process of the run has called it."""
    if process_count() > 1:
        from jax.experimental import multihost_utils  # pylint: disable=import-outside-toplevel
        multihost_utils.sync_global_devices(name)


def distribution(strategy: str):
    """The ``keras.distribution`` of ``strategy`` (None: one device). The stream shards
    the batches itself (``auto_shard_dataset=False``)."""
    if strategy != "data_parallel":
        return None
    return keras.distribution.DataParallel(devices=keras.distribution.list_devices(),
                                           auto_shard_dataset=False)


def scope(dist) -> Any:
    """The scope to build and train in: ``dist``'s, or none."""
    return dist.scope() if dist is not None else contextlib.nullcontext()


def num_devices(dist) -> int:
    """How many devices a batch is split over."""
    if dist is None:
        return 1
    return int(np.prod(dist.device_mesh.shape))


#: Keras 3's ``PyDataset`` (Keras 2's ``Sequence`` where this module is imported but not used)
_STREAM_BASE = getattr(keras.utils, "PyDataset", None) or keras.utils.Sequence


class TrainingStream(_STREAM_BASE):
    """The endless training stream of a run, ``steps_per_epoch`` batches an epoch.

    Batch ``i`` of stream epoch ``e`` is batch ``g % n`` of the data's epoch ``g // n``
    (``g = e * steps_per_epoch + i``, ``n`` the batches of one pass over the
    queries), as :func:`pipelines.train.train_dataset` serves it on TensorFlow: a
    ``steps_per_epoch`` shorter or longer than a pass continues the stream where
    the last epoch stopped. ``epoch`` is the next epoch to serve (a resumed run
    sets it to the epochs restored). With ``devices`` > 1 each batch keeps a
    multiple of ``devices`` lists; with ``processes`` > 1 this process feeds its
    slice ``process`` of each such batch (every process builds the same batch).

    The stream prefetches itself: :data:`INPUT_WORKERS` threads build the next
    :data:`INPUT_QUEUE` batches of the stream while the step runs, and Keras reads
    them in order (``workers=0``: Keras's own enqueuer would shuffle nothing and
    hide the wait). :attr:`wait_seconds` is the time ``fit`` spent waiting for a
    batch that was not ready: the input's share of the step time.
    """

    def __init__(self, batches: "tfrx_data.RankingPyDataset", steps_per_epoch: int,
                 epoch: int = 0, devices: int = 1, workers: int = INPUT_WORKERS,
                 queue: int = INPUT_QUEUE, process: int = 0, processes: int = 1):
        super().__init__(**({"workers": 0} if _STREAM_BASE is not keras.utils.Sequence else {}))
        self.batches = batches
        self.steps_per_epoch = int(steps_per_epoch)
        self.epoch = int(epoch)
        self.devices = int(devices)
        self.process, self.processes = int(process), int(processes)
        self.wait_seconds = 0.0
        self.served = 0
        self._queue = int(queue)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=int(workers),
                                                           thread_name_prefix="tfrx-input")
        self._ahead: Dict[int, concurrent.futures.Future] = {}

    @property
    def num_batches(self) -> int:
        return self.steps_per_epoch

    def __len__(self) -> int:
        return self.steps_per_epoch

    def _build(self, step: int):
        x, labels = self.batches.batch(*divmod(step, self.batches.num_batches))
        keep = labels.shape[0] - labels.shape[0] % self.devices
        share = keep // self.processes
        rows = slice(self.process * share, (self.process + 1) * share)
        if keep < labels.shape[0] or self.processes > 1:
            x = {key: value[rows] for key, value in x.items()}
            labels = labels[rows]
        return x, labels

    def __getitem__(self, index: int):
        if not 0 <= index < self.steps_per_epoch:
            raise IndexError(f"batch {index} of {self.steps_per_epoch}")
        step = self.epoch * self.steps_per_epoch + index
        for ahead in range(step, step + self._queue):
            if ahead not in self._ahead:
                self._ahead[ahead] = self._pool.submit(self._build, ahead)
        for stale in [s for s in self._ahead if s < step]:  # (asked out of order)
            self._ahead.pop(stale).cancel()
        future = self._ahead.pop(step)
        start = time.perf_counter()
        batch = future.result()
        self.wait_seconds += time.perf_counter() - start
        self.served += 1
        return batch

    def on_epoch_end(self) -> None:
        self.epoch += 1

    def close(self) -> None:
        """Stops building batches ahead."""
        for future in self._ahead.values():
            future.cancel()
        self._ahead.clear()
        self._pool.shutdown(wait=True)


def left_out_per_epoch(batches: "tfrx_data.RankingPyDataset", devices: int) -> int:
    """Queries a pass over the data leaves out so that every batch splits over
    ``devices`` (its last batch's remainder)."""
    if devices <= 1:
        return 0
    last = batches.num_queries - (batches.num_batches - 1) * batches.batch_size
    return last % devices
