r"""Sinkhorn scaling in PyTorch: the loop of NeuralNDCG, with a hand-written backward.

The same iteration and the same per-list stopping rule as the array namespace's
``xp.sinkhorn.sinkhorn_scaling`` (:func:`tfr_extensions.keras_ops.sinkhorn.sinkhorn_scaling`):
each iteration divides every column of a list's matrix by its sum, then every row by its
sum (a zero sum leaves its zeros); a list is frozen after the first iteration at which all
its valid row and column sums are within ``tolerance`` of 1.

Per framework because of its cost. The generic body guards each division with two
selects over ``[B, L, L]``, freezes the stopped lists with a third, and lets autograd
differentiate the ten or so ``[B, L, L]`` operations of each iteration. Here each division
divides by its sums with the zero sums replaced by 1 (a ``[B, L]`` select), the column sums
of the stopping test are the next iteration's divisors, a frozen list costs a select only
once some list has stopped, the loop stops when every list has (eager only: under
``torch.compile`` every iteration runs, the stopped lists frozen), and the backward is one
``torch.autograd.Function``: per iteration, with :math:`a = m / c` and :math:`b = a / q`,
:math:`\bar a = (\bar b - \sum_k \bar b_{ik} b_{ik}) / q_i` and :math:`\bar m = (\bar a -
\sum_k \bar a_{kj} a_{kj}) / c_j` (0 where a sum is 0; a frozen list passes its gradient
through), four ``[B, L, L]`` element-wise operations and two reductions.
``KERAS_BACKEND=torch python -m benchmarks.allrank_losses --cases neural_ndcg``: NeuralNDCG
forward and backward at 64 lists of 32 and of 128 went from 0.45x and 0.41x allRank 1.4.3's
code with the generic body to the figures of ``docs/speed.md`` with this one.
"""
import torch


def _inverse(sums):
    """``1 / sums``, 0 where a sum is 0: a zero sum is a row or column of zeros, which
    the scaling leaves at 0 (and whose gradient is 0)."""
    positive = sums > 0
    return torch.where(positive, 1.0 / torch.where(positive, sums, torch.ones_like(sums)),
                       torch.zeros_like(sums))


def _converged(rows, columns, row_mask, column_mask, tolerance: float):
    """Bool ``[B]``: every valid row and column sum within ``tolerance`` of 1."""
    rows_ok = ((rows - 1.0).abs() < tolerance) | ~row_mask
    columns_ok = ((columns - 1.0).abs() < tolerance) | ~column_mask
    return rows_ok.all(dim=-1) & columns_ok.all(dim=-1)


class _Sinkhorn(torch.autograd.Function):
    """Sinkhorn scaling of ``matrix`` ``[B, L, L]`` with its VJP."""

    @staticmethod
    def forward(ctx, matrix, row_mask, column_mask, iterations: int, tolerance: float):
        eager = not torch.compiler.is_compiling()
        m = matrix
        columns = m.sum(dim=1, keepdim=True)  # [B, 1, L]
        done = torch.zeros(m.shape[:1], dtype=torch.bool, device=m.device)
        any_done = not eager  # (traced: the select always runs)
        saved = []  # per iteration: a, b, 1 / the column and row sums, the flags before it
        for _ in range(iterations):
            column_scales = _inverse(columns)
            a = m * column_scales
            row_scales = _inverse(a.sum(dim=2, keepdim=True))  # [B, L, 1]
            b = a * row_scales
            if any_done:
                b = torch.where(done[:, None, None], m, b)
            saved.append((a, b, column_scales, row_scales, done if any_done else None))
            m = b
            columns = m.sum(dim=1, keepdim=True)
            done = done | _converged(m.sum(dim=2), columns[:, 0], row_mask, column_mask,
                                     tolerance)
            if eager:
                if bool(done.all()):
                    break
                any_done = bool(done.any())
        ctx.steps = saved
        return m

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, gradient):  # pylint: disable=arguments-differ
        products = None
        for a, b, column_scales, row_scales, done in reversed(ctx.steps):
            products = torch.mul(gradient, b, out=products)
            gradient_m = (gradient - products.sum(dim=2, keepdim=True)).mul_(row_scales)
            products = torch.mul(gradient_m, a, out=products)
            gradient_m.sub_(products.sum(dim=1, keepdim=True)).mul_(column_scales)
            gradient = gradient_m if done is None else torch.where(
                done[:, None, None], gradient, gradient_m)
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
