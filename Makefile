# The two commands of the README ("Start"), each doing its own set-up on a fresh machine:
#
#   make run     # a virtual environment, torch for this machine, antlm-bench, the data, then the quickstart run
#   make test    # the same set-up with the dev extras (and a transformers 4.x environment for the export test),
#                # then the test suite (the 25 slowest tests listed at its end)
#
#   make run ARGS="--model antlm-ltgbert --preset tiny --seeds 1,2,3 --tasks babylm"   # any `antlm-bench run` options
#   make test PYTEST_ARGS="tests/runs/test_schedule.py -x"                          # part of the suite
#
# Both are idempotent: each step leaves a stamp in the environment and is skipped while its stamp is newer than
# what it installed from (pyproject.toml), so a second call goes straight to the command. Variables:
#   PYTHON       the interpreter the environments are made from (>= 3.10; default python3)
#   VENV         the environment's folder (default .venv)
#   TORCH_INDEX  the pip index torch comes from; by default PyPI's build where `nvidia-smi` sees a GPU, else a
#                torch wheel this machine already keeps (pip's find-links), else PyTorch's CPU-only index (a bare
#                `torch` from PyPI would be the multi-GB CUDA build)
#   ANTLM_BENCH_DATA  the data folder; by default SHARED_DATA (../shared/data) where it exists (this project's
#                machines), else the cache that `antlm-bench data fetch babylm` fills (about 59 MB, every file
#                checksummed; a second call finds it there and fetches nothing)

PYTHON ?= python3
VENV ?= .venv
TORCH_VERSION ?= 2.13.0
TORCH_INDEX ?=
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
ARGS ?= --model antlm-babyllama --tasks blimp,ewok,glue
PYTEST_ARGS ?=
SHARED_DATA ?= ../shared/data
# the export test's environment (tests/cli/test_export_transformers4.py): an evaluation set-up pinned to
# transformers 4.x
TF4_VENV ?= $(VENV)-tf4
TF4_TRANSFORMERS ?= 4.57.1
TF4_TOKENIZERS ?= 0.22.1
TF4_STAMP := $(TF4_VENV)/.transformers-$(TF4_TRANSFORMERS)-tokenizers-$(TF4_TOKENIZERS)

BIN := $(VENV)/bin
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: run test setup setup-test
.DELETE_ON_ERROR:

run: setup
	@$(find_data); exec "$(BIN)/antlm-bench" run $(ARGS)

test: setup-test
	@$(find_data); export ANTLM_BENCH_TF4_PYTHON="$(abspath $(TF4_VENV))/bin/python"; \
	exec "$(BIN)/python" -m pytest -q -n auto --durations=25 $(PYTEST_ARGS)

# the set-up alone (.ci/run makes it, then runs its later stages in the environment)
setup: $(VENV)/.antlm-bench
setup-test: $(VENV)/.antlm-bench-dev $(TF4_STAMP)

# The data folder the command gets, as $ANTLM_BENCH_DATA (the tests read it there too): the one given, else this
# project's SHARED_DATA, else the fetched cache (fetched once; `data fetch` keeps what it verified before).
define find_data
if [ -z "$${ANTLM_BENCH_DATA:-}" ] && [ -d "$(SHARED_DATA)/blimp_filtered" ]; then \
  ANTLM_BENCH_DATA="$$(cd "$(SHARED_DATA)" && pwd)"; \
elif [ -z "$${ANTLM_BENCH_DATA:-}" ]; then \
  "$(BIN)/antlm-bench" data fetch babylm || exit $$?; \
  ANTLM_BENCH_DATA="$$("$(BIN)/antlm-bench" data where)" || exit $$?; \
fi; \
export ANTLM_BENCH_DATA; echo "data: $$ANTLM_BENCH_DATA" >&2
endef

# torch into the environment at $(1), for this machine's hardware (see TORCH_INDEX above)
define install_torch
if [ -n "$(TORCH_INDEX)" ]; then \
  "$(1)/bin/pip" install -q "torch==$(TORCH_VERSION)" --index-url "$(TORCH_INDEX)"; \
elif nvidia-smi -L >/dev/null 2>&1; then \
  echo "torch $(TORCH_VERSION): a GPU is present, PyPI's CUDA build" >&2; \
  "$(1)/bin/pip" install -q "torch==$(TORCH_VERSION)"; \
elif "$(1)/bin/pip" install -q --no-index --no-deps "torch==$(TORCH_VERSION)" 2>/dev/null; then \
  echo "torch $(TORCH_VERSION): a wheel this machine keeps" >&2; \
  "$(1)/bin/pip" install -q "torch==$(TORCH_VERSION)"; \
else \
  echo "torch $(TORCH_VERSION): no GPU, the CPU-only build from $(TORCH_CPU_INDEX)" >&2; \
  "$(1)/bin/pip" install -q "torch==$(TORCH_VERSION)" --index-url "$(TORCH_CPU_INDEX)"; \
fi
endef

$(VENV)/.torch-$(TORCH_VERSION):
	@"$(PYTHON)" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
	  || { echo "$(PYTHON) is Python < 3.10; run with PYTHON=python3.10 (or newer)" >&2; exit 2; }
	@"$(PYTHON)" -m venv "$(VENV)" \
	  || { echo "$(PYTHON) -m venv $(VENV) failed: install your Python's venv module (Debian: apt-get install python3-venv)" >&2; exit 4; }
	@$(call install_torch,$(VENV))
	@touch "$@"

$(VENV)/.antlm-bench: $(VENV)/.torch-$(TORCH_VERSION) pyproject.toml
	"$(BIN)/pip" install -q -e .
	@touch "$@"

$(VENV)/.antlm-bench-dev: $(VENV)/.torch-$(TORCH_VERSION) pyproject.toml
	"$(BIN)/pip" install -q -e ".[dev]"
	@touch "$@" "$(VENV)/.antlm-bench"

$(TF4_STAMP):
	@"$(PYTHON)" -m venv "$(TF4_VENV)"
	@$(call install_torch,$(TF4_VENV))
	"$(TF4_VENV)/bin/pip" install -q "transformers==$(TF4_TRANSFORMERS)" "tokenizers==$(TF4_TOKENIZERS)"
	@touch "$@"
