# The two commands a new machine needs: `make run` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEV_CERTS := .dev-certs
BIND ?= 127.0.0.1:8443
CLOUD ?= generic

.PHONY: run test lint format bench manifests e2e-kind clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

# Serve on loopback with throwaway dev certificates and the default cloud maps; no cluster needed.
run: $(BIN)/.installed
	$(BIN)/gpuport certs --out $(DEV_CERTS) --dns localhost --ip 127.0.0.1 --renew-before
	@echo
	@echo "gpuport: serving https://$(BIND) with cloud map '$(CLOUD)'. From another terminal:"
	@echo "  curl --cacert $(DEV_CERTS)/ca.crt https://$(BIND)/mutate -H 'Content-Type: application/json' \\"
	@echo "       -d @tests/fixtures/admission/pod-create-fractional-gpu-500m-before-validation.json"
	@echo
	$(BIN)/gpuport serve --bind $(BIND) --cert-dir $(DEV_CERTS) --cloud $(CLOUD)

test: $(BIN)/.installed lint
	$(BIN)/python -m pytest

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy

format: $(BIN)/.installed
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# The kustomize base carries a rendered copy of cloudmaps/ (kustomize reads no files outside its folder).
manifests: $(BIN)/.installed
	$(BIN)/python -m webhook.config.cloudmap_configmap > manifests/cloudmaps-configmap.yaml

bench: $(BIN)/.installed
	$(BIN)/python bench/admission_bench.py
	$(BIN)/python bench/decision_bench.py

# Needs Docker, kind and kubectl; the build machines have none of them (tests/e2e/kind.sh says more).
e2e-kind: $(BIN)/.installed
	bash tests/e2e/kind.sh

clean:
	rm -rf $(VENV) $(DEV_CERTS) .pytest_cache .ruff_cache .hypothesis
