"""Installs `tfr_extensions` (the library) and `pipelines` (its command-line jobs)."""
from setuptools import find_packages, setup

setup(
    name="tfr_extensions",
    version="0.1.0",
    description=(
        "TF-Ranking extensions: twin-sigmoid direct metric optimization, SoftRank, "
        "WassRank, policy-gradient ranking, LETOR data and TF Serving export."
    ),
    python_requires=">=3.11,<3.12",
    packages=find_packages(include=["tfr_extensions", "tfr_extensions.*", "pipelines", "pipelines.*"]),
    install_requires=[
        "tensorflow==2.15.*",
        "tensorflow-ranking==0.5.5",
        "tensorflow-serving-api==2.15.*",  # PredictRequest protos for the serving tests
        "numpy<2",
        "pandas",
        "scipy",
        "matplotlib",
        "lightgbm",
        "scikit-learn",  # the LibSVM loader our reader is benchmarked and checked against
    ],
    extras_require={"test": ["pytest"]},
)
