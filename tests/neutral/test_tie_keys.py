"""The tie-break keys (:mod:`tfr_extensions.arrays.tie_keys`) on the framework that runs
here, against their plain-Python oracle (``support.oracles_tie_keys``): every stack and
backend draws the same keys for one seed, so a seeded twin-sigmoid loss gives the same
values everywhere. Runs on every stack (Keras 2 too): public functions and NumPy only."""
import numpy as np
import pytest

import tfr_extensions as tfrx
from support import oracles
from support import oracles_tie_keys
from tfr_extensions import arrays
from tfr_extensions.arrays import tie_keys


def to_numpy(x):
    return np.asarray(x.cpu() if hasattr(x, "cpu") else x)


@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (4, 33), (2, 1024)])
@pytest.mark.parametrize("seed", [0, 7, [3, 4], [2**31 - 2, 123456]])
def test_the_keys_equal_the_oracle(shape, seed):
    keys = to_numpy(tie_keys.tie_keys(shape, seed))
    np.testing.assert_array_equal(keys, oracles_tie_keys.tie_keys(*shape, seed))
    assert all(len(set(row)) == shape[1] for row in keys.tolist())  # a permutation per list


def test_a_seed_tensor_gives_the_keys_of_its_pair():
    xp = arrays.namespace()
    seed = xp.cast(xp.arange(2, dtype="int32") + 5, "int32")  # [5, 6]
    np.testing.assert_array_equal(to_numpy(tie_keys.tie_keys((3, 8), seed)),
                                  oracles_tie_keys.tie_keys(3, 8, [5, 6]))


def _key_broken_ndcg(labels, scores, keys):
    """nDCG of the ranking by score, ties by descending key (the oracle's order)."""
    values = []
    for y, s, k in zip(labels, scores, keys):
        order = np.lexsort((-k, -s))  # by score, then by key
        positions = np.empty(len(s))
        positions[order] = np.arange(len(s))
        values.append(oracles.ndcg(y, -positions))
    return np.array(values)


TIED_LABELS = np.random.default_rng(0).integers(0, 3, (16, 8)).astype(np.float32)
TIED_SCORES = np.repeat(np.array([[0.0, 0.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0]], np.float32),
                        16, axis=0)


@pytest.mark.parametrize("seed", [0, [3, 4]])
def test_a_seeded_twin_sigmoid_loss_breaks_ties_by_the_oracle_keys(seed):
    losses, _ = tfrx.losses.twin_sigmoid_loss(TIED_LABELS, TIED_SCORES, metric="ndcg",
                                              gradient="type3", seed=seed)
    want = -_key_broken_ndcg(TIED_LABELS, TIED_SCORES, oracles_tie_keys.tie_keys(16, 8, seed))
    np.testing.assert_allclose(to_numpy(losses), want, rtol=1e-6)


def test_a_seeded_keras_loss_draws_the_pair_of_its_step():
    """Call k of a loss built with ``seed`` breaks ties as the function does with the
    pair ``(stream_seed(seed), k)``, on every framework (a SeedGenerator's state; the
    step counter on TensorFlow)."""
    loss = tfrx.losses.get("twin_ndcg_type3", seed=11, reduction="none")
    for step in range(3):
        per_list = to_numpy(loss(TIED_LABELS, TIED_SCORES)).reshape(-1)
        want, _ = tfrx.losses.twin_sigmoid_loss(TIED_LABELS, TIED_SCORES, metric="ndcg",
                                                gradient="type3",
                                                seed=[tie_keys.stream_seed(11), step])
        np.testing.assert_allclose(per_list, to_numpy(want), rtol=1e-6, err_msg=f"step {step}")
