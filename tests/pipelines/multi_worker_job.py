"""One worker of the multi-worker test (run as a subprocess with TF_CONFIG set).

    python tests/pipelines/multi_worker_job.py <data_dir> <output_dir> <weights.npz> <seed>

Trains through ``pipelines.train.run`` with ``strategy="multi_worker"`` and saves
the final weights, so the test can compare the workers. Each worker gets its
own seed (its task index), so only the strategy's synchronization (broadcast of
the initial values, all-reduce of the gradients) can make the weights equal.
"""
import sys

import numpy as np


def main(data_dir: str, output_dir: str, weights_path: str, seed: str) -> None:
    from pipelines import train  # imported here: nothing runs TF before the strategy exists
    config = train.TrainConfig(
        name="multi_worker", data=data_dir, strategy="multi_worker", scorer="R2.L",
        hidden_units=8, epochs=1, batch_size=8, steps_per_epoch=4, seed=int(seed),
        output_dir=output_dir, tensorboard=False, verbose=0)
    result = train.run(config)
    np.savez(weights_path, *result.model.get_weights())


if __name__ == "__main__":
    main(*sys.argv[1:5])
