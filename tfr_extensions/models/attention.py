r"""The self-attention encoder of the context-aware scorers (``SA<n>``): each document's
representation is recomputed from the other documents of its list.

Pobrotyn et al., "Context-Aware Learning to Rank with Self-Attention" (allRank), and
the Transformer encoder of Vaswani et al. that it adapts. One block, with pre-norm
residuals as allRank writes them (its ``SublayerConnection``):

.. math::

   x \leftarrow x + \mathrm{Dropout}(\mathrm{MHA}(\mathrm{LN}(x))), \qquad
   x \leftarrow x + \mathrm{Dropout}(W_2\,\mathrm{Dropout}(\mathrm{ReLU}(W_1\,\mathrm{LN}(x))))

where the multi-head attention of document :math:`i` is over the valid documents
:math:`j` of its list only: a padded document is never a key, so no valid document's
output depends on padding, and without positional input the block is permutation
equivariant (permuting a list's documents permutes its outputs). Keras's
``MultiHeadAttention`` and ``LayerNormalization`` (:math:`\epsilon = 10^{-6}`, allRank's)
compute it on every backend; this module holds the masks (written once against
the array namespace, :func:`tfr_extensions.arrays.namespace`) and the block's wiring.

>>> import numpy as np
>>> block = EncoderBlock(units=8, heads=2, feed_forward_units=16)
>>> x = np.random.default_rng(0).normal(size=(1, 3, 8)).astype("float32")
>>> valid = np.array([[True, True, False]])
>>> tuple(block(x, pair_mask(valid)).shape)
(1, 3, 8)
"""
from tfr_extensions import arrays
from tfr_extensions import backend
from tfr_extensions.backend import keras


def pair_mask(valid):
    """Bool ``[B, L, L]``: query ``i`` may attend key ``j`` where ``j`` is valid
    (``valid`` bool ``[B, L]``)."""
    xp = arrays.namespace()
    valid = xp.cast(valid, "bool")
    return xp.logical_and(xp.ones_like(valid)[:, :, None], valid[:, None, :])


def zero_padding(x, valid):
    """``x`` ``[B, L, D]`` with the rows of padded documents set to 0."""
    xp = arrays.namespace()
    return xp.where(xp.cast(valid, "bool")[..., None], x, xp.zeros_like(x))


#: allRank's LayerNorm epsilon
LAYER_NORM_EPSILON = 1e-6


@keras.utils.register_keras_serializable(package="tfr_extensions")
class EncoderBlock(keras.layers.Layer):
    """One pre-norm Transformer encoder block over the documents of each list.

    ``call(x [B, L, units], mask [B, L, L] from pair_mask, training)`` returns
    ``[B, L, units]``. ``heads`` attention heads of ``max(1, units // heads)`` dimensions
    each; a feed-forward layer of ``feed_forward_units``; ``dropout`` on the attention
    weights, the feed-forward layer and both residual branches (allRank's placement).
    """

    def __init__(self, units: int, heads: int, feed_forward_units: int, dropout: float = 0.0,
                 **kwargs):
        super().__init__(**kwargs)
        self.units, self.heads = int(units), int(heads)
        self.feed_forward_units, self.dropout_rate = int(feed_forward_units), float(dropout)
        self.attention_norm = keras.layers.LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, name="attention_norm")
        self.attention = keras.layers.MultiHeadAttention(
            self.heads, key_dim=max(1, self.units // self.heads), dropout=self.dropout_rate,
            name="attention")
        self.feed_forward_norm = keras.layers.LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, name="feed_forward_norm")
        self.feed_forward_hidden = keras.layers.Dense(
            self.feed_forward_units, activation="relu", name="feed_forward_hidden")
        self.feed_forward_output = keras.layers.Dense(self.units, name="feed_forward_output")
        self.dropout = keras.layers.Dropout(self.dropout_rate)

    def build(self, input_shape):
        if backend.IS_KERAS_3:  # (Keras 2 builds the sublayers on their first call)
            shape = tuple(input_shape)
            self.attention_norm.build(shape)
            self.attention.build(shape, shape)
            self.feed_forward_norm.build(shape)
            self.feed_forward_hidden.build(shape)
            self.feed_forward_output.build(shape[:-1] + (self.feed_forward_units,))
        super().build(input_shape)

    def call(self, x, mask, training=None):
        normed = self.attention_norm(x)
        attended = self.attention(normed, normed, attention_mask=mask, training=training)
        x = x + self.dropout(attended, training=training)
        hidden = self.dropout(self.feed_forward_hidden(self.feed_forward_norm(x)),
                              training=training)
        return x + self.dropout(self.feed_forward_output(hidden), training=training)

    def get_config(self):
        return dict(super().get_config(), units=self.units, heads=self.heads,
                    feed_forward_units=self.feed_forward_units, dropout=self.dropout_rate)


__all__ = ["EncoderBlock", "pair_mask", "zero_padding", "LAYER_NORM_EPSILON"]
