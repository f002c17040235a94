"""pipelines.trainable: every model a run trains, seen through one protocol."""
import pytest

from pipelines import cv_presets
from pipelines import resume
from pipelines import train
from pipelines import trainable


def config(loss, **loss_args):
    return train.TrainConfig(loss=loss, loss_args=loss_args, scorer="R2.L", hidden_units=4,
                             seed=3, learning_rate=0.01)


def test_a_loss_trains_one_scorer_that_serves_itself():
    model = train.build_trainable(config("ranknet"), num_features=5)
    assert isinstance(model, trainable.OneScorer) and model.scorer_names == ("",)
    assert model.scorers() == {"": model.model} and model.served == ""
    (name, (optimizer, variables)), = model.optimizers().items()
    assert name == "optimizer" and optimizer is model.model.optimizer
    assert float(optimizer.learning_rate.numpy()) == pytest.approx(0.01)
    assert len(variables) == len(model.model.trainable_variables)


@pytest.mark.parametrize("serve", [None, "generator"])
def test_irgan_trains_generator_then_discriminator_and_serves_its_serve_player(serve):
    loss_args = {"serve": serve} if serve else {}
    model = train.build_trainable(config("irgan_pair", **loss_args), num_features=5)
    gan = model.model
    assert isinstance(model, trainable.IRGANPlayers) and gan.mode == "pair"
    assert list(model.scorers()) == ["generator", "discriminator"] == list(model.scorer_names)
    assert model.scorers()["generator"] is gan.generator
    assert model.served == (serve or "discriminator") == gan.serve
    assert list(model.optimizers()) == ["d_optimizer", "g_optimizer"]
    assert model.optimizers()["g_optimizer"][0] is gan.g_optimizer


def test_the_config_the_run_backup_and_report_ask_one_place():
    assert trainable.scorer_names("irgan_list") == trainable.IRGANPlayers.scorer_names
    assert [cv_presets.METHODS[k].players for k in ("irgan_point", "ranknet", "lambdamart")] \
        == [("generator", "discriminator"), ("",), ("",)]
    assert trainable.SCORER_NAMES == ("", "generator", "discriminator")
    assert "test_per_query_generator.csv" in resume.OUTPUT_FILES
    assert train.TrainConfig(loss="irgan_list").loss == "irgan_list"
    for loss, loss_args in (("irgan_listwise", {}), ("irgan_list", {"mode": "point"})):
        with pytest.raises(ValueError, match="irgan_<mode>"):
            train.TrainConfig(loss=loss, loss_args=loss_args)
