# Everything runs inside a virtualenv per stack, created with Python 3.11 on first use:
#   make test                 the default stack tf215: .venv, TF 2.15 + TF-Ranking 0.5.5, numpy 1
#   make test STACK=tf221     .venv-tf221: TF 2.21 + tf-keras 2.21 (Keras 2), numpy 2, no TF-Ranking
#   make test STACK=keras3    .venv-keras3: TF 2.21 with its default Keras 3 + keras-rs, numpy 2,
#                             then the keras.ops suite on Keras's JAX and PyTorch backends
#                             (make test-backends)
#   make test STACK=jax       .venv-jax: Keras 3 on JAX (CPU), no TensorFlow (pip install -e '.[jax,test]')
#   make test STACK=torch     .venv-torch: Keras 3 on PyTorch (CPU wheel), no TensorFlow
#                             ('.[torch,test]'): the backend-neutral suite (NEUTRAL_SUITE), as
#                             users install it
# Tests that cross stacks run with TFRX_CROSS_STACK=1 once every stack is set up (.ci/run).
# The versions are pinned by stacks/$(STACK).txt (pip constraints) and the setup.py extra $(STACK);
# setup installs it with the extras jobs (pandas, SciPy, matplotlib, LightGBM) and test.
PYTHON ?= python3.11
STACK ?= tf215

ifeq ($(STACK),tf215)
VENV := .venv
else ifeq ($(STACK),tf221)
VENV := .venv-tf221
# TF >= 2.16 maps tf.keras to Keras 3 unless told to use tf-keras (Keras 2).
export TF_USE_LEGACY_KERAS := 1
else ifeq ($(STACK),keras3)
VENV := .venv-keras3
# tf.keras is Keras 3 as TensorFlow ships it: nothing to set, and nothing inherited.
unexport TF_USE_LEGACY_KERAS
else ifneq ($(filter $(STACK),jax torch),)
# Keras 3 on JAX or PyTorch without TensorFlow, installed as a user installs it.
VENV := .venv-$(STACK)
export KERAS_BACKEND := $(STACK)
unexport TF_USE_LEGACY_KERAS
else
$(error Unknown STACK '$(STACK)': use tf215 (default), tf221, keras3, jax or torch)
endif

PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# pip installs without compiling every module of every package (--no-compile: two thirds of
# a stack's set-up time, most of them modules nothing imports); Python writes the bytecode
# of what is imported, on first import, also where the environment says not to.
PIP_INSTALL := -m pip install --quiet --no-compile
unexport PYTHONDONTWRITEBYTECODE

# The keras.ops implementation's suite, run by test-backends on the two Keras 3 backends
# that compute with it, JAX and PyTorch (on the TensorFlow backend the losses compute
# with TensorFlow's ops; tests/keras_ops/conftest.py).
BACKEND_SUITE := tests/keras_ops tfr_extensions/keras_ops tfr_extensions/data/dense.py
# pytest-xdist runs the suite in WORKERS processes (auto: one per core, at most 4: a
# TensorFlow worker reaches 4-5 GB), each test file whole in one of them (its module
# fixtures built once); the 15 slowest tests are listed.
WORKERS ?= auto
PYTEST := -m pytest -q --doctest-modules -p no:cacheprovider -n $(WORKERS) --maxprocesses 4 \
    --dist loadfile --durations=15
# The backend-neutral suite, what the stacks without TensorFlow (jax, torch) run:
# tests/neutral (every Keras 3 backend, with or without TensorFlow), the test files that
# import no TensorFlow (their TensorFlow comparisons skip, saying so), and the doctests of
# the package and the jobs (the root conftest.py leaves out the TensorFlow modules). The
# TensorFlow stacks run all of it inside their whole suite.
NEUTRAL_SUITE := tests/neutral \
    tests/data/test_libsvm.py tests/data/test_libsvm_group_files.py \
    tests/data/test_cache.py tests/data/test_cache_damage.py tests/data/test_checksum.py \
    tests/data/test_synthetic.py tests/ops/test_vocabulary.py tests/test_gbdt.py \
    tests/pipelines/test_common.py tests/pipelines/test_flags.py \
    tests/pipelines/test_callbacks.py tests/pipelines/test_rank_accuracy.py \
    tests/pipelines/test_backup_damage.py tests/pipelines/test_cv_damage.py \
    tfr_extensions pipelines

.PHONY: setup demo test test-backends bench docs clean

setup: $(STAMP)

$(STAMP): setup.py stacks/$(STACK).txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) $(PIP_INSTALL) --upgrade pip
	$(PY) $(PIP_INSTALL) -c stacks/$(STACK).txt -e '.[$(STACK),jobs,test]'
	touch $(STAMP)

demo: setup
	$(PY) -m pipelines.demo

test: setup
ifneq ($(filter $(STACK),jax torch),)
	$(PY) $(PYTEST) $(NEUTRAL_SUITE)
else
	$(PY) $(PYTEST) tests tfr_extensions pipelines benchmarks
	if [ "$(STACK)" = keras3 ]; then $(MAKE) --no-print-directory test-backends; fi
endif

test-backends: setup
	test "$(STACK)" = keras3 || { echo "test-backends needs STACK=keras3"; exit 2; }
	for backend in jax torch; do \
	    echo "=== keras.ops suite on Keras's $$backend backend"; \
	    KERAS_BACKEND=$$backend $(PY) $(PYTEST) $(BACKEND_SUITE) || exit 1; \
	done

bench: setup
	$(PY) -m benchmarks.loss_throughput

# The HTML API reference, docs/api/index.html, written by pdoc from the docstrings (Google
# style, reST roles and :math:, MathJax). Built on the keras3 stack, where every module
# imports (TensorFlow, Keras 3, JAX, PyTorch) but tfr_extensions.tfranking and its old name
# tfr_extensions.pipeline (TF-Ranking: tf215 only), which are left out. The build fails when
# a module does not import (pdoc exits 1), and, through the -W filters, on what pdoc
# otherwise only warns about: a docstring it cannot convert (pdoc.docstrings), an
# annotation it cannot resolve (pdoc.doc_types), a name of __all__ that does not resolve
# (pdoc.doc). Markup pdoc cannot read (a :math: role broken over lines, say) is shown as
# written: check the page.
# Two parts: what users import (docs/api/index.html: the package's outline, then each public
# namespace by its __all__, and the jobs), and the implementation apart
# (docs/api/implementation/: the array namespace, the per-framework primitives, the
# checks, the TensorFlow strategies), so that the internals do not stand beside the
# public names.
INTERNALS := arrays|keras_ops|torch_ops|compat|evaluation_state|strategies
DOCS_MODULES := tfr_extensions '!tfr_extensions\.(pipeline|tfranking)$$' \
    '!tfr_extensions\.($(INTERNALS))' '!tfr_extensions\.ops\.' pipelines
IMPLEMENTATION_MODULES := $(foreach m,$(subst |, ,$(INTERNALS)),tfr_extensions.$(m)) \
    tfr_extensions.ops '!tfr_extensions\.ops$$'
PDOC_WARNINGS := -W error:::pdoc.doc -W error:::pdoc.docstrings -W error:::pdoc.doc_types \
    -W "default:Couldn't import tfr_extensions.tfranking" \
    -W "default:Couldn't import tfr_extensions.pipeline"

ifneq ($(STACK),keras3)
docs:
	$(MAKE) --no-print-directory docs STACK=keras3
else
docs: $(VENV)/.docs-installed
	rm -rf docs/api
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) $(PDOC_WARNINGS) -m pdoc --docformat google --math \
	    -o docs/api $(DOCS_MODULES)
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) $(PDOC_WARNINGS) -m pdoc --docformat google --math \
	    -o docs/api/implementation $(IMPLEMENTATION_MODULES)
	@echo "API reference: docs/api/index.html"
endif

$(VENV)/.docs-installed: $(STAMP)
	$(PY) $(PIP_INSTALL) -c stacks/$(STACK).txt -e '.[$(STACK),jobs,test,docs]'
	touch $@

clean:
	rm -rf .venv .venv-tf221 .venv-keras3 .venv-jax .venv-torch build *.egg-info
