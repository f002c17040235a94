"""The TensorFlow body of :mod:`tfr_extensions.losses.twin_sigmoid` (the math, the
public function and the Keras class are there; the ``keras.ops`` twin is
:mod:`tfr_extensions.keras_ops.losses.twin_sigmoid`), and the one XLA program in
which the Keras class runs short lists in graph mode (:func:`one_program_losses`).
"""
import contextlib
import sys

import tensorflow as tf

from tfr_extensions.ops import conventions
from tfr_extensions.ops import lists
from tfr_extensions.ops import screening
from tfr_extensions.ops.twin_sigmoid import twin_sigmoid_metric

# the module (tfr_extensions.ops exports a function of that name)
twin_ops = sys.modules["tfr_extensions.ops.twin_sigmoid"]


def twin_sigmoid_loss(labels, scores, *, mask=None, metric="ndcg", topn=None, gradient="type1",
                      alpha_b=1.0, tie_break=True, seed=None):
    """The TensorFlow body of :func:`tfr_extensions.losses.twin_sigmoid_loss` (the math,
    the arguments and a doctest are there): inputs screened, options checked."""
    value = twin_sigmoid_metric(metric, labels, scores, mask, topn, gradient, alpha_b,
                                tie_break, seed if tie_break else None)
    return -value, tf.cast(lists.has_relevant(labels, mask), scores.dtype)


#: In graph mode the Keras class runs lists of a static length of at most this
#: many documents as one XLA program (:func:`one_program_losses`); longer ones
#: run the forward pass as graph ops (TF's sort is faster than XLA:CPU's there)
#: and the backward pass as its own XLA program. At 128 documents (64 lists,
#: ``twin_ndcg_type3``) the one program takes 12.2 µs per list against 15.5 on TF
#: 2.15 (11.0 with ``BRANCHES_IN_ONE_PROGRAM``) and 9.4-10.0 against 12.6-14.5
#: on TF 2.21; nERR 11.7 against 17.4 and 9.2-9.6 against 15.9-16.1
#: (``docs/notes/twin_sigmoid_speed.md``, change 16).
ONE_PROGRAM_MAX_LIST_SIZE = 128

#: Whether the graph-mode program of :func:`one_program_losses` chooses
#: between the exp and the tanh form itself, as one XLA conditional whose
#: branches each compute the whole loss and gradient
#: (:func:`_one_conditional_program`). True on TF < 2.16: that XLA:CPU (the
#: classic runtime) splits loops over the intra-op threads in a program's entry
#: computation, its loops and calls, but not in a conditional's branches, and
#: on this program the split costs more than it gains: in one thread it runs
#: 1.1-1.6x faster (nDCG type3, µs per list: 64 lists of 32, 4.17 -> 2.57; 1024
#: lists of 32, 1.26 -> 1.09; 64 lists of 128, 12.2 -> 11.0). TF 2.16+'s XLA:CPU
#: gains nothing from it (2.28 -> 2.51 at 32), so there lists of up to
#: ``XLA_TANH_MAX_LIST_SIZE`` documents run the exp program, and the tanh program
#: after it only where a spread needs it, and longer lists one program whose
#: backward pass chooses its form (``docs/notes/twin_sigmoid_speed.md``, changes
#: 15-16).
BRANCHES_IN_ONE_PROGRAM = lists.tensorflow_version() < (2, 16)


def _losses_and_gradient(labels, scores, options, by_exp: bool):
    """``(losses * weights, their gradient with respect to the scores)`` of
    :func:`twin_sigmoid_loss`, traced into the caller's XLA program; with
    ``by_exp`` the backward pass takes the exp form (exact where
    :func:`_exp_is_exact`), else the tanh form. Lists are independent, so the
    gradient of the losses' sum is each list's own gradient."""
    with twin_ops.short_lists_by_exp() if by_exp else contextlib.nullcontext():
        with tf.GradientTape() as tape:
            tape.watch(scores)
            losses, weights, _ = screening.screened_loss(
                twin_sigmoid_loss, labels, scores, None, conventions.MAX_LABEL, options)
            per_list = losses * weights
        return per_list, tape.gradient(per_list, scores)  # the backward pass is traced here


def _exp_is_exact(labels, scores, options) -> tf.Tensor:
    """Whether the exp form is exact on the scores and mask the loss sees
    (screened: XLA computes the screening once)."""
    _, screened, valid, _ = screening.screen_lists(labels, scores, conventions.MAX_LABEL)
    return twin_ops.exp_is_exact(screened, valid, options["alpha_b"])


@tf.function(jit_compile=True)
def _exp_program(labels, scores, options):
    """``(losses * weights, their gradient by exp, whether it is exact)``."""
    return (*_losses_and_gradient(labels, scores, options, True),
            _exp_is_exact(labels, scores, options))


@tf.function(jit_compile=True)
def _tanh_program(labels, scores, options):
    """``(losses * weights, their gradient)``: lists of at most
    ``XLA_TANH_MAX_LIST_SIZE`` documents take the tanh form; longer lists the
    form their backward pass chooses inside the program (an XLA conditional on
    the spread, :func:`~tfr_extensions.ops.twin_sigmoid._ranks_backward`)."""
    return _losses_and_gradient(labels, scores, options, False)


@tf.function(jit_compile=True)
def _one_conditional_program(labels, scores, options):
    """:func:`_losses_and_gradient` in the exp form where it is exact, else in
    the tanh form: one program, both forms the branches of one conditional
    (``BRANCHES_IN_ONE_PROGRAM``). Past ``XLA_TANH_MAX_LIST_SIZE`` documents
    both branches' backward passes choose their form themselves, and the
    conditional only keeps the program in one thread."""
    return tf.cond(_exp_is_exact(labels, scores, options),
                   lambda: _losses_and_gradient(labels, scores, options, True),
                   lambda: _losses_and_gradient(labels, scores, options, False))


def runs_as_one_program(scores) -> bool:
    """Whether the Keras class computes the loss of these scores as one XLA program
    (:func:`one_program_losses`): in graph mode outside XLA, lists of a static length
    of at most :data:`ONE_PROGRAM_MAX_LIST_SIZE` documents."""
    size = scores.shape[1]
    return not (tf.executing_eagerly() or lists.compiling_with_xla() or size is None
                or size > ONE_PROGRAM_MAX_LIST_SIZE)


def one_program_losses(labels, scores, options):
    """Per-list ``losses * weights`` ``[B]`` of :func:`twin_sigmoid_loss` with
    ``options`` (checked; the seed a tensor), from one XLA program that also
    computes their gradient (up to ``XLA_TANH_MAX_LIST_SIZE`` documents the
    exp program, and the tanh program after it where the exp form is not
    exact; past that, one program whose backward pass chooses its form; on TF
    < 2.16 both forms in one program, ``BRANCHES_IN_ONE_PROGRAM``); the
    backward pass only scales that gradient. Outside XLA this spares the
    dozens of small graph ops around the loss (screening, tie keys, NaN
    policy), whose fixed costs outweigh the pairwise work up to
    ``ONE_PROGRAM_MAX_LIST_SIZE`` documents (``docs/notes/twin_sigmoid_speed.md``).
    A forward-only call (evaluation) computes the gradient too."""
    constant = tf.stop_gradient(scores)  # no gradient flows into the programs
    if BRANCHES_IN_ONE_PROGRAM:
        per_list, grads = _one_conditional_program(labels, constant, options)
    elif scores.shape[1] > twin_ops.XLA_TANH_MAX_LIST_SIZE:  # (the program chooses the form)
        per_list, grads = _tanh_program(labels, constant, options)
    else:
        per_list, grads, exact = _exp_program(labels, constant, options)
        grads = tf.cond(exact, lambda: grads, lambda: _tanh_program(labels, constant, options)[1])

    @tf.custom_gradient
    def _losses(s):
        del s  # the gradient is already known
        return tf.identity(per_list), lambda upstream: upstream[:, None] * grads

    return _losses(scores)
