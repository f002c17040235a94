# Everything runs inside .venv, created with Python 3.11 on first use.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup demo test bench clean

setup: $(STAMP)

$(STAMP): setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: setup
	$(PY) -m pipelines.demo

test: setup
	$(PY) -m pytest -q tests tfr_extensions --doctest-modules -p no:cacheprovider

bench: setup
	$(PY) -m benchmarks.loss_throughput

clean:
	rm -rf $(VENV) build *.egg-info
