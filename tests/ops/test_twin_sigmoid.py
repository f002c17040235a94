"""twin_sigmoid and twin_sigmoid_ranks: forward values, Eq. 11/20/21 derivatives,
tie breaking, padding, extreme scores, and XLA."""
import functools
import importlib

import numpy as np
import pytest
import scipy.stats
import tensorflow as tf

from support import oracles
from tfr_extensions import ops
from tfr_extensions.ops import list_programs, sorting

GRADIENTS = ("type1", "type2", "type3")


def random_lists(batch=4, size=9, seed=0, pad=True, dtype=np.float64):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 5, size=(batch, size)).astype(dtype)
    scores = rng.normal(size=(batch, size)).astype(dtype)
    if pad:
        labels[:, -2:] = -1.0
        labels[0, 3] = -1.0  # padding in the middle of a list
    return labels, scores


@pytest.mark.parametrize("gradient", GRADIENTS)
@pytest.mark.parametrize("alpha_b", [0.5, 1.0, 3.0])
def test_twin_sigmoid_forward_and_derivative_match_eq_11_20_21(gradient, alpha_b):
    x = np.array([-30.0, -2.0, -0.3, 0.0, 0.4, 1.5, 25.0])
    u = np.array([1.0, -1.0, 0.0, 1.0, -1.0, 1.0, -1.0])
    xt = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        y = ops.twin_sigmoid(xt, alpha_b=alpha_b, gradient=gradient, label_signs=u)
    np.testing.assert_array_equal(y.numpy(), [0, 0, 0, 0.5, 1, 1, 1])
    expected = [oracles.twin_derivative(xi, ui, alpha_b, gradient) for xi, ui in zip(x, u)]
    np.testing.assert_allclose(tape.gradient(y, xt).numpy(), expected, rtol=1e-9, atol=1e-15)  # the oracle loses digits to 1 - sigmoid


def test_twin_sigmoid_validates_arguments():
    with pytest.raises(ValueError, match="gradient"):
        ops.twin_sigmoid(tf.constant([1.0]), gradient="type4")
    with pytest.raises(ValueError, match="alpha_b"):
        ops.twin_sigmoid(tf.constant([1.0]), alpha_b=0.0)
    with pytest.raises(ValueError, match="label_signs"):
        ops.twin_sigmoid(tf.constant([1.0]), gradient="type3")
    with pytest.raises(ValueError, match="labels"):
        ops.twin_sigmoid_ranks(tf.constant([[1.0, 2.0]]), gradient="type2")
    with pytest.raises(ValueError, match="scores"):
        ops.twin_sigmoid_ranks(tf.constant([1.0, 2.0]))


def test_ranks_are_exact_on_distinct_scores_and_padding_gets_zero():
    labels, scores = random_lists()
    ranks = ops.twin_sigmoid_ranks(scores, labels, seed=1).numpy()
    for b in range(len(labels)):
        valid = labels[b] >= 0
        expected = scipy.stats.rankdata(-scores[b][valid], method="ordinal")
        np.testing.assert_array_equal(ranks[b][valid], expected)
        np.testing.assert_array_equal(ranks[b][~valid], 0.0)


def test_tie_breaking_gives_a_seeded_random_permutation():
    scores = tf.constant([[1.0, 1.0, 1.0, 1.0, 2.0, 0.0]] * 3)
    a = ops.twin_sigmoid_ranks(scores, seed=7).numpy()
    b = ops.twin_sigmoid_ranks(scores, seed=7).numpy()
    np.testing.assert_array_equal(a, b)
    for row in a:
        assert sorted(row) == [1, 2, 3, 4, 5, 6]
        assert row[4] == 1 and row[5] == 6
    # the tied block is ordered differently across lists and seeds
    draws = {tuple(r[:4]) for s in range(20)
             for r in ops.twin_sigmoid_ranks(scores, seed=s).numpy()}
    assert len(draws) > 10


@pytest.mark.parametrize("jit_compile", [False, True])  # sorted; counted under XLA
def test_tie_breaking_puts_each_tied_document_first_among_the_ties_equally_often(jit_compile):
    scores = tf.constant([[1.0, 1.0, 1.0, 1.0, 2.0]] * 400)
    ranks = tf.function(lambda s: ops.twin_sigmoid_ranks(s, seed=3),
                        jit_compile=jit_compile)(scores).numpy()
    second = np.bincount(np.argmax(ranks[:, :4] == 2, axis=1), minlength=4)
    assert (ranks[:, 4] == 1).all() and second.sum() == 400
    assert second.min() > 70, second  # 100 each expected; P(< 71) ~ 1e-3 per document


def test_without_tie_breaking_ties_share_their_mean_position():
    rng = np.random.default_rng(3)
    scores = rng.integers(0, 4, size=(5, 12)).astype(np.float32)
    ranks = ops.twin_sigmoid_ranks(scores, tie_break=False).numpy()
    for b in range(5):
        np.testing.assert_array_equal(ranks[b], scipy.stats.rankdata(-scores[b], method="average"))


def test_float32_single_sort_equals_float64_two_sorts():
    rng = np.random.default_rng(4)
    scores = rng.integers(-3, 3, size=(6, 40)).astype(np.float32) * 0.5
    scores[0, :5] = [-0.0, 0.0, -0.0, 1e-30, -1e-30]  # signed zeros are ties
    mask = tf.constant(rng.random((6, 40)) > 0.2)
    keys = sorting.random_tie_keys([6, 40], tf.constant([1, 2]))
    single = sorting.inverse_order(sorting.sort_order(tf.constant(scores), mask, keys))
    double = sorting.inverse_order(
        sorting.sort_order(tf.constant(scores, tf.float64), mask, keys))
    # valid documents get the same positions (padded ones only share the tail)
    np.testing.assert_array_equal(tf.where(mask, single, 0).numpy(),
                                  tf.where(mask, double, 0).numpy())
    assert (tf.where(mask, single, 0).numpy().max(axis=1)
            == mask.numpy().sum(axis=1)).all()


def naive_ranks(scores, labels, gradient, alpha_b):
    """Eq. 12 built literally from the element-wise twin_sigmoid op (O(L^2) forward)."""
    valid = labels >= 0
    diffs = scores[:, :, None] - scores[:, None, :]
    signs = tf.sign(labels[:, :, None] - labels[:, None, :])
    sig = ops.twin_sigmoid(diffs, alpha_b, gradient, signs)
    pair_valid = tf.logical_and(valid[:, :, None], valid[:, None, :])
    off_diagonal = tf.logical_not(tf.eye(scores.shape[1], dtype=tf.bool))[None]
    keep = tf.cast(tf.logical_and(pair_valid, off_diagonal), scores.dtype)
    return tf.where(valid, 1.0 + tf.reduce_sum(keep * (1.0 - sig), -1), 0.0)


@pytest.mark.parametrize("gradient", GRADIENTS)
@pytest.mark.parametrize("alpha_b", [1.0, 2.5])
def test_rank_gradient_equals_literal_eq_12_with_the_elementwise_op(gradient, alpha_b):
    labels, scores = random_lists(seed=5)
    labels, scores = tf.constant(labels), tf.constant(scores)
    weights = tf.constant(np.random.default_rng(6).normal(size=labels.shape))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(scores)
        fused = ops.twin_sigmoid_ranks(scores, labels, gradient=gradient, alpha_b=alpha_b)
        naive = naive_ranks(scores, labels, gradient, alpha_b)
        fused_obj = tf.reduce_sum(weights * fused)
        naive_obj = tf.reduce_sum(weights * naive)
    np.testing.assert_allclose(fused.numpy(), naive.numpy())
    np.testing.assert_allclose(tape.gradient(fused_obj, scores).numpy(),
                               tape.gradient(naive_obj, scores).numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("gradient", GRADIENTS)
def test_rank_jacobian_equals_eq_17_18_in_numpy(gradient):
    labels, scores = random_lists(batch=1, size=6, seed=8, pad=False)
    s = tf.constant(scores)
    with tf.GradientTape() as tape:
        tape.watch(s)
        ranks = ops.twin_sigmoid_ranks(s, tf.constant(labels), gradient=gradient, alpha_b=1.5)
    jac = tape.jacobian(ranks, s).numpy()[0, :, 0, :]
    np.testing.assert_allclose(jac, oracles.rank_jacobian(labels[0], scores[0], 1.5, gradient),
                               rtol=1e-10, atol=1e-14)


@functools.lru_cache(maxsize=None)
def _ranks_vjp(gradient: str, alpha_b: float, xla: bool):
    """``upstream``'s vector-Jacobian product with the ranks, one program per shape and
    dtype for the whole module (the spreads of one dtype share its compiles)."""
    def vjp(scores, labels, upstream):
        with tf.GradientTape() as tape:
            tape.watch(scores)
            ranks = ops.twin_sigmoid_ranks(scores, labels, gradient=gradient, alpha_b=alpha_b,
                                           seed=0)
            objective = tf.reduce_sum(upstream * ranks)
        return tape.gradient(objective, scores)

    return tf.function(vjp, jit_compile=xla)


@pytest.mark.parametrize("gradient", GRADIENTS)
@pytest.mark.parametrize("dtype, spread", [(np.float64, 20.0), (np.float64, 2000.0),
                                           (np.float32, 55.0), (np.float32, 200.0)])
@pytest.mark.parametrize("xla", [False, True])
def test_backward_equals_eq_17_18_on_any_list_length_and_spread(gradient, dtype, spread, xla):
    # One tanh per pair, exact at any spread (e^-spread underflows float32 past ~87);
    # 7, 37 and 130 documents are padded to the buckets 32, 64 and 160.
    alpha = 1.5
    for size in (7, 37, 130):
        labels, scores = random_lists(batch=3, size=size, seed=size, dtype=dtype)
        scores = scores / np.ptp(scores) * spread / alpha
        valid = labels >= 0
        upstream = np.random.default_rng(size).normal(size=labels.shape).astype(dtype)
        got = _ranks_vjp(gradient, alpha, xla)(tf.constant(scores), tf.constant(labels),
                                               tf.constant(upstream)).numpy()
        for b in range(len(labels)):
            v = valid[b]
            with np.errstate(over="ignore"):  # the oracle's 1 / (1 + exp(-x)) -> 0
                jac = oracles.rank_jacobian(labels[b][v].astype(np.float64),
                                            scores[b][v].astype(np.float64), alpha, gradient)
            tol = dict(rtol=1e-10, atol=1e-12) if dtype == np.float64 else dict(rtol=2e-4,
                                                                                atol=2e-4)
            np.testing.assert_allclose(got[b][v], upstream[b][v] @ jac, **tol)
            np.testing.assert_array_equal(got[b][~v], 0.0)


@pytest.mark.parametrize("gradient", GRADIENTS)
def test_extreme_scores_and_all_padding_stay_finite(gradient):
    labels = tf.constant([[2.0, 0.0, 1.0, -1.0], [-1.0, -1.0, -1.0, -1.0], [1.0, 1.0, 0.0, 0.0]])
    scores = tf.constant([[1e4, -1e4, 0.0, 5e3], [1e4, -1e4, 3.0, 0.0], [-1e4, -1e4, 1e4, 1e4]])
    upstream = tf.constant([[1.0, -2.0, 0.5, 3.0]] * 3)
    with tf.GradientTape() as tape:
        tape.watch(scores)
        ranks = ops.twin_sigmoid_ranks(scores, labels, gradient=gradient, seed=0)
        objective = tf.reduce_sum(upstream * ranks)
    grads = tape.gradient(objective, scores).numpy()
    assert np.isfinite(ranks.numpy()).all() and np.isfinite(grads).all()
    np.testing.assert_array_equal(grads[0, 3], 0.0)
    np.testing.assert_array_equal(grads[1], 0.0)
    np.testing.assert_array_equal(ranks.numpy()[1], 0.0)


@pytest.mark.parametrize("gradient", GRADIENTS)
def test_xla_matches_graph_mode(gradient):
    labels, scores = random_lists(batch=3, size=11, seed=9, dtype=np.float32)
    labels, scores = tf.constant(labels), tf.constant(scores)

    def ranks_and_grads(s, y):
        with tf.GradientTape() as tape:
            tape.watch(s)
            r = ops.twin_sigmoid_ranks(s, y, gradient=gradient, seed=3)
            obj = tf.reduce_sum(r * tf.range(11, dtype=tf.float32))
        return r, tape.gradient(obj, s)

    graph = tf.function(ranks_and_grads)(scores, labels)
    xla = tf.function(ranks_and_grads, jit_compile=True)(scores, labels)
    np.testing.assert_array_equal(graph[0].numpy(), xla[0].numpy())
    np.testing.assert_allclose(graph[1].numpy(), xla[1].numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("size", [17, 100])  # one block of columns; blocks with a filled last
@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
def test_counting_positions_under_xla_equal_sorting(dtype, size):
    rng = np.random.default_rng(10)
    scores = tf.constant(rng.integers(-2, 3, size=(5, size)), dtype)  # many ties
    mask = tf.constant(rng.random((5, size)) > 0.25)
    keys = sorting.random_tie_keys([5, size], tf.constant([3, 4]))
    assert all(len(set(row)) == size for row in keys.numpy().tolist())  # distinct: no index needed

    def positions(s):
        return (sorting.exact_ranks(s, mask, keys), sorting.exact_ranks(s, mask),
                sorting.sort_descending(tf.abs(s), mask), sorting.sort_descending(tf.abs(s), mask, 4),
                sorting.midranks(s, mask))

    by_sort = tf.function(positions)(scores)
    by_count = tf.function(positions, jit_compile=True)(scores)
    for a, b in zip(by_sort, by_count):
        np.testing.assert_array_equal(tf.where(mask, a, 0).numpy() if a.shape == mask.shape
                                      else a.numpy(),
                                      tf.where(mask, b, 0).numpy() if b.shape == mask.shape
                                      else b.numpy())


@pytest.mark.parametrize("size", [17, 100, 192])
@pytest.mark.parametrize("ties", ["none", "in one list", "a NaN"])
def test_counting_with_tie_keys_equals_sorting(ties, size):
    # Under XLA positions are counted: higher score, then higher tie key. Keys may be
    # given as a tensor or as a function that draws them.
    rng = np.random.default_rng(11)
    scores = rng.normal(size=(5, size)).astype(np.float32)
    mask = rng.random((5, size)) > 0.25
    mask[:, 0] = True
    mask[:, 3] = False  # padding in the middle of every list
    if ties == "in one list":
        scores[3, 4] = scores[3, 9] = scores[3, 12]
        mask[3, [4, 9, 12]] = True
    if ties == "a NaN":
        scores[2, 5], mask[2, 5] = np.nan, True
    keys = sorting.random_tie_keys([5, size], tf.constant([3, 4]))
    counted = tf.function(lambda s, m: (sorting.exact_ranks(s, m, lambda: keys),
                                        sorting.exact_ranks(s, m, keys)),
                          jit_compile=True)(scores, mask)
    lazily, given = (p.numpy() for p in counted)
    np.testing.assert_array_equal(lazily, given)
    if ties == "a NaN":  # (NaN compares False: no order; the screening keeps it out)
        return
    for row in lazily:
        np.testing.assert_array_equal(np.sort(row), np.arange(1, size + 1))
    by_sort = sorting.exact_ranks(tf.constant(scores), tf.constant(mask), keys).numpy()
    np.testing.assert_array_equal(np.where(mask, lazily, 0), np.where(mask, by_sort, 0))


def _metric_value_and_gradient(metric):
    twin = importlib.import_module("tfr_extensions.ops.twin_sigmoid")

    def value_and_gradient(labels, s):
        with tf.GradientTape() as tape:
            tape.watch(s)
            value = twin.twin_sigmoid_metric(metric, tf.maximum(labels, 0.0), s, labels >= 0,
                                             topn=10, gradient="type3", seed=3)
        return value, tape.gradient(value, s)

    return value_and_gradient


@functools.lru_cache(maxsize=None)
def _compiled_metric(metric, any_length):
    """One XLA program per shape for the module (tied and untied lists share it)."""
    signature = [tf.TensorSpec([None, None], tf.float32)] * 2 if any_length else None
    return tf.function(_metric_value_and_gradient(metric), jit_compile=True,
                       input_signature=signature)


def assert_xla_equals_eager(metric, size, ties, seed, any_length=False):
    """The twin metric and its gradient under XLA equal eager's, on 6 lists of
    ``size`` documents (with ``ties``: all lists but the first tied, the keyed
    count); ``any_length``: the XLA program is traced for lists of any length."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(-1, 4, size=(6, size)).astype(np.float32)
    scores = rng.normal(size=(6, size)).astype(np.float32)
    if ties:
        scores[1:] = rng.integers(-3, 4, size=(5, size))
    eager = _metric_value_and_gradient(metric)(tf.constant(labels), tf.constant(scores))
    xla = _compiled_metric(metric, any_length)(tf.constant(labels), tf.constant(scores))
    for a, b in zip(eager, xla):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6)
    assert np.abs(eager[1].numpy()).sum() > 0


@pytest.mark.parametrize("metric", ["ndcg", "ap", "nerr", "precision"])
@pytest.mark.parametrize("size", [33, 45])  # under XLA: padded to 64, two blocks of 32
@pytest.mark.parametrize("ties", [True, False])
def test_xla_pads_lists_to_whole_blocks_with_the_same_values_and_gradients(metric, size, ties):
    assert list_programs.bucket_size(size) == 64
    assert_xla_equals_eager(metric, size, ties, seed=12)


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("size", [20, 45, 150])
@pytest.mark.parametrize("metric", ["ndcg", "ap"])
def test_xla_with_an_unknown_list_length_gives_the_same_values_and_gradients(metric, size, ties):
    # A program traced for lists of any length (Keras's fit on batches padded to
    # their longest list): XLA compiles each length as its own program, in which
    # lists are padded to whole blocks and counted (or sorted) as at a static length.
    assert_xla_equals_eager(metric, size, ties, seed=size, any_length=True)


@pytest.mark.parametrize("keys", [False, True])
@pytest.mark.parametrize("size", [100, 700])
def test_exact_ranks_under_xla_with_an_unknown_list_length_equal_sorting(size, keys):
    # Counted up to COUNTING_MAX_LIST_SIZE documents, sorted beyond: a conditional
    # on the length, a constant of each program XLA compiles.
    rng = np.random.default_rng(size)
    scores = tf.constant(rng.integers(-5, 6, size=(4, size)), tf.float32)  # many ties
    mask = tf.constant(rng.random((4, size)) < 0.9)
    tie_keys = sorting.random_tie_keys([4, size], tf.constant([5, 6])) if keys else None
    compiled = tf.function(lambda s, m: sorting.exact_ranks(s, m, tie_keys), jit_compile=True,
                           input_signature=[tf.TensorSpec([None, None], tf.float32),
                                            tf.TensorSpec([None, None], tf.bool)])
    counted, expected = compiled(scores, mask).numpy(), sorting.exact_ranks(scores, mask, tie_keys)
    # Valid documents as sorted; padded ones after them (the keyed count orders
    # them by key, the sort by index: no metric reads their positions).
    np.testing.assert_array_equal(counted[mask.numpy()], expected.numpy()[mask.numpy()])
    for row in counted:
        np.testing.assert_array_equal(np.sort(row), np.arange(1, size + 1))


@pytest.mark.parametrize("size", [33, 45, 70])
def test_keyed_count_gives_the_padding_added_for_a_bucket_distinct_positions(size):
    # The padding added for a bucket gets the keys -2, -3, ...: the count
    # puts it after each list's own documents (padded ones too), in index order.
    padded = list_programs.bucket_size(size)
    rng = np.random.default_rng(4)
    scores = np.zeros((5, padded), np.float32)
    scores[:, :size] = rng.integers(-2, 3, size=(5, size))  # ties: the keyed count
    mask = np.zeros((5, padded), bool)
    mask[:, :size] = rng.random((5, size)) < 0.8

    @tf.function(jit_compile=True)
    def positions(scores, mask):
        return sorting.exact_ranks(scores, mask, sorting.tie_key_draw(scores, tf.constant([3, 4]),
                                                                    size))

    counted = positions(tf.constant(scores), tf.constant(mask)).numpy()
    for row in counted:
        np.testing.assert_array_equal(np.sort(row), np.arange(1, padded + 1))
    added = np.arange(size + 1, padded + 1)  # the added padding, in index order
    np.testing.assert_array_equal(counted[:, size:], np.broadcast_to(added, (5, padded - size)))
    for b in range(5):  # the valid documents first, by score
        valid = counted[b][mask[b]]
        assert valid.max() == mask[b].sum()
        assert (np.diff(scores[b][mask[b]][np.argsort(valid)]) <= 0).all()


@pytest.mark.parametrize("accelerator", [False, True])
def test_inverse_permutations_on_cpu_and_accelerator_paths(accelerator, monkeypatch):
    # invert_permutation on CPU, scatter_nd where a GPU/TPU is visible: same result.
    monkeypatch.setattr(sorting, "_accelerator_visible", lambda: accelerator)
    rng = np.random.default_rng(7)
    order = np.stack([rng.permutation(50) for _ in range(8)]).astype(np.int32)
    positions = sorting.inverse_order(tf.constant(order)).numpy()
    expected = np.empty_like(order)
    for b in range(len(order)):
        expected[b, order[b]] = np.arange(1, 51)
    np.testing.assert_array_equal(positions, expected)
    np.testing.assert_array_equal(sorting.order_from_positions(tf.constant(positions)).numpy(),
                                  order)


@pytest.mark.parametrize("gradient", GRADIENTS)
@pytest.mark.parametrize("scale", [1e10, 1e30, 1.5e38])
@pytest.mark.parametrize("xla", [False, True])
def test_padding_stays_below_huge_tied_lowest_scores(gradient, scale, xla):
    """The backward pass puts padded documents (and the filler columns of the last
    block) below the lowest valid score; a fixed gap of 1e3 rounds away next to
    1e10 and beyond, which tied them with the lowest documents and added
    alpha_b / 4 per padded column to their derivative. Eq. 17-18 exactly."""
    labels = np.array([[0, 1, 0, 2, 1, -1, -1], [2, 1, 0, 0, 1, 0, 3]], np.float32)
    s = scale
    scores = np.array([[-s, -s, s, s, 0.5, 0, 0], [-s, -s, -s, s, s, 0.5, 0]], np.float32)
    upstream = np.array([[1.0, -2.0, 0.5, 3.0, 1.5, 7.0, 7.0], [0.3, 1.0, -1.0, 2.0, 0.5, 1.0, 2.0]],
                        np.float32)

    def grads(s):
        with tf.GradientTape() as tape:
            tape.watch(s)
            ranks = ops.twin_sigmoid_ranks(s, tf.constant(labels), gradient=gradient, seed=0)
            objective = tf.reduce_sum(upstream * ranks)
        return tape.gradient(objective, s)

    got = tf.function(grads, jit_compile=xla)(tf.constant(scores)).numpy()
    for b in range(2):
        v = labels[b] >= 0
        with np.errstate(over="ignore"):
            jac = oracles.rank_jacobian(labels[b][v].astype(np.float64),
                                        scores[b][v].astype(np.float64), 1.0, gradient)
        np.testing.assert_allclose(got[b][v], upstream[b][v] @ jac, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(got[b][~v], 0.0)
