"""Twin-sigmoid direct metric optimization for gradient-boosted trees (LightGBM).

:func:`twin_sigmoid_objective` builds a LightGBM custom objective whose
gradients are those of :class:`tfr_extensions.losses.TwinSigmoidLoss`, per
document. The modules, one job each:

* :mod:`~tfr_extensions.gbdt.objective`: the objective, its options and seed
  rule, and one boosting round;
* :mod:`~tfr_extensions.gbdt.layout`: LightGBM's flat per-document arrays as
  padded query blocks, and the pairs computed in each;
* :mod:`~tfr_extensions.gbdt.metric_form`: exact ranks and the metric's
  :math:`M = \\frac{1}{Z}\\sum_d w_d f(r_d)` of a block;
* :mod:`~tfr_extensions.gbdt.terms`: a block's gradient and Hessian (the math);
* :mod:`~tfr_extensions.gbdt.threads`: the thread pools and per-thread buffers.

>>> import lightgbm as lgb
>>> import numpy as np
>>> data = np.random.default_rng(0)
>>> X, y = data.normal(size=(60, 3)), data.integers(0, 3, size=60).astype(float)
>>> train = lgb.Dataset(X, y, group=[20, 25, 15])
>>> objective = twin_sigmoid_objective("ndcg", gradient="type3", seed=0)
>>> booster = lgb.train({"objective": objective, "num_leaves": 4, "min_data_in_leaf": 5,
...                      "verbose": -1}, train, num_boost_round=3)
>>> grad, hess = objective.gradients(np.zeros(60), y, [20, 25, 15])
>>> grad.shape, bool((hess >= 0).all())
((60,), True)
"""
from tfr_extensions.gbdt.objective import (HESSIANS, OBJECTIVE_NAMES, SUPPORTED_METRICS, Seed,
                                           TwinSigmoidObjective, parse_objective_name,
                                           twin_sigmoid_objective)
from tfr_extensions.ops.vocabulary import GRADIENT_TYPES

__all__ = ["GRADIENT_TYPES", "HESSIANS", "OBJECTIVE_NAMES", "SUPPORTED_METRICS", "Seed",
           "TwinSigmoidObjective", "parse_objective_name", "twin_sigmoid_objective"]
