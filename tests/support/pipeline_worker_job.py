"""One worker of the TF-Ranking pipeline's multi-worker test (run with TF_CONFIG set).

    python tests/support/pipeline_worker_job.py <fold_dir> <model_dir> <weights.npz> <seed>

Trains ``tfrx.tfranking.SimplePipeline`` over ``LibSVMDatasetBuilder`` with
TF-Ranking's ``strategy="MultiWorkerMirroredStrategy"`` hparam and saves the
final weights. Each worker seeds its initial weights differently (its task
index), so only the strategy's synchronization can make them equal.
"""
import sys

import numpy as np


def main(fold: str, model_dir: str, weights_path: str, seed: str) -> None:
    import tensorflow as tf
    import tensorflow_ranking as tfr
    from tfr_extensions import tfranking

    class Pipeline(tfranking.SimplePipeline):
        def build_callbacks(self):
            self.saver = SaveWeights()
            return super().build_callbacks() + [self.saver]

    class SaveWeights(tf.keras.callbacks.Callback):
        def on_train_end(self, logs=None):
            np.savez(weights_path, *self.model.get_weights())

    builder = tfranking.LibSVMDatasetBuilder(
        f"{fold}/train.txt", f"{fold}/vali.txt", train_batch_size=8, valid_batch_size=32,
        list_size=16, valid_list_size=16)
    model_builder = tfr.keras.model.ModelBuilder(
        input_creator=tfr.keras.model.FeatureSpecInputCreator(*builder.feature_specs()),
        preprocessor=tfranking.QueryZScorePreprocessor(),
        scorer=tfranking.UnivariateScorer("R2.L", hidden_units=8),
        mask_feature_name=builder.mask_feature_name, name="ranker")
    hparams = tfranking.PipelineHparams(
        model_dir=model_dir, num_epochs=1, steps_per_epoch=4, validation_steps=2,
        learning_rate=1e-2, loss="twin_ndcg_type3", loss_args={"topn": 10, "seed": 0},
        strategy="MultiWorkerMirroredStrategy", steps_per_execution=1)
    pipeline = Pipeline(model_builder, builder, hparams)  # creates the strategy first
    tf.keras.utils.set_random_seed(int(seed))
    pipeline.train_and_validate()


if __name__ == "__main__":
    main(*sys.argv[1:5])
