r"""Row blocks for the pair passes of the PyTorch-native bodies.

PyTorch's eager CPU kernels write every ``[B, L, L]`` intermediate to memory (a fresh tensor
of many megabytes comes from the operating system page by page), so on a CPU the pair
passes run over row blocks ``[B, R, L]`` of at most :data:`CPU_BLOCK_PAIRS` pairs, in cache,
eagerly into one buffer per pass (:func:`scratch`); on a GPU ``[B, L, L]`` is one block
(``torch.compile`` unrolls the blocks).
Kept by the twin-sigmoid's pair pass at 64 lists of 128 (2 EPYC cores): 1.5 ms with two
buffers against 2.6 with a tensor per block.

>>> scores = torch.zeros(16, 512)
>>> rows_per_block(scores), len(row_blocks(scores)), row_blocks(scores)[1]
(32, 16, slice(32, 64, None))
"""
from typing import List

import torch

#: Most pairs (``B R L``) in one row block on a CPU: 1 MiB a float32 block.
CPU_BLOCK_PAIRS = 1 << 18


def rows_per_block(scores) -> int:
    """``R``: the rows of each block of ``scores`` ``[B, L]``'s pairs (``L`` off a CPU)."""
    batch, size = scores.shape
    if scores.device.type != "cpu" or size == 0:
        return max(size, 1)
    return max(1, min(size, CPU_BLOCK_PAIRS // max(batch * size, 1)))


def row_blocks(scores) -> List[slice]:
    """The row slices of :func:`rows_per_block` (one empty slice for lists of no document)."""
    size, step = scores.shape[1], rows_per_block(scores)
    return [slice(start, min(start + step, size)) for start in range(0, size, step)] or [
        slice(0, 0)]


def compiling() -> bool:
    """Whether ``torch.compile`` is tracing this call (the pair passes then take its path)."""
    return torch.compiler.is_compiling()


def scratch(x):
    """A buffer ``[B, R, L]`` for one row block of ``x`` ``[B, L]``'s pairs, or None under
    ``torch.compile`` (it refuses ``out=`` into a slice and plans its own memory)."""
    if compiling():
        return None
    return x.new_empty((x.shape[0], rows_per_block(x), x.shape[1]))


def differences(x, block, buffer, rows_first: bool = False):
    """:math:`x_j - x_i` (``rows_first``: :math:`x_i - x_j`) ``[B, R, L]`` for the rows
    ``block`` of ``x`` ``[B, L]``, into ``buffer`` (:func:`scratch`; None: a new tensor).

    >>> x = torch.tensor([[0.0, 1.0, 3.0]])
    >>> differences(x, slice(1, 3), scratch(x))
    tensor([[[-1.,  0.,  2.],
             [-3., -2.,  0.]]])
    """
    rows, columns = x[:, block, None], x[:, None, :]
    if rows_first:
        rows, columns = columns, rows
    if buffer is None:
        return columns - rows
    return torch.sub(columns, rows, out=buffer[:, :block.stop - block.start])


def clip(x):
    """``x`` clipped to +-``dtype.max / 4``: differences of two stay finite."""
    bound = torch.finfo(x.dtype).max / 4.0
    return torch.clamp(x, -bound, bound)
