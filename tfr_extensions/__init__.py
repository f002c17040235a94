"""tfr_extensions: learning-to-rank research methods for Keras 3 (TensorFlow, JAX,
PyTorch), Keras 2 and TF-Ranking.

```python
import tfr_extensions as tfrx

loss = tfrx.losses.get("twin_ndcg_type3", topn=10)          # a Keras loss, any backend
model = tfrx.models.scorer("R4.L", num_features=46)          # the papers' scorers
model.compile(optimizer="adam", loss=loss,
              metrics=[tfrx.metrics.RankingMetric("ndcg", topn=10)])
data = tfrx.data.read_libsvm("MQ2008/Fold1/train.txt")        # LETOR / LibSVM, cached
model.fit(tfrx.data.RankingPyDataset(data, batch_size=32), epochs=5)
```

What you import, in the order you meet it:

1. **Losses**, `tfr_extensions.losses`: `tfr_extensions.losses.get` by name, and per
   method a Keras class with its function: `tfr_extensions.losses.TwinSigmoidLoss` /
   `tfr_extensions.losses.twin_sigmoid_loss`, `tfr_extensions.losses.ApproxNDCGLoss`,
   `tfr_extensions.losses.SoftNDCGLoss`, `tfr_extensions.losses.WassRankLoss`,
   `tfr_extensions.losses.ExpectedUtilityLoss`, `tfr_extensions.losses.MDPRankLoss`,
   `tfr_extensions.losses.RankNetLoss`, `tfr_extensions.losses.NDCGBetaHingeLoss`,
   `tfr_extensions.losses.ListNetLoss`, `tfr_extensions.losses.LambdaLoss`,
   `tfr_extensions.losses.NeuralNDCGLoss`.
2. **Metrics**, `tfr_extensions.metrics`: exact nDCG, AP, Precision and nERR per list
   (`tfr_extensions.metrics.ndcg`, ...) and the Keras `tfr_extensions.metrics.RankingMetric`.
3. **Scorers**, `tfr_extensions.models`: `tfr_extensions.models.scorer` in the papers'
   notation (`R4.L`, `CE4.L`, `B64`).
4. **Data**, `tfr_extensions.data`: `tfr_extensions.data.read_libsvm`,
   `tfr_extensions.data.RankingPyDataset`, `tfr_extensions.data.to_dense`,
   `tfr_extensions.data.synthetic`, and on TensorFlow `tfr_extensions.data.ranking_dataset`
   (tf.data) and ELWC.
5. **Evaluation**, `tfr_extensions.evaluation`: the protocol of the jobs
   (`tfr_extensions.evaluation.evaluate`: cutoffs, the rule for lists without a relevant
   document).
6. **Serving**, `tfr_extensions.serving` (TensorFlow): `tfr_extensions.serving.export`
   writes a SavedModel with TF Serving's ELWC, tf.Example and dense signatures.
7. **Gradient-boosted trees**, `tfr_extensions.gbdt`: the twin-sigmoid objectives for
   LightGBM (`tfr_extensions.gbdt.twin_sigmoid_objective`).
8. **Ops**, `tfr_extensions.ops`: the differentiable building blocks
   (`tfr_extensions.ops.twin_sigmoid_ranks`, `tfr_extensions.ops.rank_distributions`,
   `tfr_extensions.ops.sample_rankings`, ...).
9. **IRGAN**, `tfr_extensions.adversarial` (TensorFlow), and TF-Ranking's pipelines with
   every loss of ours, `tfr_extensions.tfranking` (TF-Ranking, the `tf215` stack).
10. **The jobs**, `pipelines` (installed as `tfr_extensions.pipelines` and the console
    scripts `tfrx-train`, `tfrx-cv`, `tfrx-lambdamart`, `tfrx-export`, `tfrx-demo`; the
    `jobs` extra).

The modules that implement these (the array namespace, the per-framework primitives, the
bad-input screening, the checks) are documented apart, in the reference's
[implementation](implementation/index.html) part.

Keras 3 is the spine, on any of its backends; TensorFlow is one backend, and Keras 2
(TensorFlow 2.15, or tf-keras with ``TF_USE_LEGACY_KERAS=1``) is served too
(`tfr_extensions.backend`). Without TensorFlow (Keras 3 on JAX or PyTorch) the package
imports whole but for what is TensorFlow by nature: ``tfrx.serving``, ``tfrx.adversarial``,
``tfrx.tfranking``, ``tfrx.data.ranking_dataset`` and ELWC raise an ``ImportError`` that
names them and what to use instead. TF-Ranking is optional: only ``tfrx.tfranking``
(imported on first use) and the fallback to its loss names need it. Its old name
``tfrx.pipeline`` still works, with a ``DeprecationWarning``.
"""
import importlib
import warnings

from tfr_extensions import backend  # first: decides which Keras every module uses
from tfr_extensions import data, keras_ops, ops
from tfr_extensions import evaluation, gbdt, losses, metrics, models

if backend.HAS_TENSORFLOW:
    from tfr_extensions import adversarial, serving

__version__ = "0.1.0"

#: the public namespaces (the API reference's top page; ``from tfr_extensions import *``)
__all__ = ["losses", "metrics", "models", "data", "evaluation", "gbdt", "ops", "backend"] + (
    ["serving", "adversarial"] if backend.HAS_TENSORFLOW else [])

_ON_FIRST_USE = ("tfranking",)  # needs TF-Ranking: imported when first named
#: old module name -> new: the old name gives the new module, with a DeprecationWarning
_RENAMED = {"pipeline": "tfranking"}

#: the parts that are TensorFlow programs by nature -> what to use without TensorFlow
TENSORFLOW_ONLY = {
    "adversarial": "IRGAN is a TensorFlow program; the other losses of tfrx.losses run on "
                   "every backend",
    "serving": "train on any backend and save the model as a .keras file, then export it "
               "in a TensorFlow environment with `tfrx-export model.keras "
               "saved_models/<name>/1`",
    "tfranking": "TF-Ranking's pipelines need TF-Ranking (tf215 stack); the tfrx-train and "
                 "tfrx-cv jobs run on every backend",
}


def __getattr__(name):
    new_name = _RENAMED.get(name, name)
    if new_name in TENSORFLOW_ONLY and not backend.HAS_TENSORFLOW:
        called = name if new_name == name else f"{name} (now tfr_extensions.{new_name})"
        raise ImportError(
            f"tfr_extensions.{called} needs TensorFlow, which is not installed here "
            f"({backend.describe()}). Instead: {TENSORFLOW_ONLY[new_name]}.")
    if name in _RENAMED:  # ``tfrx.pipeline``, ``from tfr_extensions import pipeline``
        module = importlib.import_module(f"{__name__}.{new_name}")
        warnings.warn(_renamed_message(name), DeprecationWarning, stacklevel=2)
        globals()[name] = module  # warned once, as an import warns
        return module
    if name in _ON_FIRST_USE:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _renamed_message(old: str) -> str:
    """The DeprecationWarning of the old module name ``old`` (see :data:`_RENAMED`)."""
    return (f"tfr_extensions.{old} is deprecated: it is now tfr_extensions.{_RENAMED[old]} "
            "(the same module); import that instead.")
