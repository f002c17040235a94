"""The built wheel installs one top-level package, ``tfr_extensions``, with the
pipelines as ``tfr_extensions.pipelines`` and a console script per job."""
import configparser
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from pipelines import console

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel, built from a copy of the sources (setuptools writes build/ beside
    them, and the CI lanes run this at the same time)."""
    source, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("wheel")
    shutil.copy(os.path.join(REPOSITORY, "setup.py"), source)
    for package in ("tfr_extensions", "pipelines"):
        shutil.copytree(os.path.join(REPOSITORY, package), source / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps",
                    "--no-build-isolation", "--quiet", "-w", str(out)], check=True,
                   cwd=str(out))
    (path,) = out.glob("*.whl")
    return path


def test_the_wheel_has_one_top_level_package_and_the_pipelines_under_it(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names} == {
        "tfr_extensions", "tfr_extensions-0.1.0.dist-info"}
    jobs = {name.split("/")[-1] for name in names if name.startswith("tfr_extensions/pipelines/")}
    assert jobs == {name for name in os.listdir(os.path.join(REPOSITORY, "pipelines"))
                    if name.endswith(".py")}


def test_every_console_script_runs_a_job_of_the_installed_package(wheel, tmp_path):
    entry_points = configparser.ConfigParser()
    (entry_file,) = [n for n in zipfile.ZipFile(wheel).namelist()
                     if n.endswith("entry_points.txt")]
    entry_points.read_string(zipfile.ZipFile(wheel).read(entry_file).decode())
    scripts = dict(entry_points["console_scripts"])
    assert {"tfrx-train", "tfrx-cv", "tfrx-lambdamart", "tfrx-demo"} <= set(scripts)
    for target in scripts.values():
        module, function = target.split(":")
        assert module == "tfr_extensions.pipelines.console" and callable(getattr(console, function))
    # Installed elsewhere and run from a folder without the checkout: the relative imports
    # of the pipelines resolve inside tfr_extensions.
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target",
                    str(site), str(wheel)], check=True)
    env = {**os.environ, "PYTHONPATH": str(site), "TF_CPP_MIN_LOG_LEVEL": "3"}
    result = subprocess.run(
        [sys.executable, "-s", "-c",
         "import sys; sys.argv = ['tfrx-train', '--help'];"
         "from tfr_extensions.pipelines import console, train;"
         "assert 'site' in train.__file__ and 'pipelines' not in sys.modules;"
         "console.train()"],
        cwd=str(tmp_path), env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "--loss" in result.stdout
