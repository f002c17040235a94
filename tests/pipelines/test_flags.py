"""Flags generated from the config dataclasses: one per field, --help, round trips."""
import argparse
import dataclasses
from typing import Tuple

import pytest

from pipelines import cross_validate, cv_runner, demo, flags, lambdamart, rank_accuracy
from pipelines import train
from tfr_extensions import backend
from tfr_extensions import evaluation

#: jobs whose module does not import here (it imports TensorFlow, which is not installed):
#: their cases skip, saying why
UNAVAILABLE = {}
try:
    from pipelines import sampled_ranking_quality as srq
except ImportError as error:
    if backend.HAS_TENSORFLOW:
        raise
    srq = None
    UNAVAILABLE["sampled_ranking_quality"] = (
        f"pipelines.sampled_ranking_quality does not import without TensorFlow ({error})")

#: each job's config class, its parser, and a config with every field off its default
CASES = {
    "train": (train.TrainConfig, train.build_parser, lambda: train.TrainConfig(
        name="x", data="some/folder", fold=2, loss="twin_ap_type2",
        loss_args={"topn": 10, "alpha_b": 2.5}, scorer="CE4.L", hidden_units=8,
        batch_norm=False, epochs=3, batch_size=4, learning_rate=0.01, l2=0.0, list_size=50,
        seed=7, strategy="mirrored", output_dir="out", export_dir="exp/1",
        validation_metric="map@10", no_relevant="zero", drop_no_relevant=False,
        steps_per_epoch=5, test_curve=True, mixed_precision=True, jit_compile=True,
        tensorboard=False, verbose=2)),
    "lambdamart": (lambdamart.LambdaMARTConfig, lambdamart.build_parser,
                   lambda: lambdamart.LambdaMARTConfig(
                       name="x", data="d", fold=3, preset="small", params={"num_leaves": 63},
                       objective="twin_ndcg_type3", objective_args={"hessian": "lambdamart"},
                       num_boost_round=10, early_stopping_rounds=3, eval_at=10, seed=1,
                       num_threads=2, output_dir="o", no_relevant="one")),
    "cross_validate": (cv_runner.CVConfig, cross_validate.build_parser,
                       lambda: cv_runner.CVConfig(
                           name="n", data="d", folds=(2, 3),
                           methods=("ranknet", "twin_ndcg_type3[scorer=CE4.L;loss.alpha_b=2]"),
                           grid=cv_runner.parse_grid(["twin_*:learning_rate=0.001,0.01",
                                                      "twin_*:scorer=R4.L,CE4.L",
                                                      "lambdamart:objective=twin_ap_type1"]),
                           train=train.TrainConfig(epochs=2, batch_size=8, learning_rate=0.01,
                                                   l2=0.0), seeds=(1, 2), reference="twin_*",
                           lambdamart=lambdamart.LambdaMARTConfig(
                               preset="paper", num_boost_round=10, early_stopping_rounds=5,
                               num_threads=1), no_relevant="zero",
                           output_dir="o", report_dir="r")),
    "demo": (demo.DemoConfig, demo.build_parser,
             lambda: demo.DemoConfig(epochs=2, output_dir="o", export_dir="e/1", seed=1)),
    "rank_accuracy": (rank_accuracy.RankAccuracyConfig, rank_accuracy.build_parser,
                      lambda: rank_accuracy.RankAccuracyConfig(seed=1, quantize=20)),
}
if srq is not None:
    CASES["sampled_ranking_quality"] = (
        srq.QualityConfig, srq.build_parser, lambda: srq.QualityConfig(
            data="fold", output_dir="o", epochs=2, topn=5, num_samples=2, temperature=0.5,
            scorer="R2.L", hidden_units=8, batch_size=8, learning_rate=0.01, min_list_size=3,
            synthetic_queries=20, seed=1))
#: every job, those that do not import here skipped with the reason
#: fields a job's case above leaves at their defaults, with the reason (the round trip of such
#: a field off its default is tested in the job's own tests)
AT_DEFAULT = {"cross_validate": {"seed": "it excludes `seeds`, which the case sets "
                                         "(tests/pipelines/test_cross_validate.py)"}}
JOBS = [pytest.param(job, marks=pytest.mark.skipif(job in UNAVAILABLE,
                                                   reason=UNAVAILABLE.get(job, "")))
        for job in sorted(set(CASES) | set(UNAVAILABLE))]


@pytest.mark.parametrize("job", JOBS)
def test_every_field_has_a_documented_flag(job):
    config_class, build_parser, _ = CASES[job]
    parser = build_parser()
    options = {option: action for action in parser._actions for option in action.option_strings}
    config_flags = flags.config_flags(config_class)
    # every field has a flag, or (a template) flags for some of its fields
    assert {flag.path[0] for flag in config_flags} == \
        {field.name for field in dataclasses.fields(config_class)}
    for flag in config_flags:
        action = options[flags.flag_name(flag.name)]
        assert action.dest == flag.name and flag.help in " ".join(action.help.split())


@pytest.mark.parametrize("job", JOBS)
def test_flags_config_flags_round_trip(job):
    config_class, build_parser, make = CASES[job]
    config = make()
    default = config_class()
    assert [f.name for f in dataclasses.fields(config_class)
            if getattr(config, f.name) == getattr(default, f.name)] == \
        list(AT_DEFAULT.get(job, {}))  # covers every field
    argv = flags.config_to_argv(config)
    again = flags.config_from_args(config_class, build_parser().parse_args(argv))
    assert again == config and flags.config_to_argv(again) == argv
    assert flags.config_from_args(config_class, build_parser().parse_args([])) == default
    assert flags.config_to_argv(default) == []


@pytest.mark.parametrize("main", [train.main, lambdamart.main, cross_validate.main,
                                  pytest.param(srq and srq.main, marks=pytest.mark.skipif(
                                      srq is None, reason=UNAVAILABLE.get(
                                          "sampled_ranking_quality", ""))),
                                  demo.main, rank_accuracy.main])
def test_help_works(main, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0 and "--" in capsys.readouterr().out


def test_choices_come_from_the_code_and_aliases_parse(capsys):
    parser = train.build_parser()
    for rule in evaluation.NO_RELEVANT_RULES:
        assert train.parse_args(["--no-relevant", rule]).no_relevant == rule
    with pytest.raises(SystemExit):
        parser.parse_args(["--no-relevant", "drop"])
    assert "invalid choice" in capsys.readouterr().err
    assert train.parse_args(["--keep-no-relevant"]).drop_no_relevant is False
    assert train.parse_args(["--no-drop-no-relevant"]).drop_no_relevant is False
    assert train.parse_args(["--no-batch-norm", "--batch-norm"]).batch_norm is True  # last wins
    assert lambdamart.parse_args(["--preset", "seeds"]).preset == "paper"
    config, _ = cross_validate.parse_args(["--methods", "lambdamart_seeds", "--grid",
                                           "lambdamart*:num_leaves=7,15", "--grid",
                                           "lambdamart*:preset=small"])
    assert config.methods == ("lambdamart_paper",)
    assert config.grid == (("lambdamart*", "num_leaves", (7, 15)),
                           ("lambdamart*", "preset", ("small",)))


def test_a_field_without_documentation_or_flag_type_is_refused():
    @dataclasses.dataclass(frozen=True)
    class Undocumented:
        """No Attributes section."""

        epochs: int = 1

    @dataclasses.dataclass(frozen=True)
    class Unflaggable:
        """A config.

        Attributes:
          pairs: pairs of ints.
        """

        pairs: Tuple[Tuple[int, int], ...] = ()

    with pytest.raises(ValueError, match="Undocumented.epochs"):
        flags.add_config_flags(argparse.ArgumentParser(), Undocumented)
    with pytest.raises(TypeError, match="pairs"):
        flags.add_config_flags(argparse.ArgumentParser(), Unflaggable)


def test_template_fields_flags_map_to_nested_fields():
    """CVConfig's training settings are a TrainConfig and a LambdaMARTConfig; the old flags
    set their fields, with the nested fields' types, choices and help."""
    config, _ = cross_validate.parse_args(["--epochs", "3", "--lambdamart-rounds", "7",
                                           "--lambdamart-preset", "seeds", "--num-threads", "2"])
    assert config.train == train.TrainConfig(epochs=3)
    assert config.lambdamart == lambdamart.LambdaMARTConfig(preset="paper", num_boost_round=7,
                                                            num_threads=2)
    assert flags.config_to_argv(config) == ["--epochs", "3", "--lambdamart-preset", "paper",
                                            "--lambdamart-rounds", "7", "--num-threads", "2"]
    help_text = " ".join(cross_validate.build_parser().format_help().split())
    assert "--epochs EPOCHS neural methods: training epochs. (default: 30)" in help_text
    assert flags.with_flags(config, lambdamart_rounds=9, seed=4) == dataclasses.replace(
        config, seed=4, lambdamart=dataclasses.replace(config.lambdamart, num_boost_round=9))
    with pytest.raises(TypeError, match="num_boost_round"):
        flags.with_flags(config, num_boost_round=9)  # a field without a flag of its own
    # a template field without a flag cannot be written as flags
    with pytest.raises(ValueError, match="hidden_units"):
        flags.config_to_argv(cv_runner.CVConfig(train=train.TrainConfig(hidden_units=8)))
