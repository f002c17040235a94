"""What a training run's ``loss`` trains: its model, the scorers to train, the scorer to serve.

Every model :func:`pipelines.train.run` fits is seen through one small
protocol, :class:`Trainable`, and never asked what it is:

* :meth:`~Trainable.scorers`: the scorers it trains, by name and in report
  order; each is selected at its own best validation epoch and evaluated;
* :attr:`~Trainable.served`: the name of the scorer it serves (reported first,
  exported);
* :meth:`~Trainable.optimizers`: each optimizer with the variables it trains,
  by checkpoint name (for the run's backup).

A ``loss`` name picks the kind (:func:`model_kind`): any ``tfrx.losses.get``
name trains :class:`OneScorer` (trains and serves itself, named ``""``);
``irgan_<mode>`` trains :class:`IRGANPlayers` (an IRGAN: its generator and
discriminator, in that order, serving the discriminator unless ``loss_args``
say ``serve``). A kind's class is also its builder (``build``), the names of
its scorers (``scorer_names``) and the check of its ``loss_args``
(``check_loss``), so that the config, the run, its backup and the
cross-validation report ask one place.

>>> scorer_names("ranknet"), scorer_names("irgan_pair")
(('',), ('generator', 'discriminator'))
>>> player_suffix(""), player_suffix("generator")
('', '_generator')
"""
import inspect
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Type

import tfr_extensions as tfrx
from tfr_extensions import backend
from tfr_extensions.backend import keras

#: ``loss`` names ``irgan_<mode>`` train an IRGAN of two scorers (:class:`IRGANPlayers`)
IRGAN_PREFIX = "irgan_"
#: IRGAN's modes and players (``tfr_extensions.adversarial.irgan.MODES`` and ``PLAYERS``,
#: named here so that a run's files are known without TensorFlow; a test holds them equal)
IRGAN_MODES = ("point", "pair", "list")
IRGAN_PLAYERS = ("generator", "discriminator")
#: ``make_scorer(name)``: a fresh, uncompiled scorer of the run's config named ``name``
ScorerFactory = Callable[[Optional[str]], keras.Model]


def jit_compile(config: Any) -> bool:
    """Keras's ``jit_compile`` for ``config``: its ``jit_compile`` (XLA) on TensorFlow and
    PyTorch (``torch.compile``); always on JAX, whose steps Keras compiles with
    ``jax.jit`` (an uncompiled JAX step dispatches every op on its own)."""
    return True if backend.backend_name() == "jax" else bool(config.jit_compile)


def player_suffix(player: str) -> str:
    """``""`` -> ``""``; ``"generator"`` -> ``"_generator"`` (file names, history keys)."""
    return f"_{player}" if player else ""


def build_loss(name: str, loss_args: Mapping[str, Any], seed: int) -> keras.losses.Loss:
    """``tfrx.losses.get(name, **loss_args)``; seeded with ``seed`` if it takes one."""
    loss = tfrx.losses.get(name, **loss_args)
    if "seed" not in loss_args and "seed" in inspect.signature(type(loss).__init__).parameters:
        loss = tfrx.losses.get(name, **{**loss_args, "seed": seed})
    return loss


class Trainable:
    """The protocol: a compiled Keras ``model`` that ``fit`` trains, with the scorers
    to train and the scorer to serve. Subclasses are the kinds of model."""

    #: the names of :meth:`scorers`, in report order
    scorer_names: Tuple[str, ...] = ("",)

    def __init__(self, model: keras.Model):
        self.model = model

    @classmethod
    def check_loss(cls, loss: str, loss_args: Mapping[str, Any]) -> None:
        """ValueError for a ``loss`` name or ``loss_args`` this kind cannot train."""

    @classmethod
    def build(cls, config: Any, make_scorer: ScorerFactory) -> "Trainable":
        """The compiled model of ``config`` (a ``TrainConfig``; call inside the strategy
        scope)."""
        raise NotImplementedError

    def scorers(self) -> Dict[str, keras.Model]:
        """The scorers trained, by name (:attr:`scorer_names`, in that order)."""
        raise NotImplementedError

    @property
    def served(self) -> str:
        """The name (in :meth:`scorers`) of the scorer served: reported first, exported."""
        raise NotImplementedError

    def optimizers(self) -> Dict[str, Tuple[Any, List[Any]]]:
        """Each optimizer with the variables it trains, by checkpoint name."""
        raise NotImplementedError


class OneScorer(Trainable):
    """A scorer compiled with ``config.loss``, Adam and a training nDCG@5: it trains and
    serves itself (named ``""``); its optimizer is ``"optimizer"``. On JAX a loss that
    draws seeds trains through :class:`tfr_extensions.models.TrainingModel`, so that
    Keras's trainer threads its random state through each jitted step (no host
    callback per step); the scorer is what the run evaluates, saves and serves."""

    def __init__(self, model: keras.Model, scorer: Optional[keras.Model] = None):
        super().__init__(model)
        self.scorer = model if scorer is None else scorer

    @classmethod
    def build(cls, config: Any, make_scorer: ScorerFactory) -> "OneScorer":
        scorer = make_scorer(None)
        loss = build_loss(config.loss, config.loss_args, config.seed)
        seeded = bool(tfrx.models.TrainingModel.seed_generators_of(loss))
        model = (tfrx.models.TrainingModel(scorer, loss)
                 if seeded and backend.backend_name() == "jax" else scorer)
        model.compile(optimizer=keras.optimizers.Adam(config.learning_rate), loss=loss,
                      metrics=[tfrx.metrics.RankingMetric("ndcg", topn=5)],
                      jit_compile=jit_compile(config))
        return cls(model, scorer)

    def scorers(self) -> Dict[str, keras.Model]:
        return {"": self.scorer}

    @property
    def served(self) -> str:
        return ""

    def optimizers(self) -> Dict[str, Tuple[Any, List[Any]]]:
        return {"optimizer": (self.model.optimizer, self.model.trainable_variables)}


class IRGANPlayers(Trainable):
    """An :class:`tfr_extensions.adversarial.IRGAN` of two scorers of the config,
    ``loss_args`` as its keyword arguments (seeded with ``seed`` unless they say
    otherwise), each player with Adam at ``learning_rate``: it trains the
    ``generator`` and the ``discriminator`` (:data:`~tfr_extensions.adversarial.irgan.PLAYERS`),
    serves its ``serve`` player; optimizers ``d_optimizer`` and ``g_optimizer``."""

    scorer_names = IRGAN_PLAYERS

    @classmethod
    def check_loss(cls, loss: str, loss_args: Mapping[str, Any]) -> None:
        if not backend.uses_tensorflow_ops():
            raise ValueError(f"`loss` {loss!r} trains an IRGAN, a TensorFlow program; this "
                             f"process runs {backend.describe()}. Run it with "
                             "KERAS_BACKEND=tensorflow (TensorFlow installed), or train a "
                             "loss of tfrx.losses.names(), which run on every backend.")
        if loss[len(IRGAN_PREFIX):] not in IRGAN_MODES or "mode" in loss_args:
            raise ValueError(f"`loss` irgan_<mode> must have a mode in {list(IRGAN_MODES)} "
                             f"and no 'mode' in `loss_args`; got {loss!r} with "
                             f"{dict(loss_args)!r}.")

    @classmethod
    def build(cls, config: Any, make_scorer: ScorerFactory) -> "IRGANPlayers":
        from tfr_extensions.adversarial import irgan  # pylint: disable=import-outside-toplevel
        model = irgan.IRGAN(make_scorer("generator"), make_scorer("discriminator"),
                            **{"seed": config.seed, **config.loss_args,
                               "mode": config.loss[len(IRGAN_PREFIX):]})
        model.compile(d_optimizer=keras.optimizers.Adam(config.learning_rate),
                      g_optimizer=keras.optimizers.Adam(config.learning_rate),
                      jit_compile=config.jit_compile)
        return cls(model)

    def scorers(self) -> Dict[str, keras.Model]:
        return {player: self.model.player(player) for player in self.scorer_names}

    @property
    def served(self) -> str:
        return self.model.serve

    def optimizers(self) -> Dict[str, Tuple[Any, List[Any]]]:
        return {"d_optimizer": (self.model.d_optimizer,
                                self.model.discriminator.trainable_variables),
                "g_optimizer": (self.model.g_optimizer,
                                self.model.generator.trainable_variables)}


#: every kind of model, the one-scorer kind first
KINDS: Tuple[Type[Trainable], ...] = (OneScorer, IRGANPlayers)
#: every scorer name a run can report (its per-query files carry the names)
SCORER_NAMES = tuple(dict.fromkeys(name for kind in KINDS for name in kind.scorer_names))


def model_kind(loss: str) -> Type[Trainable]:
    """The kind of model ``loss`` trains: :class:`IRGANPlayers` for ``irgan_<mode>``,
    else :class:`OneScorer`."""
    return IRGANPlayers if str(loss).startswith(IRGAN_PREFIX) else OneScorer


def scorer_names(loss: str) -> Tuple[str, ...]:
    """The names of the scorers ``loss`` trains, in report order."""
    return model_kind(loss).scorer_names
