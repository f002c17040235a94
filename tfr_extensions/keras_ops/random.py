"""Seeds and draws of the randomized ops on Keras 3's backends: the ``keras.ops``
counterpart of the seed helpers of :mod:`tfr_extensions.ops.lists`.

A seed is None (fresh draws: Keras's global stream on PyTorch and TensorFlow, a process-wide
host stream on JAX), an int, a pair of ints, or a seed tensor ``[2]``. A loss class built
with a seed holds a :class:`SeedGenerator` (:func:`seed_generator`) and draws one seed per
call (``SeedGenerator.next``): reproducible from one seed, fresh at every step. On JAX,
:func:`random_bits` draws from XLA's ``RngBitGenerator``: ``keras.random``'s Threefry costs
seconds of compilation in every new jitted step on a CPU.

**The generator's state on JAX.** A ``SeedGenerator``'s state assignment persists under
JAX tracing only where the variable is threaded through the program (Keras's JAX trainer
threads the model's and its metrics' variables only): a loss's generator would draw the
same noise at every step of ``model.fit``. There :class:`SeedGenerator` asks for its seed
through one ordered ``jax.experimental.io_callback``, which returns the current state and
advances a host copy, written back into the variable at the next eager read of
:attr:`SeedGenerator.state`. Where the variable is threaded
(:class:`tfr_extensions.models.TrainingModel`, as ``tfrx-train`` does on JAX) Keras's own
``next`` runs: the same stream. The host path costs a round trip per step (``tfrx-train``'s
MSLR-shaped step, 2 vCPUs: 52 steps/s against 61 threaded) and meets JAX's limits on
ordered callbacks (no ``vmap``; multi-device programs may refuse them).
"""
import random as python_random
import threading
from typing import Sequence, Union

import numpy as np

import keras
from keras import ops

from tfr_extensions import arrays
from tfr_extensions.arrays import tie_keys

Seed = Union[None, int, Sequence[int], "keras.KerasTensor"]
#: one int for Keras's ``SeedGenerator`` from an int or a pair (:func:`tie_keys.stream_seed`)
as_int = tie_keys.stream_seed


def _on_jax() -> bool:
    return keras.backend.backend() == "jax"


def jax_tracing() -> bool:
    """Whether JAX is tracing here (``jax.jit``, ``jax.grad``, ...)."""
    import jax  # pylint: disable=import-outside-toplevel
    return isinstance(ops.ones(()), jax.core.Tracer)


def _stateless_scope():
    from keras.src.backend.common import stateless_scope  # pylint: disable=import-outside-toplevel
    return stateless_scope.get_stateless_scope()


def assignment_persists(variable) -> bool:
    """Whether ``variable.assign`` here persists: eager outside any ``StatelessScope``,
    or inside one that maps the variable (e.g. Keras's JAX trainer, for a model's)."""
    scope = _stateless_scope()
    if scope is not None:
        return scope.get_current_value(variable) is not None
    return not (_on_jax() and jax_tracing())


def _from_host(host_next):
    """``host_next()``'s uint32 seed ``[2]``, asked for through one ordered ``io_callback``."""
    import jax  # pylint: disable=import-outside-toplevel
    from jax.experimental import io_callback  # pylint: disable=import-outside-toplevel
    return io_callback(host_next, jax.ShapeDtypeStruct((2,), np.uint32), ordered=True)


class SeedGenerator(keras.random.SeedGenerator):
    """A ``keras.random.SeedGenerator`` whose stream also advances in traced JAX code that
    drops its state updates (module docstring); elsewhere it is Keras's own."""

    def __init__(self, seed=None, name=None):
        self._lock = threading.Lock()
        self._host = None  # numpy [2]: the state as the host path advanced it
        self._host_source = None  # the variable's value the host copy continues
        self._host_ahead = False  # the host copy has draws the variable lacks
        super().__init__(seed, name=name)

    @property
    def state(self):
        """The state variable ``[2]`` (``[seed, draws]``), host draws included."""
        variable = self._state_variable
        if self._host_ahead and _stateless_scope() is None and assignment_persists(variable):
            with self._lock:
                if self._host_ahead:
                    if self._value_of(variable) is self._host_source:
                        variable.assign(self._host)
                        self._host_source = self._value_of(variable)
                    else:  # assigned since (weights loaded): that value wins
                        self._host = None
                    self._host_ahead = False
        return variable

    @state.setter
    def state(self, variable):
        self._state_variable = variable

    @staticmethod
    def _value_of(variable):
        """The variable's value object: its identity tells whether it was assigned since."""
        return getattr(variable, "_value", None)

    def _sync_host_locked(self):
        """(Re)starts the host copy from the variable if it was assigned since (the
        assigned value wins over host draws not written back). Call with the lock held."""
        current = self._value_of(self._state_variable)
        if self._host is None or current is not self._host_source:
            self._host = np.array(current, dtype=np.uint32)
            self._host_source = current
            self._host_ahead = False

    def _host_next(self):
        """The callback: the current state, advancing the host copy."""
        with self._lock:
            self._sync_host_locked()
            self._host_ahead = True
            return _advance(self._host)

    def next(self, ordered=True):
        if ordered and _on_jax() and not assignment_persists(self._state_variable):
            with self._lock:  # the host copy made now, at trace time, not in the callback
                self._sync_host_locked()
            return _from_host(self._host_next)
        if ordered and keras.backend.backend() == "torch":
            # Keras's own adds a NumPy array: a torch.compile graph break, a GPU waiting on a copy
            state = self.state
            seed = state.value * 1  # (a copy)
            state.assign(ops.add(state, ops.arange(2, dtype=state.dtype)))
            return seed
        return super().next(ordered=ordered)


def state_value(generator) -> np.ndarray:
    """A generator's state ``[2]`` as NumPy, host draws included, written nowhere (a save
    reads it so: with several JAX processes, writing the variable is a collective)."""
    if isinstance(generator, SeedGenerator):
        with generator._lock:  # pylint: disable=protected-access
            if generator._host_ahead and generator._host is not None:  # pylint: disable=protected-access
                return np.array(generator._host, dtype=np.uint32)  # pylint: disable=protected-access
    value = generator.state.value
    if not getattr(value, "is_fully_addressable", True):  # a replicated global array
        value = value.addressable_data(0)
    return np.asarray(ops.convert_to_numpy(value))


def seed_generator(seed, salt: int = 0) -> keras.random.SeedGenerator:
    """A :class:`SeedGenerator` for an int or pair ``seed`` and a stream ``salt`` (None: random)."""
    return SeedGenerator(None if seed is None else as_int(seed, salt))


def _advance(host):
    """The seed ``[2]`` a host copy holds, which then advances by one draw."""
    seed = host.copy()
    host[1] += np.uint32(1)
    return seed


_GLOBAL_LOCK, _GLOBAL_STATE = threading.Lock(), []  # JAX's host stream of seed=None draws


def _global_next():
    """The next seed of JAX's process-wide ``seed=None`` stream: a start from Python's
    ``random`` (``keras.utils.set_random_seed`` fixes it, as for Keras's generators) and a
    draw counter on the host (a Keras variable cannot be created while tracing)."""
    with _GLOBAL_LOCK:
        if not _GLOBAL_STATE:
            _GLOBAL_STATE.append(np.array([python_random.randint(1, 10**9), 0], np.uint32))
        return _advance(_GLOBAL_STATE[0])


def _keras_seed(seed):
    """``seed`` as the ``keras.random`` functions of PyTorch and TensorFlow take it."""
    if seed is None or isinstance(seed, keras.random.SeedGenerator):
        return seed
    if isinstance(seed, (int, np.integer)):
        return int(seed)
    if isinstance(seed, (list, tuple)):
        return as_int(seed)
    if getattr(seed, "is_meta", False):  # torch's shape inference: no values, nothing drawn
        return 0
    return as_int(ops.convert_to_numpy(seed).astype("int64").tolist())  # eager


def _jax_raw_key(seed):
    """``seed`` as a raw uint32 ``[2]`` key on JAX (None: the host stream's next)."""
    import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
    if seed is None:
        return _from_host(_global_next) if jax_tracing() else jnp.asarray(_global_next())
    if isinstance(seed, (int, np.integer, list, tuple)):
        return jnp.asarray([as_int(seed), 0], jnp.uint32)
    if isinstance(seed, keras.random.SeedGenerator):
        return ops.cast(seed.next(), "uint32")
    return ops.cast(seed, "uint32")


#: four salts that spread a seed ``[2]`` over the 128-bit state of XLA's RngBitGenerator
_SALTS = (0x9E3779B9, 0x7F4A7C15, 0x94D049BB, 0xBF58476D)


def random_bits(shape, seed: Seed, bits: int):
    """Uniform int32 draws in ``[0, 2^bits)`` (``bits <= 31``) of ``shape`` from ``seed``:
    ``keras.random.randint`` (``bits = 31``: ``[0, 2^31 - 1)``) on PyTorch and TensorFlow; on
    JAX the top ``bits`` of XLA's ``RngBitGenerator``, its 128-bit state the seed hashed once
    per salt (:func:`tie_keys.hash_seed`: successive seeds give unrelated streams)."""
    if not 1 <= bits <= 31:
        raise ValueError(f"`bits` must be in [1, 31]; got {bits}.")
    shape = tuple(shape)
    if not _on_jax():
        return keras.random.randint(shape, minval=0, maxval=min(2**bits, 2**31 - 1),
                                    dtype="int32", seed=_keras_seed(seed))
    import jax  # pylint: disable=import-outside-toplevel
    import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
    key = jax.lax.bitcast_convert_type(_jax_raw_key(seed), jnp.int32)
    salts = jax.lax.bitcast_convert_type(jnp.asarray(_SALTS, jnp.uint32), jnp.int32)
    state = tie_keys.hash_seed(arrays.load(arrays.backend.KERAS_OPS), key[0], key[1], salts)
    draws = jax.random.bits(jax.random.wrap_key_data(
        jax.lax.bitcast_convert_type(state, jnp.uint32), impl="rbg"), shape, jnp.uint32)
    return (draws >> (32 - bits)).astype(jnp.int32)

