"""A linear scorer over the ``{"features", "mask"}`` dict, for the tests of evaluation
and of the pipelines' callbacks."""
from tfr_extensions.backend import keras


class LinearScorer(keras.Model):
    """score = features @ w, over the {"features", "mask"} dict (masking unused)."""

    def __init__(self, num_features):
        super().__init__()
        self.dense = keras.layers.Dense(1, use_bias=False)
        self.dense.build([None, None, num_features])

    def call(self, inputs, training=None):
        return self.dense(inputs["features"])[..., 0]
