"""One worker of the multi-worker test (run as a subprocess with TF_CONFIG set).

    python tests/pipelines/multi_worker_job.py <data_dir> <output_dir> <weights.npz> \
        <task_index> <epochs> [<interrupt_after_epoch>]

Trains through ``pipelines.train.run`` with ``strategy="multi_worker"`` and saves
the final weights, so the test can compare the workers. Both workers run the
same config, but each creates its variables under its own random seed (its
task index), so only the strategy's synchronization (broadcast of the initial
values, all-reduce of the gradients) can make the weights equal. With
``interrupt_after_epoch`` k > 0, the worker saves its weights and stops right
after the backup of epoch k is written (as a killed job would), with exit
status :data:`INTERRUPTED`.
"""
import sys

import numpy as np

INTERRUPTED = 3


class Interrupted(Exception):
    pass


def own_initial_values(train, task_index: int) -> None:
    """Makes ``train.build_model`` create the variables under seed ``task_index``."""
    import tensorflow as tf
    build_model = train.build_model

    def build_with_own_seed(config, num_features):
        tf.keras.utils.set_random_seed(task_index)
        return build_model(config, num_features)
    train.build_model = build_with_own_seed


def interrupt_after(resume, epochs: int, weights_path: str) -> None:
    """Makes ``TrainingBackup`` save the weights and raise once it has backed up
    epoch ``epochs``."""
    back_up = resume.TrainingBackup.on_epoch_end

    def on_epoch_end(self, epoch, logs=None):
        back_up(self, epoch, logs)
        if epoch + 1 == epochs:
            np.savez(weights_path, *self.model.get_weights())
            raise Interrupted()
    resume.TrainingBackup.on_epoch_end = on_epoch_end


def main(data_dir: str, output_dir: str, weights_path: str, task_index: str, epochs: str,
         interrupt_after_epoch: str = "0") -> None:
    # imported here: nothing runs TF before the strategy exists
    from pipelines import resume
    from pipelines import train
    own_initial_values(train, int(task_index))
    if int(interrupt_after_epoch):
        interrupt_after(resume, int(interrupt_after_epoch), weights_path)
    config = train.TrainConfig(
        name="multi_worker", data=data_dir, strategy="multi_worker", scorer="R2.L",
        hidden_units=8, epochs=int(epochs), batch_size=8, steps_per_epoch=4, seed=0,
        output_dir=output_dir, tensorboard=False, verbose=0)
    try:
        result = train.run(config)
    except Interrupted:
        sys.exit(INTERRUPTED)
    np.savez(weights_path, *result.model.get_weights())


if __name__ == "__main__":
    main(*sys.argv[1:7])
