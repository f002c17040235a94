"""PyTorch-native bodies of the losses whose time goes to all pairs of a list.

On Keras 3's PyTorch backend a loss that names a body here (``@loss_function(torch=...)``,
:attr:`tfr_extensions.losses.base.LossSpec.torch`) runs it in place of its ``keras.ops``
body: twin-sigmoid (every metric and gradient type), ApproxNDCG, RankNet,
NeuralNDCG (its one math around :mod:`~tfr_extensions.torch_ops.sinkhorn`); LambdaLoss runs
its one math under the PyTorch screening (``base.TORCH_SCREENED_MATH``).
Each pair pass is a ``torch.autograd.Function`` with a hand-written backward: the fewest
``[B, L, L]`` intermediates, no data-dependent Python branch (``torch.compile`` makes one
graph), the values and gradients of the ``keras.ops`` bodies (tested). The bad-input policy
is :mod:`tfr_extensions.ops.screening`'s in torch operations (``torch_ops.screening``).
ListNet, O(B L), has none: with one (commit e12a853), ``benchmarks.native_bodies`` timed an
``R4.L`` step at 0.89-1.19x (L = 32) and 0.95-1.11x (L = 200) over six runs: noise.
"""
