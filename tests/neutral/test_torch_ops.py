"""The PyTorch-native bodies (:mod:`tfr_extensions.torch_ops`) on Keras's PyTorch backend.

Against the ``keras.ops`` bodies, values and gradients on lists with padding, ties in
scores and labels, lists of no document and lists without a relevant document, in
float32 and float64; one ``torch.compile`` graph per loss (``torch._dynamo.explain``)
and compiled = eager; the row blocks of a CPU; the tie keys. The NumPy oracles of
every loss run on these bodies in ``tests/neutral/test_neutral_losses.py`` (the spec
picks them on this backend).
"""
import numpy as np
import pytest

from tfr_extensions import backend

if backend.backend_name() != "torch":
    pytest.skip("the PyTorch-native bodies run on Keras's PyTorch backend",
                allow_module_level=True)

import torch  # noqa: E402

import tfr_extensions as tfrx  # noqa: E402
from tfr_extensions.losses import base  # noqa: E402
from tfr_extensions.ops import vocabulary  # noqa: E402
from tfr_extensions.torch_ops import pairs  # noqa: E402
from tfr_extensions.torch_ops import rank_metrics  # noqa: E402
from tfr_extensions.torch_ops import twin_sigmoid  # noqa: E402
from support import oracles  # noqa: E402

TWIN_CASES = [("twin_sigmoid", dict(metric=metric, gradient=gradient, topn=topn, alpha_b=1.5,
                                    seed=3))
              for metric in vocabulary.PAPER_METRICS for gradient in ("type1", "type2", "type3")
              for topn in (None, 3)]
CASES = TWIN_CASES + [
    ("twin_sigmoid", dict(metric="ndcg", gradient="type3", tie_break=False)),
    ("approx_ndcg", {}), ("approx_ndcg", dict(temperature=1.3)),
    ("ranknet", {}), ("ranknet", dict(sigma=1.7)),
]

#: LambdaLoss's options for the PyTorch body's tests
LAMBDA_LOSS_CASES = [{}, dict(weighting="ranknet"), dict(weighting="ndcg_loss1", topn=3),
                     dict(weighting="lambdarank", sigma=1.7), dict(weighting="ndcg_loss2", mu=3.0,
                                                                   sigma=0.5, topn=5)]
#: NeuralNDCG's options for the PyTorch body's tests
NEURAL_NDCG_CASES = [{}, dict(temperature=0.3, topn=3, transposed=True, sinkhorn_tolerance=1e-3),
                     dict(temperature=2.0, sinkhorn_iterations=7, sinkhorn_tolerance=0.0)]


def batch(size, lists, dtype, seed=0, tied_scores=True):
    """Graded labels with padding, one list of padding only, one without a relevant
    document, tied scores (and labels) in another (unless not ``tied_scores``)."""
    rng = np.random.default_rng(seed)
    labels = rng.choice(5, size=(lists, size), p=[0.5, 0.3, 0.13, 0.05, 0.02]).astype(float)
    labels[rng.random((lists, size)) < 0.15] = -1.0
    scores = rng.normal(size=(lists, size)) * 3.0
    labels[0] = -1.0
    labels[1] = np.where(labels[1] >= 0, 0.0, -1.0)
    if size > 2:
        labels[2, 1] = labels[2, 0]
        if tied_scores:
            scores[2, :3] = scores[2, 0]
    return torch.tensor(labels, dtype=dtype), torch.tensor(scores, dtype=dtype)


def value_and_gradient(spec, which, labels, scores, options):
    scores = scores.clone().requires_grad_(True)
    losses, weights, _ = spec.compute(labels, scores, None, spec.check_options(**options), which)
    factors = torch.arange(1, len(losses) + 1, dtype=losses.dtype)
    (torch.nan_to_num(losses) * weights * factors).sum().backward()
    return losses.detach().numpy(), weights.numpy(), scores.grad.numpy()


@pytest.mark.parametrize("key,options", CASES, ids=lambda c: str(c))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_the_torch_body_equals_the_keras_ops_body(key, options, dtype):
    spec = getattr(tfrx.losses, f"{key}_loss").spec
    assert spec.implementation_of() == base.TORCH
    # (float64: keras.ops' softplus, PyTorch's, is linear above 20, so the keras.ops
    # RankNet is off by up to e^-20 per pair; the torch body is exact to rounding)
    tolerance = dict(rtol=2e-5, atol=2e-6) if dtype == torch.float32 else dict(rtol=1e-8,
                                                                            atol=1e-10)
    # (tied scores: both bodies break ties by the keys of tfr_extensions.arrays.tie_keys)
    for size in (1, 13, 70):
        labels, scores = batch(size, 6, dtype, seed=size, tied_scores=True)
        ours = value_and_gradient(spec, base.TORCH, labels, scores, options)
        theirs = value_and_gradient(spec, base.KERAS_OPS, labels, scores, options)
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a, b, **tolerance)


def test_ranknet_in_float64_is_exact_to_rounding():
    """PyTorch's softplus is linear above 20; float64 needs 40 (the body's threshold).
    The oracle: Eq. 4 as :math:`(1 - \\bar P) o + \\log(1 + e^{-o})`, in float64."""
    labels, scores = batch(40, 5, torch.float64, seed=4)
    scores = scores * 10.0
    losses, _ = tfrx.losses.ranknet_loss(labels, scores)
    for y, s, loss in zip(labels.numpy()[2:], scores.numpy()[2:], losses.numpy()[2:]):
        y, s = y[y >= 0], s[y >= 0]
        i, j = np.triu_indices(len(y), k=1)
        o, target = s[i] - s[j], 0.5 * (1.0 + np.sign(y[i] - y[j]))
        np.testing.assert_allclose(loss, np.mean((1.0 - target) * o + np.logaddexp(0.0, -o)),
                                   rtol=1e-13)


@pytest.mark.parametrize("blocks", [1, 7])
def test_row_blocks_give_the_results_of_one_block(blocks, monkeypatch):
    """A CPU runs the pairs over blocks of rows; any block size gives the same results."""
    labels, scores = batch(50, 6, torch.float64, seed=9)
    cases = [(getattr(tfrx.losses, f"{key}_loss").spec, options)
             for key, options in CASES[:3] + CASES[-5:]]
    whole = [value_and_gradient(spec, base.TORCH, labels, scores, options)
             for spec, options in cases]
    monkeypatch.setattr(pairs, "CPU_BLOCK_PAIRS", blocks * 6 * 50)  # `blocks` rows per block
    assert len(pairs.row_blocks(scores)) == -(-50 // blocks)
    for (spec, options), expected in zip(cases, whole):
        for a, b in zip(value_and_gradient(spec, base.TORCH, labels, scores, options), expected):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("key,options", [CASES[2], CASES[-7], CASES[-5], CASES[-2]],
                         ids=lambda c: str(c))
def test_torch_compile_makes_one_graph_equal_to_eager(key, options, monkeypatch):
    """Also over several blocks of rows (4 here, the last one shorter)."""
    monkeypatch.setattr(pairs, "CPU_BLOCK_PAIRS", 7 * 5 * 24)
    spec = getattr(tfrx.losses, f"{key}_loss").spec
    checked = spec.check_options(**options)

    def mean_loss(labels, scores):
        losses, weights, _ = spec.compute(labels, scores, None, checked)
        return (losses * weights).mean()

    labels, scores = batch(24, 5, torch.float32, seed=1)
    assert len(pairs.row_blocks(scores)) == 4
    torch._dynamo.reset()  # pylint: disable=protected-access
    explained = torch._dynamo.explain(mean_loss)(labels, scores.clone().requires_grad_(True))  # pylint: disable=protected-access
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), \
        explained.break_reasons
    compiled = torch.compile(mean_loss, dynamic=False, backend="aot_eager")
    results = []
    for fn in (mean_loss, compiled):
        x = scores.clone().requires_grad_(True)
        value = fn(labels, x)
        value.backward()
        results.append((value.detach().numpy(), x.grad.numpy()))
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("options", NEURAL_NDCG_CASES, ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_neural_ndcg_with_the_torch_sinkhorn_equals_the_keras_ops_body(options, dtype):
    """NeuralNDCG's PyTorch body (the math once, the Sinkhorn loop of
    ``torch_ops.sinkhorn``) against its ``keras.ops`` body: the same per-list stopping
    (a tolerance of 1e-3 stops the lists at different iterations), padding anywhere,
    values and gradients."""
    spec = tfrx.losses.neural_ndcg_loss.spec
    assert spec.implementation_of() == base.TORCH
    tolerance = dict(rtol=2e-5, atol=2e-6) if dtype == torch.float32 else dict(rtol=1e-8,
                                                                            atol=1e-10)
    for size in (1, 13, 40):
        labels, scores = batch(size, 6, dtype, seed=size, tied_scores=True)
        ours = value_and_gradient(spec, base.TORCH, labels, scores, options)
        theirs = value_and_gradient(spec, base.KERAS_OPS, labels, scores, options)
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a, b, **tolerance)


@pytest.mark.parametrize("options", LAMBDA_LOSS_CASES, ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_lambda_loss_under_the_torch_screening_equals_the_keras_ops_body(options, dtype):
    """LambdaLoss's PyTorch body (its one math under the torch screening) against its
    ``keras.ops`` body, broken lists included: the same values and gradients, to the bit."""
    spec = tfrx.losses.lambda_loss.spec
    assert spec.implementation_of() == base.TORCH
    for size in (1, 13, 40):
        labels, scores = batch(size, 6, dtype, seed=size, tied_scores=True)
        ours = value_and_gradient(spec, base.TORCH, labels, scores, options)
        theirs = value_and_gradient(spec, base.KERAS_OPS, labels, scores, options)
        for a, b in zip(ours, theirs):
            np.testing.assert_array_equal(a, b)
    labels, scores = broken_batch(dtype)
    for a, b in zip(value_and_gradient(spec, base.TORCH, labels, scores, options),
                    value_and_gradient(spec, base.KERAS_OPS, labels, scores, options)):
        np.testing.assert_array_equal(a, b)


def test_the_torch_sinkhorn_stops_each_list_at_its_own_iteration():
    """A list is frozen after its first iteration within the tolerance; the others go
    on; padded rows and columns stay 0; the gradient is the ``keras.ops`` loop's."""
    from tfr_extensions.keras_ops import sinkhorn as keras_sinkhorn  # pylint: disable=import-outside-toplevel
    from tfr_extensions.torch_ops import sinkhorn  # pylint: disable=import-outside-toplevel
    rng = np.random.default_rng(0)
    matrix = torch.tensor(rng.uniform(0.1, 1.0, size=(3, 4, 4)), dtype=torch.float64)
    matrix[1] = 1.0  # doubly stochastic after one iteration
    matrix[2, 3, :] = matrix[2, :, 3] = 0.0  # one padded document
    valid = torch.ones((3, 4), dtype=torch.bool)
    valid[2, 3] = False
    leaf = matrix.clone().requires_grad_(True)
    scaled = sinkhorn.sinkhorn_scaling(leaf, valid, valid, 30, 1e-3)
    once = sinkhorn.sinkhorn_scaling(matrix, valid, valid, 1, 1e-3)
    torch.testing.assert_close(scaled[1], once[1])
    for b in (0, 2):
        rows, columns = scaled[b].sum(dim=1)[valid[b]], scaled[b].sum(dim=0)[valid[b]]
        assert float((rows - 1).abs().max()) < 1e-3 and float((columns - 1).abs().max()) < 1e-3
    assert float(scaled[2, 3].abs().sum() + scaled[2, :, 3].abs().sum()) == 0.0
    weights = torch.arange(48, dtype=torch.float64).reshape(3, 4, 4)
    (scaled * weights).sum().backward()
    generic = matrix.clone().requires_grad_(True)
    expected = keras_sinkhorn.sinkhorn_scaling(generic, valid, valid, 30, 1e-3)
    (expected * weights).sum().backward()
    torch.testing.assert_close(scaled, expected, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(leaf.grad, generic.grad, rtol=1e-10, atol=1e-12)
    assert float(leaf.grad[2, :, 3].abs().sum()) == 0.0  # a padded column
    assert torch.autograd.gradcheck(  # (finite differences: the lists without padding)
        lambda m: sinkhorn.sinkhorn_scaling(m, valid[:2], valid[:2], 5, 0.0),
        (matrix[:2].clone().requires_grad_(True),))


@pytest.mark.parametrize("name", ["lambda_loss", "neural_ndcg"])
def test_lambda_loss_and_neural_ndcg_compile_to_one_graph(name):
    """LambdaLoss (its ``keras.ops`` body) and NeuralNDCG (its PyTorch body, the Sinkhorn
    loop unrolled with every list's stopping kept) make one graph, equal to eager."""
    loss = tfrx.losses.get(name, **({"sinkhorn_iterations": 4} if name == "neural_ndcg" else {}))
    labels, scores = batch(9, 4, torch.float32, seed=2)
    torch._dynamo.reset()  # pylint: disable=protected-access
    explained = torch._dynamo.explain(loss)(labels, scores)  # pylint: disable=protected-access
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), \
        explained.break_reasons
    compiled = torch.compile(loss, dynamic=False, backend="aot_eager")
    np.testing.assert_allclose(compiled(labels, scores).numpy(), loss(labels, scores).numpy(),
                               rtol=1e-6)


def test_tie_keys_are_distinct_reproducible_and_seeded_by_ints_or_tensors():
    keys = twin_sigmoid.tie_keys((64, 33), 7, "cpu")
    assert all(len(set(row)) == 33 for row in keys.tolist())
    assert int(keys.min()) >= 0 and int(keys.max()) < 2**31
    assert torch.equal(keys, twin_sigmoid.tie_keys((64, 33), 7, "cpu"))
    assert not torch.equal(keys, twin_sigmoid.tie_keys((64, 33), 8, "cpu"))
    pair = twin_sigmoid.tie_keys((4, 9), (3, 5), "cpu")
    assert torch.equal(pair, twin_sigmoid.tie_keys((4, 9), torch.tensor([3, 5]), "cpu"))
    # a random order of ties: over 4000 lists of 3 tied documents each document leads
    # about a third of the time
    keys = twin_sigmoid.tie_keys((4000, 3), 11, "cpu")
    leads = np.bincount(keys.argmax(dim=-1).numpy(), minlength=3) / 4000.0
    np.testing.assert_allclose(leads, 1.0 / 3.0, atol=0.03)


@pytest.mark.parametrize("compiling", [False, True], ids=["row_blocks", "fused"])
def test_ranks_backward_sums_the_pairs_of_the_papers_derivatives(compiling, monkeypatch):
    """Eq. 17-18 with Eq. 11/20/21 against the dense NumPy Jacobian of the ranks, by the
    eager path (row blocks: 2 rows each here, the last one shorter) and by the one
    expression ``torch.compile`` fuses; padded documents (any finite score, label and
    delta) count for nothing and get 0."""
    rng = np.random.default_rng(5)
    labels = rng.integers(0, 3, (3, 9)).astype(np.float64)
    scores = rng.normal(size=(3, 9))
    delta = rng.normal(size=(3, 9))
    valid = np.ones((3, 9), bool)
    valid[1, 6:] = False
    monkeypatch.setattr(pairs, "CPU_BLOCK_PAIRS", 2 * 3 * 9)
    monkeypatch.setattr(pairs, "compiling", lambda: compiling)
    for gradient in ("type1", "type2", "type3"):
        padded = [np.where(valid, a, fill) for a, fill in ((delta, 7.0), (scores, -40.0),
                                                           (labels, 5.0))]
        grads = twin_sigmoid.ranks_backward(
            *(torch.tensor(a) for a in padded[:2]), torch.tensor(padded[2]),
            torch.tensor(valid), 1.3, gradient).numpy()
        expected = np.zeros((3, 9))
        for b in range(3):
            n = int(valid[b].sum())
            expected[b, :n] = delta[b, :n] @ oracles.rank_jacobian(labels[b, :n], scores[b, :n],
                                                                   1.3, gradient)
        np.testing.assert_allclose(grads, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("topn", [None, 1, 4, 20])
def test_ndcg_of_ranks_is_eq_15_and_its_derivative_eq_32(topn):
    """At fractional ranks (padding, a list without a relevant document): the value
    of Eq. 15 by NumPy, and the rank derivative by central differences."""
    rng = np.random.default_rng(7)
    labels = rng.integers(0, 4, (4, 9)).astype(np.float64)
    mask = rng.random((4, 9)) > 0.2
    labels[1] = 0.0
    labels = np.where(mask, labels, 0.0)
    ranks = rng.uniform(1.0, 9.0, (4, 9))
    positions = np.argsort(np.argsort(ranks, kind="stable"), kind="stable") + 1
    args = (torch.tensor(labels), None, torch.tensor(mask), topn, torch.tensor(positions))
    value, grad = rank_metrics.ndcg_value_and_rank_gradient(
        *args[:1], torch.tensor(ranks), *args[2:])

    def numpy_ndcg(r):
        gains = np.where(mask, 2.0 ** labels - 1.0, 0.0)
        within = mask & (positions <= (topn or 9))
        ideal = -np.sort(-gains, axis=-1)[:, :topn or 9]
        ideal_dcg = (ideal / np.log2(np.arange(2, ideal.shape[1] + 2))).sum(-1)
        dcg = np.where(within, gains / np.log2(1.0 + r), 0.0).sum(-1)
        return np.divide(dcg, ideal_dcg, out=np.zeros(4), where=ideal_dcg > 0)

    np.testing.assert_allclose(value.numpy(), numpy_ndcg(ranks), rtol=1e-12)
    assert value[1] == 0.0 and (grad[1] == 0.0).all()
    step = 1e-6
    for d in range(9):
        shift = np.zeros_like(ranks)
        shift[:, d] = step
        numeric = (numpy_ndcg(ranks + shift) - numpy_ndcg(ranks - shift)) / (2 * step)
        np.testing.assert_allclose(grad[:, d].numpy(), np.where(mask[:, d], numeric, 0.0),
                                   atol=1e-8)


def test_the_seeded_keras_class_compiles_to_one_graph_and_advances_its_seed():
    """The class's step seed (``keras_ops.random.SeedGenerator.next`` on PyTorch) adds no
    NumPy array, so a compiled step stays one graph; the seeds advance as Keras's do."""
    from tfr_extensions.keras_ops import random as keras_random  # pylint: disable=import-outside-toplevel
    generator = keras_random.seed_generator(5)
    first, second = (generator.next().tolist() for _ in range(2))
    assert second == [first[0], first[1] + 1]
    labels, scores = batch(16, 4, torch.float32, seed=2)
    loss = tfrx.losses.get("twin_ndcg_type3", seed=0)
    loss(labels, scores)
    torch._dynamo.reset()  # pylint: disable=protected-access
    explained = torch._dynamo.explain(loss)(labels, scores.clone().requires_grad_(True))  # pylint: disable=protected-access
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), \
        explained.break_reasons


def broken_batch(dtype):
    """:func:`batch` with broken lists: a NaN score, an infinite one, a label above the
    limit; a NaN label (padding) and an infinite score at padding (not broken)."""
    labels, scores = batch(9, 7, dtype, seed=5, tied_scores=False)  # (twin-sigmoid: one stream each)
    labels[3, 0], scores[3, 0] = 2.0, float("nan")
    labels[4, 1], scores[4, 1] = 1.0, float("inf")
    labels[5, 2] = 40.0
    labels[6, 3], labels[6, 4], scores[6, 4] = float("nan"), -1.0, float("-inf")
    return labels, scores


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_the_torch_screening_equals_the_keras_ops_screening(dtype):
    from tfr_extensions import arrays  # pylint: disable=import-outside-toplevel
    from tfr_extensions.ops import screening  # pylint: disable=import-outside-toplevel
    from tfr_extensions.torch_ops import screening as torch_screening  # pylint: disable=import-outside-toplevel
    labels, scores = broken_batch(dtype)
    mask = torch.ones_like(labels, dtype=torch.bool)
    mask[2, -1] = False
    with arrays.use("keras_ops"):
        for given in (None, mask):
            ours = torch_screening.screen_lists(labels, scores, 31.0, given)
            theirs = screening.screen_lists(labels, scores, 31.0, given)
            for a, b in zip(ours, theirs):
                assert a.dtype == b.dtype
                np.testing.assert_array_equal(a.numpy(), b.numpy())
        assert ours[3].tolist() == [False, False, False, True, True, True, False]
        np.testing.assert_array_equal(torch_screening.has_relevant(ours[0], ours[2]).numpy(),
                                      screening.has_relevant(ours[0], ours[2]).numpy())


@pytest.mark.parametrize("key,options", [CASES[2], CASES[-6], CASES[-3]], ids=str)
def test_broken_lists_get_nan_and_no_gradient_as_under_the_keras_ops_policy(key, options):
    spec = getattr(tfrx.losses, f"{key}_loss").spec
    labels, scores = broken_batch(torch.float64)
    losses, weights, grads = value_and_gradient(spec, base.TORCH, labels, scores, options)
    assert np.isnan(losses[3:6]).all() and np.isfinite(losses[[0, 1, 2, 6]]).all()
    assert (grads[3:6] == 0).all() and np.isfinite(grads).all()
    for a, b in zip((losses, weights, grads),
                    value_and_gradient(spec, base.KERAS_OPS, labels, scores, options)):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)
