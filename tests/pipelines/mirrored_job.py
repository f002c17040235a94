"""``pipelines.train`` under a ``MirroredStrategy`` of two replicas (two logical CPUs),
interrupted after its first epoch, resumed, and run again uninterrupted
(run as a subprocess: the CPU must be split before TensorFlow starts).

    python tests/pipelines/mirrored_job.py <data_dir> <output_dir> <loss>

Writes ``<output_dir>/run`` (interrupted, then resumed) and
``<output_dir>/reference`` (uninterrupted); the test compares their results.
"""
import dataclasses
import sys

REPLICAS = 2


class Interrupted(Exception):
    pass


def main(data_dir: str, output_dir: str, loss: str) -> None:
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * REPLICAS)
    from pipelines import resume
    from pipelines import train

    devices = [f"/cpu:{i}" for i in range(REPLICAS)]
    train.make_strategy = lambda name: tf.distribute.MirroredStrategy(devices)
    config = train.TrainConfig(
        data=data_dir, loss=loss, strategy="mirrored", scorer="R2.L", hidden_units=8, epochs=2,
        batch_size=8, steps_per_epoch=3, seed=5, output_dir=f"{output_dir}/run",
        tensorboard=False, verbose=0)

    back_up = resume.TrainingBackup.on_epoch_end

    def stop_after_the_first_backup(self, epoch, logs=None):
        back_up(self, epoch, logs)
        assert self.model.distribute_strategy.num_replicas_in_sync == REPLICAS
        if epoch == 0:
            raise Interrupted()
    resume.TrainingBackup.on_epoch_end = stop_after_the_first_backup
    try:
        train.run(config)
    except Interrupted:
        pass
    resume.TrainingBackup.on_epoch_end = back_up
    assert train.run(config).resumed_from_epoch == 1
    train.run(dataclasses.replace(config, output_dir=f"{output_dir}/reference"))


if __name__ == "__main__":
    main(*sys.argv[1:4])
