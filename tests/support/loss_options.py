"""A non-default configuration of each registered loss: every option of its function
changed from its default (the registry suites' round trips and checks). Plain data: it
imports nothing, so every stack's suites share it."""

#: registry key -> every option of the loss's function, each changed from its default
NON_DEFAULT = {
    "twin_sigmoid": dict(metric="ap_min", topn=5, gradient="type2", alpha_b=1.3,
                         tie_break=False, seed=[3, 4]),
    "softndcg": dict(sigma=0.3, topn=5, discount_alpha=-0.2, method="normal",
                     sinkhorn_iterations=2),
    # (cost_type "ddg", "p1" and "p2" break label ties by index, so they are not
    # permutation-invariant with tied labels: test_wassrank checks them)
    "wassrank": dict(regularization=0.2, sinkhorn_iterations=7, cost_type="dg",
                     target="softmax", gain_base=2.0, non_rele_gap=5.0, var_penalty=0.1,
                     epsilon_scaling=False),
    "expected_utility": dict(metric="nerr", topn=3, num_samples=5, temperature=0.7,
                             baseline=True, seed=[3, 4]),
    "mdprank": dict(gamma=0.8, topn=3, num_samples=5, temperature=0.7, normalize=False,
                    seed=[3, 4]),
    "ranknet": dict(sigma=2.0),
    "ndcg_beta_hinge": dict(margin=0.5, squared=True),
    "approx_ndcg": dict(temperature=0.5),
    "listnet": dict(temperature=0.5),
    "lambda": dict(weighting="ndcg_loss1", sigma=1.5, mu=5.0, topn=3),
    "neural_ndcg": dict(temperature=0.5, topn=3, transposed=True, sinkhorn_iterations=7,
                        sinkhorn_tolerance=1e-3),
}
