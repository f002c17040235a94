r"""Sinkhorn scaling in PyTorch: the loop of NeuralNDCG, with a hand-written backward.

The same iteration and the same per-list stopping rule as the array namespace's
``xp.sinkhorn.sinkhorn_scaling`` (:func:`tfr_extensions.keras_ops.sinkhorn.sinkhorn_scaling`):
each iteration divides every column of a list's matrix by its sum, then every row by its
sum (a zero sum leaves its zeros); a list is frozen after the first iteration at which all
its valid row and column sums are within ``tolerance`` of 1.

Per framework because of its cost. The generic loop guards each division with two selects
over ``[B, L, L]``, freezes the stopped lists with a third, and leaves autograd to
differentiate the ten or so ``[B, L, L]`` operations of each iteration. Here every select is
over sums, ``[B, L]``: each iteration multiplies the columns, then the rows, by their
inverse sums (0 for a zero sum), a stopped list by 1 (it stays as it is, to the bit), the
stopping test's column sums are the next iteration's, and the backward is one
``torch.autograd.Function``: per iteration, with :math:`a = m / c` and :math:`b = a / q`,
:math:`\bar a = (\bar b - \sum_k \bar b_{ik} b_{ik}) / q_i` and
:math:`\bar m = (\bar a - \sum_k \bar a_{kj} a_{kj}) / c_j` (0 where a sum is 0; a stopped
list passes its gradient through), four ``[B, L, L]`` element-wise operations and two
reductions. Every iteration runs, with no value read back to the host (a GPU's queue never
waits on it) and one ``torch.compile`` graph. ``KERAS_BACKEND=torch python -m
benchmarks.allrank_losses``: at 64 lists of 32 and of 128, NeuralNDCG's forward and backward
ran at 0.34-0.51x and 0.41-0.46x allRank 1.4.3's code with the generic loop, at the figures
of ``docs/speed.md`` with this one.
"""
import torch


def _inverse(sums):
    """``1 / sums``, 0 where a sum is 0: a zero sum is a row or column of zeros, which
    the scaling leaves at 0 (and whose gradient is 0)."""
    return torch.where(sums > 0, sums.reciprocal(), 0.0)


class _Sinkhorn(torch.autograd.Function):
    """Sinkhorn scaling of ``matrix`` ``[B, L, L]`` with its VJP."""

    @staticmethod
    def forward(ctx, matrix, row_mask, column_mask, iterations: int, tolerance: float):
        m = matrix
        padded = torch.cat([~row_mask, ~column_mask], dim=-1)  # [B, 2L]: no stopping test
        columns = m.sum(dim=1, keepdim=True)  # [B, 1, L]
        running = torch.ones(m.shape[:1] + (1, 1), dtype=m.dtype, device=m.device)  # [B, 1, 1]
        stopped = torch.zeros_like(running)
        saved = []  # per iteration: a, b, the scales of the columns and rows, running lists
        for _ in range(iterations):
            # a stopped list scales by 1: its matrix stays as it is, to the bit
            column_scales = torch.addcmul(stopped, _inverse(columns), running)
            a = m * column_scales
            row_scales = torch.addcmul(stopped, _inverse(a.sum(dim=2, keepdim=True)), running)
            m = a * row_scales  # [B, L, L]
            saved.append((a, m, column_scales, row_scales, running))
            columns = m.sum(dim=1, keepdim=True)
            # the stopping test: every valid row and column sum within the tolerance of 1
            errors = torch.cat([m.sum(dim=2), columns[:, 0]], dim=-1).sub_(1.0).abs_()
            converged = errors.masked_fill_(padded, 0.0).amax(dim=-1) < tolerance  # [B]
            running = running.masked_fill(converged[:, None, None], 0.0)
            stopped = 1.0 - running
        ctx.steps = saved
        return m

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, gradient):  # pylint: disable=arguments-differ
        products = None
        for a, b, column_scales, row_scales, running in reversed(ctx.steps):
            # a stopped list (running 0, scales 1) passes its gradient through
            products = torch.mul(gradient, b, out=products)
            gradient = (gradient - products.sum(dim=2, keepdim=True) * running).mul_(row_scales)
            products = torch.mul(gradient, a, out=products)
            gradient.sub_(products.sum(dim=1, keepdim=True) * running).mul_(column_scales)
        return gradient, None, None, None, None


def sinkhorn_scaling(matrix, row_mask, column_mask, iterations: int, tolerance: float):
    """Sinkhorn scaling of ``[B, L, L]`` matrices that are zero outside their valid rows
    (``row_mask`` bool ``[B, L]``) and columns (``column_mask``), as
    :func:`tfr_extensions.keras_ops.sinkhorn.sinkhorn_scaling` computes it (module
    docstring): at most ``iterations`` iterations, a list stopped once its valid row and
    column sums are all within ``tolerance`` of 1.

    >>> m = torch.tensor([[[2., 1.], [1., 2.]]])
    >>> valid = torch.tensor([[True, True]])
    >>> sinkhorn_scaling(m, valid, valid, 5, 1e-6).sum(dim=1)
    tensor([[1., 1.]])
    """
    if not iterations:
        return matrix
    return _Sinkhorn.apply(matrix, row_mask, column_mask, int(iterations), float(tolerance))
