"""Option sets of each registered loss, read from the registry: each loss declares
its own (``@loss_function(examples=...)``), the first changing every option of its
function from its default (the registry suites' round trips and checks)."""
from tfr_extensions.losses import registry

#: registry key -> the loss's option sets beyond the defaults
EXAMPLES = {key: [dict(e) for e in cls.spec.examples] for key, cls in registry.classes().items()}
#: registry key -> every option of the loss's function, each changed from its default
NON_DEFAULT = {key: examples[0] for key, examples in EXAMPLES.items()}
#: registry key -> (its first option, a value its check rejects)
BAD_OPTION = {key: (name, cls.spec.checks[name].rejects)
              for key, cls in registry.classes().items()
              for name in list(cls.spec.defaults)[:1]}
#: registry key -> options that keep its XLA compile short, for the tests that compile
#: every loss: NeuralNDCG unrolls its 50 Sinkhorn iterations, 20-30 s to compile on 2 CPU
#: cores (``tests/losses/test_neural_ndcg.py`` compiles its defaults)
QUICK_TO_COMPILE = {"neural_ndcg": {"sinkhorn_iterations": 5}}
