# pallas-verify: `make demo` and `make test` bootstrap .venv themselves.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The first candidate that actually runs and is >= 3.12 (a pyenv shim may exist but fail).
PYTHON312 := $(shell for py in python3.12 /root/.pyenv/versions/3.12.1/bin/python3; do \
  $$py -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1 && { command -v $$py; break; }; done)
PYTEST_WORKERS ?= auto

.PHONY: demo test test-fast bench lint clean redis-server

$(STAMP): pyproject.toml
	@if [ ! -x $(PY) ]; then \
	  if [ -z "$(PYTHON312)" ]; then \
	    echo "error: Python 3.12 not found: install python3.12 on PATH (or at /root/.pyenv/versions/3.12.1/bin/python3)" >&2; exit 1; \
	  fi; \
	  $(PYTHON312) -m venv $(VENV); \
	fi
	@$(PY) -c 'import sys; sys.exit(sys.version_info < (3, 12))' || { echo "error: $(VENV) is not Python >= 3.12; run 'make clean' and retry" >&2; exit 1; }
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[tpu,gpu,dev,cluster]'
	@touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/pallas-verify backends
	$(VENV)/bin/pallas-verify demo

# The shared-example-database tests need Debian's redis-server: installed here when
# missing and we may (root with apt-get); otherwise those tests skip saying so.
redis-server:
	@command -v redis-server >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  apt-get update -qq && apt-get install -y -qq redis-server >/dev/null; } || true

# loadgroup: the tests of one xdist_group (one Ray cluster, one Redis server) share a worker.
test: $(STAMP) redis-server
	$(PY) tests/run_suite.py -n $(PYTEST_WORKERS) --dist loadgroup

test-fast: $(STAMP)
	$(PY) tests/run_suite.py -n $(PYTEST_WORKERS) --dist loadgroup -m "not slow"

bench: $(STAMP)
	$(PY) -m benchmarks.run

lint: $(STAMP)
	$(VENV)/bin/ruff check pallas_verify strategies reference_kernels tests benchmarks

clean:
	rm -rf $(VENV) pv-out .hypothesis
