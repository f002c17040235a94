"""Installs `tfr_extensions` (the library) and `pipelines` (its command-line jobs).

TensorFlow comes from one of three stack extras (pick exactly one):

* ``tf215``: TensorFlow 2.15 with TF-Ranking 0.5.5 (which pins TF < 2.16), numpy 1;
  ``pip install -e '.[tf215,test]' -c stacks/tf215.txt``.
* ``tf221``: TensorFlow 2.21 with Keras 2 as tf-keras 2.21 (run with
  ``TF_USE_LEGACY_KERAS=1``), numpy 2, no TF-Ranking;
  ``pip install -e '.[tf221,test]' -c stacks/tf221.txt``.
* ``keras3``: TensorFlow 2.21 with its default Keras 3 (nothing to set), keras-rs,
  numpy 2, no TF-Ranking; ``pip install -e '.[keras3,test]' -c stacks/keras3.txt``.

The ``stacks/*.txt`` constraint files pin the versions CI tests; ``make setup
STACK=...`` uses them.
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
        # JAX (CPU, about 380 MB): the tests check that a Keras 3 process on another
        # backend gets clear errors; the backend-neutral implementation will run on it.
        "jax[cpu]",
    ],
}

setup(
    name="tfr_extensions",
    version="0.1.0",
    description=(
        "TF-Ranking extensions: twin-sigmoid direct metric optimization, SoftRank, "
        "WassRank, policy-gradient ranking, LETOR data and TF Serving export."
    ),
    python_requires=">=3.10,<3.14",
    packages=find_packages(include=["tfr_extensions", "tfr_extensions.*", "pipelines", "pipelines.*"]),
    install_requires=[
        "tensorflow>=2.15,<2.22",
        "numpy",
        "pandas",
        "scipy",
        "matplotlib",
        "lightgbm",
        "scikit-learn",  # the LibSVM loader our reader is benchmarked and checked against
    ],
    extras_require={**STACKS, "test": ["pytest"]},
)
