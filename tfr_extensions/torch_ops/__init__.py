"""PyTorch-native bodies of the losses whose time goes to all pairs of a list.

On Keras 3's PyTorch backend a loss that names a body here (``@loss_function(torch=...)``,
:attr:`tfr_extensions.losses.base.LossSpec.torch`) runs it in place of its ``keras.ops``
body: twin-sigmoid (every metric and gradient type), ApproxNDCG, ListNet, RankNet,
NeuralNDCG (its one math around :mod:`~tfr_extensions.torch_ops.sinkhorn`) and LambdaLoss.
Each pair pass is a ``torch.autograd.Function`` with a hand-written backward: the fewest
``[B, L, L]`` intermediates, no data-dependent Python branch (``torch.compile`` makes one
graph), the values and gradients of the ``keras.ops`` bodies (tested). The bad-input policy
is :mod:`tfr_extensions.ops.screening`'s in torch operations (``torch_ops.screening``).
"""
