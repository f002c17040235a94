"""Installs `tfr_extensions`, the only top-level package: the library, and the
repository's `pipelines/` folder as `tfr_extensions.pipelines` (its command-line
jobs, also installed as the console scripts of :data:`CONSOLE_SCRIPTS`). From a
checkout `python -m pipelines.<job>` runs the same code.

TensorFlow comes from one of three stack extras (pick exactly one):

* ``tf215``: TensorFlow 2.15 with TF-Ranking 0.5.5 (which pins TF < 2.16), numpy 1;
  ``pip install -e '.[tf215,test]' -c stacks/tf215.txt``.
* ``tf221``: TensorFlow 2.21 with Keras 2 as tf-keras 2.21 (run with
  ``TF_USE_LEGACY_KERAS=1``), numpy 2, no TF-Ranking;
  ``pip install -e '.[tf221,test]' -c stacks/tf221.txt``.
* ``keras3``: TensorFlow 2.21 with its default Keras 3 (nothing to set), keras-rs,
  numpy 2, no TF-Ranking; ``pip install -e '.[keras3,test]' -c stacks/keras3.txt``.

Without TensorFlow, one backend extra installs Keras 3 and that backend only (the
losses, metrics, scorers, evaluation, NumPy data path, ``gbdt`` and the jobs run there;
``tfr_extensions.keras_ops`` computes):

* ``jax``: Keras 3 on JAX (CPU); ``pip install -e '.[jax,test]' -c stacks/jax.txt``.
* ``torch``: Keras 3 on PyTorch, the CPU wheel (``torch==2.13.0+cpu`` in
  ``stacks/torch.txt``, as in ``stacks/keras3.txt``); ``pip install -e '.[torch,test]'
  -c stacks/torch.txt``.

The core (``install_requires``) is NumPy alone: with a stack or backend extra, the
losses, metrics, scorers, the LibSVM reader (NumPy's tokenizer; pandas' faster one when
pandas is installed) and ``RankingPyDataset`` work, and ``tfr_extensions.gbdt`` where
LightGBM is installed. Two more extras:

* ``jobs``: what the ``tfrx-*`` jobs need beside the core (:data:`JOBS`: pandas for
  their tables, SciPy for significance tests, matplotlib for plots, LightGBM for
  LambdaMART); a job started without it says so in one line. ``pip install
  'tfr_extensions[jax,jobs]'``.
* ``test``: pytest, and scikit-learn (the LibSVM loader our reader is checked and
  benchmarked against); the suites also need ``jobs``.

The ``stacks/*.txt`` constraint files pin the versions CI tests; ``make setup
STACK=...`` uses them and installs the stack's extra with ``jobs`` and ``test``.
"""
from setuptools import find_packages, setup

STACKS = {
    "tf215": [
        "tensorflow==2.15.*",
        "tensorflow-ranking==0.5.5",
        "tensorflow-serving-api==2.15.*",  # ExampleListWithContext / PredictRequest protos
        "numpy<2",
    ],
    "tf221": [
        # `tensorflow` only: tf-keras depends on it, so `tensorflow-cpu` as well
        # would download a second TensorFlow wheel.
        "tensorflow==2.21.*",
        "tf-keras==2.21.*",
        "tensorflow-serving-api==2.21.*",
        "tensorboard==2.21.*",  # no longer a dependency of TensorFlow since 2.20
        "numpy>=2",
    ],
    "keras3": [
        # TensorFlow 2.21's default Keras (tf.keras is Keras 3: nothing to set) and the
        # Keras team's ranking library beside it; no TF-Ranking.
        "tensorflow==2.21.*",
        "keras==3.*",
        "keras-rs==0.4.*",
        "tensorflow-serving-api==2.21.*",
        "tensorboard==2.21.*",
        "numpy>=2",
        # Keras 3's other backends, for tfr_extensions.keras_ops and its suite
        # (`make test-backends`): JAX (CPU, about 380 MB) and PyTorch's CPU wheel
        # (`torch==2.13.0+cpu` in stacks/keras3.txt: about 750 MB installed, 40-70 s;
        # the registry's default Linux wheel pulls gigabytes of CUDA libraries), and
        # Rax, the JAX peer of the benchmarks.
        "jax[cpu]",
        "torch",
        "rax==0.4.*",
    ],
}

#: installs without TensorFlow: Keras 3 and one backend (tfr_extensions.keras_ops, the
#: NumPy data path); ``pip install 'tfr_extensions[jax]'``
BACKENDS = {
    "jax": ["keras==3.*", "jax"],
    # PyTorch's CPU wheel comes from the constraints file (stacks/torch.txt pins
    # torch==2.13.0+cpu, as stacks/keras3.txt does); without it pip picks the registry's
    # default wheel (with CUDA on Linux), which works too.
    "torch": ["keras==3.*", "torch"],
}

#: what the jobs need beyond the core; pipelines/console.py's JOBS_EXTRA names the same
#: modules (tests/test_packaging.py checks), and a job started without one says so
JOBS = ["pandas", "scipy", "matplotlib", "lightgbm"]

#: console script -> job (a module of pipelines/, run by pipelines/console.py)
CONSOLE_SCRIPTS = {
    "tfrx-train": "train",
    "tfrx-lambdamart": "lambdamart",
    "tfrx-cv": "cross_validate",
    "tfrx-demo": "demo",
    "tfrx-rank-accuracy": "rank_accuracy",
    "tfrx-sampled-ranking-quality": "sampled_ranking_quality",
    "tfrx-export": "export",
}

setup(
    name="tfr_extensions",
    version="0.1.0",
    description=(
        "TF-Ranking extensions: twin-sigmoid direct metric optimization, SoftRank, "
        "WassRank, policy-gradient ranking, LETOR data and TF Serving export."
    ),
    python_requires=">=3.10,<3.14",
    packages=find_packages(include=["tfr_extensions", "tfr_extensions.*"])
    + ["tfr_extensions.pipelines"],
    package_dir={"tfr_extensions.pipelines": "pipelines"},
    entry_points={"console_scripts": [
        f"{script} = tfr_extensions.pipelines.console:{job}"
        for script, job in CONSOLE_SCRIPTS.items()]},
    # The core: NumPy; Keras and its backend (or TensorFlow) come with an extra.
    install_requires=["numpy"],
    # docs: the HTML API reference of `make docs` (pdoc, built on the keras3 stack)
    extras_require={**STACKS, **BACKENDS, "jobs": JOBS,
                    "test": ["pytest", "pytest-xdist", "scikit-learn"],
                    "docs": ["pdoc==16.*"]},
)
