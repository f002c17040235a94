"""Plackett-Luce sampling and the policy-gradient losses (ExptUtility, MDPRank) in
``keras.ops``, against the float64 NumPy oracles of the paper
(:mod:`support.oracles_pl`, :mod:`support.oracles_policy_gradient`: log-probabilities
and their gradients, sampled metrics and rewards, the REINFORCE surrogates on the very
rankings the bodies sample), exact enumeration (sampling frequencies, mean gradients)
and the seeding contract of the Keras classes on JAX and PyTorch: reproducible from one
seed, fresh at every step, eagerly, under ``jax.jit`` and inside ``model.fit``."""
import itertools

import numpy as np
import pytest
import scipy.stats

import keras
from keras import ops

import harness
from support import oracles_policy_gradient as oracle
from support.oracles_pl import expected_ndcg_gradient, pl_log_prob, softmax
import tfr_extensions as tfrx
from tfr_extensions import arrays
from tfr_extensions.ops import plackett_luce as kpl
from tfr_extensions.keras_ops import random as keras_random
from tfr_extensions.losses import policy_gradient as kpg

BACKEND = harness.BACKEND
# Level of each statistical test: deterministic for fixed seeds; a correct sampler
# fails one with probability ALPHA per seed.
ALPHA = 1e-3


def _close(actual, expected, what="", atol=1e-6):
    harness.assert_close(actual, expected, rtol=2e-5, atol=atol, what=what)


def _value_and_grad(fn, *args):
    """``harness.value_and_grad``; on JAX of ``jax.jit(fn)`` (one compilation,
    where eager JAX compiles every operation of a new shape on its own)."""
    return harness.value_and_grad(harness.jit(fn), *args)


def _case_sets():
    """``(name, labels, scores)``: the short shared cases as one batch padded to 9
    documents (label -1: one compiled program for all of them), then the long lists
    (not on JAX, where XLA compiles each new program for seconds on a CPU; the
    long-list paths are tested there by
    ``test_long_rankings_use_the_linear_memory_paths``)."""
    sets = [("short", *harness.merged_cases(harness.SHORT_CASES))]
    return sets if BACKEND == "jax" else sets + [("long", *harness.CASES["long"])]


def _screened(labels, scores):
    """What the decorator hands a body: (labels, scores, valid) as NumPy."""
    valid = labels >= 0
    finite = np.isfinite(scores)
    return (np.where(valid, np.minimum(labels, 31.0), 0.0).astype(labels.dtype),
            np.where(finite, scores, 0.0).astype(scores.dtype), valid)


def _rankings(valid, num_samples, topn=None, seed=0):
    """int32 ``[B, S, n]``: uniformly random orders of each list's valid documents,
    its padded documents after them (as the samplers place them)."""
    rng = np.random.default_rng(seed)
    size = valid.shape[1] if topn is None else min(topn, valid.shape[1])
    out = np.zeros(valid.shape[:1] + (num_samples, size), np.int32)
    for b, keep in enumerate(valid):
        for k in range(num_samples):
            order = np.concatenate([rng.permutation(np.flatnonzero(keep)),
                                    np.flatnonzero(~keep)])
            out[b, k] = order[:size]
    return out


#: the log-probability settings: (topn, temperature, weight); None topn: the
#: per-position terms of the first sample at that temperature
LOG_PROB_PARTS = [("all", None, 1.0, 1.0), ("all", 3, 2.0, 0.7), ("positions", None, 0.5, 1.3)]


def _log_probs(rankings, scores, valid):
    """Every log-probability function, in several settings, as one flat vector
    (the weights keep errors of the parts from cancelling in its gradient)."""
    parts = []
    for kind, topn, temperature, weight in LOG_PROB_PARTS:
        if kind == "all":
            part = kpl.plackett_luce_log_prob(scores, rankings, valid, topn=topn,
                                              temperature=temperature)
        else:
            part = kpl.plackett_luce_position_log_probs(scores, rankings[:, 0, :], valid,
                                                        temperature=temperature)
        parts.append(ops.reshape(part, (-1,)) * weight)
    return ops.concatenate(parts, axis=0)


def _oracle_log_probs(rankings, scores, valid):
    """:func:`_log_probs` and the gradient of its sum, from the oracle."""
    parts, grad = [], np.zeros(scores.shape)
    for kind, topn, temperature, weight in LOG_PROB_PARTS:
        samples = rankings[:, :1] if kind == "positions" else rankings
        values = []
        for b in range(len(scores)):
            rows = []
            for ranking in samples[b]:
                terms, term_grads = oracle.position_log_probs(scores[b], ranking[:topn],
                                                              valid[b], temperature)
                rows.append(terms if kind == "positions" else terms.sum())
                grad[b] += weight * term_grads.sum(axis=0)
            values.append(rows[0] if kind == "positions" else rows)
        parts.append(np.ravel(values) * weight)
    return np.concatenate(parts), grad


def test_the_oracles_position_terms_sum_to_eq_12():
    """The per-position oracle sums to :func:`support.oracles_pl.pl_log_prob` (Eq. 12),
    and its gradient is the derivative of that sum (central differences)."""
    scores = np.array([0.3, -1.2, 2.0, 0.0, 0.7])
    valid = np.array([True, True, False, True, True])
    for ranking, temperature in (([4, 0, 3, 1, 2], 1.0), ([3, 1], 0.6)):
        terms, grads = oracle.position_log_probs(scores, ranking, valid, temperature)
        assert terms.sum() == pytest.approx(pl_log_prob(scores, ranking, valid, temperature))
        numeric = [(pl_log_prob(scores + 1e-6 * e, ranking, valid, temperature)
                    - pl_log_prob(scores - 1e-6 * e, ranking, valid, temperature)) / 2e-6
                   for e in np.eye(5)]
        np.testing.assert_allclose(grads.sum(axis=0), numeric, atol=1e-8)


def test_log_probs_equal_the_oracle_values_and_gradients():
    """Full and top-n rankings, temperatures, [B, n] rankings, per-position terms."""
    for name, labels, scores in _case_sets() + [("list_size_1", *harness.CASES["list_size_1"])]:
        _, scores, valid = _screened(labels, scores)
        rankings = _rankings(valid, num_samples=3, seed=1)
        got = _value_and_grad(lambda r, s: _log_probs(r, s, valid), rankings, scores)
        want = _oracle_log_probs(rankings, scores, valid)
        _close(got[0], want[0], name)
        _close(got[1], want[1], f"{name} gradient")
        np.testing.assert_array_equal(harness.to_numpy(kpl.ranking_mask(rankings, valid)),
                                      np.take_along_axis(valid[:, None, :], rankings, axis=2))


def test_long_rankings_use_the_linear_memory_paths(monkeypatch):
    """The reverse cumulative log-sum-exp and the scatter of left-out documents."""
    monkeypatch.setattr(kpl, "_PAIRWISE_MAX_POSITIONS", 2)
    monkeypatch.setattr(kpl, "_ONE_HOT_MAX_POSITIONS", 2)
    labels, scores = harness.CASES["long"]
    _, scores, valid = _screened(labels, scores)
    rankings = _rankings(valid, 2, topn=5, seed=4)
    got = _value_and_grad(lambda r, s: kpl.plackett_luce_log_prob(s, r, valid), rankings, scores)
    want, want_grad = np.zeros(rankings.shape[:2]), np.zeros(scores.shape)
    for b in range(len(scores)):
        for k, ranking in enumerate(rankings[b]):
            terms, term_grads = oracle.position_log_probs(scores[b], ranking, valid[b])
            want[b, k] = terms.sum()
            want_grad[b] += term_grads.sum(axis=0)
    _close(got[0], want)
    _close(got[1], want_grad)


@pytest.mark.parametrize("scale", [1.0, 1e30])
def test_documents_tied_at_any_magnitude_share_their_probability_exactly(scale):
    scores = np.full((1, 3), scale, np.float32)
    rankings = np.array([[0, 1, 2]], np.int32)
    terms = harness.to_numpy(kpl.plackett_luce_position_log_probs(scores, rankings))
    np.testing.assert_allclose(terms, [[-np.log(3.0), -np.log(2.0), 0.0]], rtol=1e-6)
    _, grad = _value_and_grad(lambda r, s: kpl.plackett_luce_log_prob(s, r), rankings,
                                     np.array([[1e30, -1e30, 0.0]], np.float32))
    assert np.isfinite(grad).all()


def test_sampled_permutations_follow_plackett_luce_exactly():
    """All 6 orders of 3 valid documents (one padded document among them, last in
    every sample): frequencies against Eq. 12 by a chi-square test."""
    scores = np.array([[0.8, 5.0, -0.4, 0.1]], np.float32)
    valid = np.array([[True, False, True, True]])
    num_samples = 12000
    rankings = harness.to_numpy(kpl.sample_rankings(scores, valid, num_samples, seed=3))[0]
    assert (rankings[:, -1] == 1).all()  # the padded document
    orders = list(itertools.permutations([0, 2, 3]))
    index = {order: i for i, order in enumerate(orders)}
    counts = np.bincount([index[tuple(r[:3])] for r in rankings], minlength=6)
    expected = np.array([np.exp(pl_log_prob(scores[0], o, valid[0])) for o in orders])
    assert abs(expected.sum() - 1.0) < 1e-9
    _, p_value = scipy.stats.chisquare(counts, expected * num_samples)
    assert p_value > ALPHA, (counts, expected * num_samples)


def test_first_position_frequencies_at_a_temperature_match_softmax():
    scores = np.array([[0.5, -0.3, 1.2, 0.0, -1.0]], np.float32)
    rankings = harness.to_numpy(kpl.sample_rankings(scores, num_samples=10000, seed=5,
                                                    temperature=2.0, topn=1))
    assert rankings.shape == (1, 10000, 1)
    counts = np.bincount(rankings[0, :, 0], minlength=5)
    _, p_value = scipy.stats.chisquare(counts, softmax(scores[0], 2.0) * 10000)
    assert p_value > ALPHA, counts


def test_samples_are_rankings_with_padding_last_and_seeds_reproduce():
    valid = np.array([[True, False, True, False, True, True], [True] * 6, [False] * 6])
    scores = np.array([[0.0, 50.0, 1.0, 100.0, -2.0, 0.5], [5.0] * 6, [1.0] * 6], np.float32)
    for topn in (None, 3):
        rankings = harness.to_numpy(kpl.sample_rankings(scores, valid, 7, seed=[1, 2], topn=topn))
        size = 6 if topn is None else min(topn, 6)
        assert rankings.shape == (3, 7, size) and rankings.dtype == np.int32
        for b in range(3):
            for ranking in rankings[b]:
                assert len(set(ranking.tolist())) == size
                placed = valid[b][ranking]
                assert (placed == (np.arange(size) < valid[b].sum())).all()  # padding last
        again = harness.to_numpy(kpl.sample_rankings(scores, valid, 7, seed=[1, 2], topn=topn))
        assert (again == rankings).all()
    other = harness.to_numpy(kpl.sample_rankings(scores, valid, 7, seed=[1, 3]))
    assert not (other[1] == harness.to_numpy(kpl.sample_rankings(scores, valid, 7,
                                                                 seed=[1, 2]))[1]).all()
    noise = harness.to_numpy(kpl.uniform_noise((4000,), 9))
    assert noise.min() > 0.0 and noise.max() < 1.0
    with pytest.raises(ValueError, match="num_samples"):
        kpl.sample_rankings(scores, num_samples=0)
    with pytest.raises(ValueError, match="temperature"):
        kpl.sample_rankings(scores, temperature=0.0)


def test_sampled_metrics_and_rewards_equal_the_oracle_on_the_same_rankings():
    metrics = ("ndcg", "precision", "ap", "ap_min", "nerr")
    for (name, labels, scores), topn in zip(_case_sets(), (3, None)):  # (long: full rankings)
        labels, scores, valid = _screened(labels, scores)
        rankings = _rankings(valid, num_samples=4, topn=topn, seed=2)

        def everything(y, r, v):
            return ([kpg.sampled_metric(m, y, r, v) for m in metrics]
                    + [kpg.sampled_dcg_rewards(y, r, mask=v, normalize=n) for n in (True, False)])

        got = [harness.to_numpy(x) for x in harness.jit(everything)(labels, rankings, valid)]
        for what, value in zip(metrics, got):
            want = [[oracle.sampled_metric(what, labels[b], r, valid[b]) for r in rankings[b]]
                    for b in range(len(labels))]
            _close(value, want, f"{name} {topn} {what}")
        for normalize, value in zip((True, False), got[len(metrics):]):
            want = [[oracle.dcg_rewards(labels[b], r, valid[b], normalize) for r in rankings[b]]
                    for b in range(len(labels))]
            _close(value, want, f"{name} {topn} rewards normalize={normalize}")


BODY_OPTIONS = {
    "expected_utility": [dict(topn=3, num_samples=3, metric="ndcg"),
                         dict(topn=None, num_samples=2, metric="ap", temperature=2.0),
                         dict(topn=2, num_samples=4, metric="nerr", baseline=True),
                         dict(topn=4, num_samples=2, metric="precision")],
    "mdprank": [dict(topn=3, num_samples=3, gamma=0.8),
                dict(topn=None, num_samples=2, normalize=False, temperature=0.5)],
}


def _body_outputs(function, option_sets, labels, scores):
    """For each option set: ``(losses * weights [B], its gradient, the rankings the
    body samples)`` of the keras.ops body through the decorator, with
    ``options["seed"]`` (on JAX, all from one compiled program)."""
    _, screened, valid = _screened(labels, scores)

    def sample(s, v, options):  # (the keras.ops filling's stream, as the body draws it)
        with arrays.use(harness.KERAS_OPS):
            return kpl.sample_rankings(s, v, options["num_samples"], seed=options["seed"],
                                       temperature=options["temperature"], topn=options["topn"])

    def outputs(y, s, options):
        return harness.per_list_loss(function.spec, options)(y, s)

    if BACKEND != "jax":
        return [harness.value_and_grad(lambda y, s, o=o: outputs(y, s, o), labels, scores)
                + (harness.to_numpy(sample(screened, valid, o)),) for o in option_sets]
    import jax  # pylint: disable=import-outside-toplevel

    def run(y, s, screened_scores, v):
        results = []
        for options in option_sets:
            (_, value), grad = jax.value_and_grad(
                lambda x, o=options: (ops.sum(outputs(y, x, o)), outputs(y, x, o)),
                has_aux=True)(s)
            results.append((value, grad, sample(screened_scores, v, options)))
        return results
    return [tuple(harness.to_numpy(t) for t in result)
            for result in jax.jit(run)(labels, scores, screened, valid)]


def _oracle_body(key, options, labels, scores, rankings):
    """``(loss * weight, gradient)`` per list from the oracle, on the body's rankings;
    NaN and zero gradient for broken lists."""
    screened_labels, screened_scores, valid = _screened(labels, scores)
    broken = harness.broken_lists(labels, scores)
    values, grads = np.zeros(len(labels)), np.zeros(labels.shape)
    for b in range(len(labels)):
        if broken[b]:
            values[b] = np.nan
            continue
        if not (screened_labels[b] > 0).any():
            continue  # weight 0
        args = (screened_labels[b], screened_scores[b], rankings[b], valid[b])
        if key == "expected_utility":
            values[b], grads[b] = oracle.expected_utility(
                *args, options["metric"], options["temperature"], options["baseline"])
        else:
            values[b], grads[b] = oracle.mdprank(*args, options["gamma"], options["temperature"],
                                                 options["normalize"])
    return values, grads


@pytest.mark.parametrize("key", sorted(BODY_OPTIONS))
def test_bodies_equal_the_oracle_on_the_rankings_they_sample(key):
    """Through the shared decorator (bad-input policy included): the keras.ops body
    with ``seed=5`` against the oracle's surrogate on the rankings the body samples
    (the sampler with the same seed): losses, weights and gradients, on every shared
    case."""
    function = getattr(tfrx.losses, f"{key}_loss")
    option_sets = [function.spec.check_options(seed=5, **options) for options in BODY_OPTIONS[key]]
    if BACKEND == "jax":  # fewer option sets: XLA compiles each for seconds on a CPU
        option_sets = option_sets[:2]
    for name, labels, scores in _case_sets():
        results = _body_outputs(function, option_sets, labels, scores)
        for options, (value, grad, rankings) in zip(option_sets, results):
            want, want_grad = _oracle_body(key, options, labels, scores, rankings)
            what = f"{key} {options} {name}"
            _close(value, want, what)
            # (a one-document list's gradient is 0; the body may leave a rounding
            # residue of ~1e-7 times the reward there, as TensorFlow's ops do)
            _close(grad, want_grad, what + " gradient", atol=5e-6)
            harness.assert_policy(value, grad, labels, scores)


@pytest.mark.parametrize("shape", [(0, 5), (3, 0), (0, 0)])
def test_empty_batches_and_lists_give_zero_losses_and_zero_size_gradients(shape):
    """The bad-input policy's empty inputs, for every sampled-metric path."""
    losses = [tfrx.losses.ExpectedUtilityLoss(seed=0), tfrx.losses.MDPRankLoss(seed=0),
              tfrx.losses.ExpectedUtilityLoss(metric="nerr", seed=0, topn=2)]
    labels = np.zeros(shape, np.float32)
    value, grad = _value_and_grad(lambda y, s: ops.stack([loss(y, s) for loss in losses]),
                                  labels, labels)
    assert (value == 0).all() and grad.shape == shape and (grad == 0).all()


LABELS = [2.0, 0.0, 1.0, 0.0]
SCORES = [0.2, 0.5, -0.3, 0.1]


@pytest.mark.parametrize("kind, topn", [("expected_utility", 4), ("expected_utility_baseline", 2),
                                        ("mdprank", 4), ("mdprank", 2)])
def test_mean_gradient_converges_to_the_exact_gradient_of_expected_ndcg(kind, topn):
    """The exact gradient of E[nDCG@topn] enumerates all 24 permutations (12 ordered
    top-2 prefixes); the estimate averaged over 8 calls of 3000 samples each (fresh
    draws at every call of one seeded loss) matches it within 5 standard errors."""
    exact = expected_ndcg_gradient(SCORES, LABELS, topn)
    options = dict(topn=topn, num_samples=3000, seed=7)
    if kind == "expected_utility_baseline":
        loss = tfrx.losses.ExpectedUtilityLoss(baseline=True, **options)
    else:
        loss = tfrx.losses.get(kind, **options)
    labels, scores = np.array([LABELS], np.float32), np.array([SCORES], np.float32)
    if BACKEND == "jax":  # one compiled step; each run draws the next seed (host path)
        import jax  # pylint: disable=import-outside-toplevel
        step = jax.jit(jax.grad(lambda s: loss(labels, s)))
        gradient = lambda s: harness.to_numpy(step(s))  # noqa: E731
    else:
        gradient = lambda s: harness.value_and_grad(loss, labels, s)[1]  # noqa: E731
    estimates = np.stack([-gradient(scores)[0] for _ in range(8)])
    assert len({tuple(e) for e in estimates}) == len(estimates)  # fresh samples at every call
    mean = estimates.mean(axis=0)
    stderr = estimates.std(axis=0, ddof=1) / np.sqrt(len(estimates))
    assert np.all(np.abs(mean - exact) <= 5 * stderr + 2e-3), (mean, exact, stderr)
    assert np.abs(exact).max() > 0.01


# The sampling options of every eager call of a loss class below (with the
# "mixed" case): eager JAX compiles each operation for each new shape once.
SHAPE_OPTIONS = dict(topn=3, num_samples=2)


@pytest.mark.parametrize("key", ["expected_utility", "mdprank"])
def test_registry_losses_compute_and_a_seed_reproduces_the_sequence_of_draws(key):
    labels, scores = harness.CASES["mixed"]  # (one shape and SHAPE_OPTIONS for all eager calls)
    loss = tfrx.losses.get(key, seed=0, **SHAPE_OPTIONS)
    first, second = (float(harness.to_numpy(loss(labels, scores))) for _ in range(2))
    assert np.isfinite([first, second]).all() and first != second  # fresh draws
    again = tfrx.losses.get(key, seed=0, **SHAPE_OPTIONS)
    assert [float(harness.to_numpy(again(labels, scores))) for _ in range(2)] == [first, second]
    other = tfrx.losses.get(key, seed=1, **SHAPE_OPTIONS)
    assert float(harness.to_numpy(other(labels, scores))) != first
    unseeded = tfrx.losses.get(key, **SHAPE_OPTIONS)
    assert np.isfinite(harness.to_numpy(unseeded(labels, scores)))
    assert 0.0 < float(loss.sampled_metric) <= 1.0


@pytest.mark.skipif(BACKEND != "jax", reason="jax.jit")
def test_jax_jit_draws_fresh_seeds_that_continue_the_eager_stream():
    import jax  # pylint: disable=import-outside-toplevel
    labels, scores = harness.CASES["mixed"]
    traced = tfrx.losses.ExpectedUtilityLoss(seed=3, **SHAPE_OPTIONS)
    step = jax.jit(jax.value_and_grad(lambda s: traced(labels, s)))
    values = [float(step(scores)[0]), float(step(scores)[0]), float(traced(labels, scores))]
    eager = tfrx.losses.ExpectedUtilityLoss(seed=3, **SHAPE_OPTIONS)
    expected = [float(eager(labels, scores)) for _ in range(3)]
    np.testing.assert_allclose(values, expected, rtol=1e-5)
    assert len(set(expected)) == 3
    generator = traced._seed_generator  # pylint: disable=protected-access
    start = keras_random.as_int(3)
    assert harness.to_numpy(generator.state).tolist() == [start, 3]
    # A state assigned between compiled steps (weights loaded) is where they go on.
    generator.state.assign(np.array([start, 1], np.uint32))
    assert float(step(scores)[0]) == pytest.approx(expected[1], rel=1e-5)
    assert harness.to_numpy(generator.state).tolist()[1] == 2
    unseeded = jax.jit(lambda s: tfrx.losses.MDPRankLoss(**SHAPE_OPTIONS)(labels, s))
    assert float(unseeded(scores)) != float(unseeded(scores))  # fresh draws: seed=None


def _fit_history(seed):
    """A tiny model trained with learning rate 0 on one batch: its loss changes
    from step to step only through the sampled rankings."""
    labels = harness.CASES["mixed"][0]
    features = np.random.default_rng(0).normal(size=labels.shape + (3,)).astype(np.float32)
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input(features.shape[1:]), keras.layers.Dense(1),
                              keras.layers.Flatten()])
    loss = tfrx.losses.ExpectedUtilityLoss(seed=seed, **SHAPE_OPTIONS)
    model.compile(keras.optimizers.SGD(0.0), loss=loss,
                  metrics=[tfrx.losses.SampledRankingMetric(loss)])
    history = model.fit(features, labels, batch_size=len(labels), epochs=3, shuffle=False,
                        verbose=0)
    return history.history, model, loss, (features, labels)


@pytest.mark.skipif(BACKEND == "tensorflow", reason="the TF classes seed by a step counter "
                    "(tests/losses/test_policy_gradient.py)")
def test_fit_draws_fresh_samples_at_every_step_and_one_seed_reproduces_the_run(tmp_path):
    history, model, loss, (features, labels) = _fit_history(seed=4)
    assert len(set(history["loss"])) == 3, history  # fresh rankings at every step
    assert all(0.0 < v <= 1.0 for v in history["sampled_ndcg_3"])
    # A fresh run with the same seed. (On JAX, that the host path of jitted steps
    # draws the eager stream is tested by test_jax_jit_draws_fresh_seeds_...; a
    # first eager fit there costs more compilation than two jitted ones.)
    assert _fit_history(seed=4)[0] == history
    state = harness.to_numpy(loss._seed_generator.state)  # pylint: disable=protected-access
    assert state[1] == 3  # one seed per step
    # The generator's state travels with the saved model.
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    loaded_state = loaded.loss._seed_generator.state  # pylint: disable=protected-access
    assert (harness.to_numpy(loaded_state) == state).all()
    scores = model(features)
    assert float(harness.to_numpy(loaded.loss(labels, scores))) == float(
        harness.to_numpy(loss(labels, scores)))
