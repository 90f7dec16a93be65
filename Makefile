# pallas-verify: `make demo` and `make test` bootstrap .venv themselves.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The first candidate that actually runs and is >= 3.12 (a pyenv shim may exist but fail).
PYTHON312 := $(shell for py in python3.12 /root/.pyenv/versions/3.12.1/bin/python3; do \
  $$py -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1 && { command -v $$py; break; }; done)
PYTEST_WORKERS ?= auto
# The JAX release of .venv, and the other supported releases `make test-jax` runs the
# suite's core on, each in its own venv (.venvs/jax-VERSION), built from this file alone.
JAX ?= 0.12.0.1
JAX_OTHERS ?= 0.10.2 0.11.2
EXTRAS := tpu,gpu,dev,cluster
EXTRAS_OTHERS := tpu
comma := ,

.PHONY: demo test test-fast test-jax test-corpus bench lint clean redis-server chromium

# $(call venv,DIR,JAX_RELEASE,EXTRAS): a Python >= 3.12 venv at DIR with the project installed.
define venv
	@if [ ! -x $(1)/bin/python ]; then \
	  if [ -z "$(PYTHON312)" ]; then \
	    echo "error: Python 3.12 not found: install python3.12 on PATH (or at /root/.pyenv/versions/3.12.1/bin/python3)" >&2; exit 1; \
	  fi; \
	  $(PYTHON312) -m venv $(1); \
	fi
	@$(1)/bin/python -c 'import sys; sys.exit(sys.version_info < (3, 12))' || { echo "error: $(1) is not Python >= 3.12; run 'make clean' and retry" >&2; exit 1; }
	$(1)/bin/python -m pip install --quiet --upgrade pip
	$(1)/bin/python -m pip install --quiet -e '.[$(3)]' 'jax==$(2)' 'jaxlib==$(2)'
	@# Bytecode for the project's own packages, as pip writes it for an installed wheel: an
	@# editable install has none, and where bytecode is not written (PYTHONDONTWRITEBYTECODE)
	@# every process would compile them again.
	$(1)/bin/python -m compileall -q -j 0 pallas_verify strategies reference_kernels benchmarks
	@touch $(1)/.installed
endef

$(STAMP): pyproject.toml Makefile
	$(call venv,$(VENV),$(JAX),$(EXTRAS))

.venvs/jax-%/.installed: pyproject.toml Makefile
	$(call venv,.venvs/jax-$*,$*,$(EXTRAS_OTHERS))

# The third-party corpus (docs/thirdparty.md) in its own venv: its libraries pull in their
# own dependencies, which .venv does not need. Not part of `make test` (CI): the extra
# installs in about 2 minutes on top of the project, and the test takes 11 to 15.
.venvs/corpus/.installed: pyproject.toml Makefile
	$(call venv,.venvs/corpus,$(JAX),$(EXTRAS_OTHERS)$(comma)corpus)

demo: $(STAMP)
	$(VENV)/bin/pallas-verify backends
	$(VENV)/bin/pallas-verify demo

# The shared-example-database tests need Debian's redis-server: installed here when
# missing and we may (root with apt-get); otherwise those tests skip saying so.
redis-server:
	@command -v redis-server >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  apt-get update -qq && apt-get install -y -qq redis-server >/dev/null; } || true

# The HTML report's tests load each page in Debian's headless chromium: installed here the
# same way; without it those tests skip saying so.
chromium:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } || true

# loadgroup: the tests of one xdist_group (one Ray cluster, one Redis server) share a worker.
test: $(STAMP) redis-server chromium
	$(PY) tests/run_suite.py -n $(PYTEST_WORKERS) --dist loadgroup

test-fast: $(STAMP)
	$(PY) tests/run_suite.py -n $(PYTEST_WORKERS) --dist loadgroup -m "not slow"

# The suite's core (tests marked jax_matrix) under every other supported JAX release, then
# the version matrix itself (tests marked jax_versions) from .venv across those releases.
test-jax: $(STAMP) $(foreach v,$(JAX_OTHERS),.venvs/jax-$(v)/.installed)
	@set -e; for v in $(JAX_OTHERS); do \
	  echo "== the suite's core under jax $$v"; \
	  .venvs/jax-$$v/bin/python tests/run_suite.py -n $(PYTEST_WORKERS) --dist loadgroup -m jax_matrix; \
	done
	@echo "== the JAX-version matrix from $(VENV) (jax $(JAX))"
	$(PY) tests/run_suite.py -n $(PYTEST_WORKERS) --dist loadgroup -m jax_versions

# The corpus's recorded verdicts (tests/catalog/test_thirdparty.py), with its libraries.
test-corpus: .venvs/corpus/.installed
	.venvs/corpus/bin/python -m pytest tests/catalog/test_thirdparty.py -q

bench: $(STAMP)
	$(PY) -m benchmarks.run

lint: $(STAMP)
	$(VENV)/bin/ruff check pallas_verify strategies reference_kernels tests benchmarks

clean:
	rm -rf $(VENV) .venvs pv-out .hypothesis
