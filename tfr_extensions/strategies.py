"""``tf.distribute`` strategies by TF-Ranking's names, and where each worker writes.

TF-Ranking's ``tfr.keras.strategy_utils`` for the strategies our pipelines use
(``tests/test_compat.py`` checks each against it where TF-Ranking imports):

* :func:`get_strategy`: a strategy from its name (``"MirroredStrategy"``,
  ``"MultiWorkerMirroredStrategy"``), None for None;
* :func:`strategy_scope`: its scope, or a context that does nothing for None;
* :func:`get_output_filepath`: the chief's output path, a scratch folder for
  the other workers.

>>> get_strategy(None) is None, get_output_filepath("runs/r4l", None)
(True, 'runs/r4l')
"""
import os
from typing import Optional

import tensorflow as tf

#: TF-Ranking's strategy names (``tfr.keras.strategy_utils``)
MIRRORED_STRATEGY = "MirroredStrategy"
MWMS_STRATEGY = "MultiWorkerMirroredStrategy"
STRATEGIES = (MIRRORED_STRATEGY, MWMS_STRATEGY)


def get_strategy(strategy: Optional[str],
                 cluster_resolver=None) -> Optional[tf.distribute.Strategy]:
    """A ``tf.distribute`` strategy by TF-Ranking's name, None for None.

    ``tfr.keras.strategy_utils.get_strategy`` for ``"MirroredStrategy"`` and
    ``"MultiWorkerMirroredStrategy"`` (the latter reads its cluster from
    ``TF_CONFIG`` unless ``cluster_resolver`` is given).
    """
    if strategy is None:
        return None
    if strategy == MIRRORED_STRATEGY:
        return tf.distribute.MirroredStrategy()
    if strategy == MWMS_STRATEGY:
        return tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=cluster_resolver)
    raise ValueError(f"`strategy` must be None or one of {list(STRATEGIES)}; got {strategy!r}.")


class _NoStrategyScope:
    def __enter__(self):
        return None

    def __exit__(self, *args):
        return False


def strategy_scope(strategy: Optional[tf.distribute.Strategy]):
    """``strategy.scope()``, or a context that does nothing for None."""
    return _NoStrategyScope() if strategy is None else strategy.scope()


def get_output_filepath(filepath: str, strategy: Optional[tf.distribute.Strategy]) -> str:
    """Where this worker writes: ``filepath``, except on a non-chief worker of a
    ``MultiWorkerMirroredStrategy``, which gets ``<filepath>/workertemp_<task_id>``
    (created), as TF-Ranking's ``strategy_utils.get_output_filepath``."""
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        task_type = strategy.cluster_resolver.task_type
        task_id = strategy.cluster_resolver.task_id
        if task_type is not None and task_type != "chief":
            temp_dir = os.path.join(filepath,
                                    f"workertemp_{task_id}" if task_id is not None else "")
            tf.io.gfile.makedirs(temp_dir)
            return temp_dir
    return filepath
