"""``keras_ops.pairs.row_sums`` against the NumPy sum over all pairs, on each of its
routes: all pairs at once (PyTorch, TensorFlow, a GPU), and on JAX's CPU the blocks of a
compiled loop (inside ``jax.jit``, and eagerly past ``EAGER_MAX_PAIRS``) or of a Python
loop (eagerly up to it)."""
import numpy as np
import pytest

from tfr_extensions import backend

if not backend.IS_KERAS_3:
    pytest.skip("keras.ops is Keras 3's", allow_module_level=True)

from keras import ops  # noqa: E402  (after the skip: Keras 3 only)

from tfr_extensions.keras_ops import pairs  # noqa: E402


def above_and_tied_terms(scores):
    """The terms of two columns (scores, weights): ``w_j ([s_j > s_i] + [s_j = s_i] / 2)``."""
    def terms(other_scores, other_weights):
        above = ops.cast(other_scores > scores[:, :, None], "float32")
        tied = ops.cast(ops.equal(other_scores, scores[:, :, None]), "float32")
        return other_weights * (above + 0.5 * tied)
    return terms


def oracle(scores, weights):
    above = (scores[:, None, :] > scores[:, :, None]).astype(np.float32)
    tied = (scores[:, None, :] == scores[:, :, None]).astype(np.float32)
    return (weights[:, None, :] * (above + 0.5 * tied)).sum(axis=-1)


# 0 documents; fewer than a block; more than one block of each route, with a ragged last
@pytest.mark.parametrize("size", [0, 5, 300])
@pytest.mark.parametrize("eager_max_pairs", [pairs.EAGER_MAX_PAIRS, 0])
def test_row_sums_equal_the_sum_over_all_pairs_eagerly_and_compiled(size, eager_max_pairs,
                                                                     monkeypatch):
    monkeypatch.setattr(pairs, "EAGER_MAX_PAIRS", eager_max_pairs)
    rng = np.random.default_rng(size)
    scores = rng.integers(0, 6, (3, size)).astype(np.float32)  # ties within lists
    weights = rng.uniform(0.0, 2.0, (3, size)).astype(np.float32)
    want = oracle(scores, weights)

    def row_sums(s, w):
        return pairs.row_sums(above_and_tied_terms(s), [s, w], [np.inf, 0.0])

    eager = ops.convert_to_numpy(row_sums(ops.array(scores), ops.array(weights)))
    assert eager.shape == (3, size)
    np.testing.assert_allclose(eager, want, rtol=1e-6, atol=1e-5)
    if backend.backend_name() == "jax":
        import jax
        compiled = np.asarray(jax.jit(row_sums)(scores, weights))
        np.testing.assert_allclose(compiled, want, rtol=1e-6, atol=1e-5)
