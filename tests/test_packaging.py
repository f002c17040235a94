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


def _setup_call() -> dict:
    """The keyword arguments of setup.py's ``setup(...)`` call and its module constants,
    read without running it."""
    import ast
    with open(os.path.join(REPOSITORY, "setup.py")) as f:
        tree = ast.parse(f.read())
    constants = {node.targets[0].id: ast.literal_eval(node.value) for node in tree.body
                 if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                 and isinstance(node.value, (ast.List, ast.Dict, ast.Constant))}
    (call,) = [node.value for node in tree.body if isinstance(node, ast.Expr)
               and isinstance(node.value, ast.Call) and getattr(node.value.func, "id", "") == "setup"]
    keywords = {k.arg: k.value for k in call.keywords}
    return dict(constants, install_requires=ast.literal_eval(keywords["install_requires"]))


def test_the_core_needs_numpy_alone_and_the_jobs_extra_is_what_the_jobs_check():
    setup = _setup_call()
    assert setup["install_requires"] == ["numpy"]
    assert setup["JOBS"] == list(console.JOBS_EXTRA)  # one name: module = distribution


#: the core as a user installs it: a process where the jobs' and tests' packages do not
#: import reads LibSVM, batches, scores and computes a loss and a metric (SciPy stays
#: importable on JAX, which depends on it)
_CORE_WITHOUT_JOBS = r"""
import os, sys
for name in ("pandas", "scipy", "matplotlib", "lightgbm", "sklearn"):
    if name != "scipy" or os.environ.get("KERAS_BACKEND") != "jax":
        sys.modules[name] = None  # `import pandas` fails, as in `pip install tfr_extensions[jax]`
import numpy as np
import tfr_extensions as tfrx
path = sys.argv[1]
with open(path, "w") as f:
    f.write("2 qid:1 1:0.5 2:1\n0 qid:1 1:3 2:0\n1 qid:2 1:1 2:2\n")
data = tfrx.data.read_libsvm(path, cache=False)
features, labels = tfrx.data.RankingPyDataset(data, batch_size=2)[0]
scores = tfrx.models.scorer("R2.L", 2, hidden_units=4)(features)
loss = tfrx.losses.get("twin_ndcg_type3", seed=0)(labels, scores)
ndcg = tfrx.metrics.ndcg(labels, scores, topn=2)
summary = tfrx.evaluation.evaluate_summary(data.labels, np.zeros(3), data.query_offsets,
                                           topns=(2,), metrics=("ndcg",))
assert np.isfinite(float(loss)) and summary["num_counted"] == 2, (loss, summary)
try:
    tfrx.evaluation.evaluate(data.labels, np.zeros(3), data.query_offsets)
except ImportError as error:
    assert "tfr_extensions[jobs]" in str(error), error
else:
    raise AssertionError("evaluate made a table without pandas")
print("core ok")
"""


def test_the_core_works_without_the_jobs_packages(tmp_path):
    result = subprocess.run([sys.executable, "-c", _CORE_WITHOUT_JOBS, str(tmp_path / "f.txt")],
                            cwd=REPOSITORY, capture_output=True, text=True, check=False,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0 and "core ok" in result.stdout, result.stderr[-3000:]


@pytest.mark.parametrize("how", ["console script", "python -m"])
def test_a_job_without_the_jobs_extra_exits_with_one_line_naming_it(how):
    start = ("from pipelines import console; console.train()" if how == "console script"
             else "import runpy; runpy._run_module_as_main('pipelines.train')")
    code = ("import sys; sys.modules['scipy'] = sys.modules['lightgbm'] = None;"
            f"sys.argv = ['{'tfrx-train' if how == 'console script' else '-m'}', '--help']; "
            + start)
    result = subprocess.run([sys.executable, "-c", code], cwd=REPOSITORY, capture_output=True,
                            text=True, check=False)
    assert result.returncode == 1 and result.stdout == "", result
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.endswith("needs scipy, lightgbm, which the jobs extra installs: "
                                  "pip install 'tfr_extensions[jobs]'\n"), result.stderr
