# kafkalite: the two set-up commands a new user needs are `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

.PHONY: run test test-example install install-test system-deps lint bench docs clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e .
	touch $(STAMP)

install: $(STAMP)

## make run: install and start one broker on config/server.yaml (127.0.0.1:9092; its web
## console on http://127.0.0.1:9080/)
run: $(STAMP)
	$(VENV)/bin/kafkalite-server config/server.yaml

## Debian packages the tests use: kcat (librdkafka 2.0 client), Apache ZooKeeper, a Java
## runtime (ZooKeeper, and Spark for the tests marked `spark`), and Node.js with npm (the
## kafkajs and @platformatic/kafka clients pinned in tests/node), and Chromium with its
## WebDriver (the console's browser tests). .ci/apt-get-retry waits while another
## apt-get or dpkg holds the lock instead of failing.
system-deps:
	@if ! command -v kcat >/dev/null || [ ! -f /usr/share/java/zookeeper.jar ] || ! command -v java >/dev/null || ! command -v npm >/dev/null || ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO .ci/apt-get-retry update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO .ci/apt-get-retry install -y -qq kcat zookeeper default-jre-headless nodejs chromium chromium-driver >/dev/null && \
		{ command -v npm >/dev/null || $$SUDO .ci/apt-get-retry install -y -qq npm >/dev/null; }; \
	fi

$(TEST_STAMP): pyproject.toml tests/node/package-lock.json $(STAMP)
	$(PIP) install -q -e '.[test]'
	npm ci --prefix tests/node --no-audit --no-fund --loglevel=error
	touch $(TEST_STAMP)

install-test: system-deps $(TEST_STAMP)

## make test: install everything (Python deps, kcat, zookeeper), run the whole suite, then
## the example project's tests; both always run, and it fails if either failed
test: install-test
	@status=0; \
	$(PY) -m pytest -q || status=1; \
	$(MAKE) --no-print-directory test-example || status=1; \
	exit $$status

## make test-example: examples/pytest-app's tests in their own venv (.venv-example) holding
## only kafkalite (built from this checkout) and the example's dependencies: the plugin's
## fixtures come from the pytest11 entry point, as for any project that installs kafkalite
test-example:
	VENV=$(CURDIR)/.venv-example PYTHON=$(PYTHON) examples/pytest-app/run_tests.sh

## make lint: ruff, ruff format, mypy, and the layer contract (lint-imports, [tool.importlinter]
## in pyproject.toml; docs/architecture.md "Layers and the import contract")
lint: $(TEST_STAMP)
	$(VENV)/bin/ruff check kafkalite tests bench
	$(VENV)/bin/ruff format --check kafkalite tests bench
	$(VENV)/bin/mypy kafkalite --ignore-missing-imports
	$(VENV)/bin/lint-imports

docs: $(STAMP)
	$(PY) -m kafkalite.server.api_table > docs/compatibility.md

bench: $(STAMP)
	$(PY) -m bench all

clean:
	rm -rf $(VENV) .venv-example data build *.egg-info
