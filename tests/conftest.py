"""Shared fixtures: the real-data folder, and tiny seeded models built in the tests themselves."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

_FALLBACK = Path(__file__).resolve().parents[2] / "shared" / "data"

# Tests that run the CLI see the data the way the README promises ($ANTLM_BENCH_DATA, else ../shared/data), as an
# absolute path: a relative value means the folder as seen from where pytest started, while the tool reads it
# against its own working folder, and many tests run it from a temporary one.
if os.environ.get("ANTLM_BENCH_DATA"):
    os.environ["ANTLM_BENCH_DATA"] = os.path.abspath(os.environ["ANTLM_BENCH_DATA"])
elif (_FALLBACK / "blimp_filtered").is_dir():
    os.environ["ANTLM_BENCH_DATA"] = str(_FALLBACK)


# pytest-xdist starts its workers with COLUMNS=80 and LINES=24 in the environment, which no pipe or CI log of a user
# has: rich would lay every table out at 80 columns there, while the tool prints whole lines when its output is no
# terminal (cli.app.WholeLineConsole). Dropped before the CLI's consoles are made, so tests see what a pipe sees.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _name in ("COLUMNS", "LINES"):
        os.environ.pop(_name, None)


@pytest.fixture(scope="session")
def real_data_dir() -> Path:
    """The real BabyLM data. Missing data FAILS under CI (CI=true) and skips elsewhere."""
    candidates = [os.environ.get("ANTLM_BENCH_DATA"), str(_FALLBACK)]
    for candidate in candidates:
        if candidate and (Path(candidate) / "blimp_filtered").is_dir():
            return Path(candidate)
    message = f"real data not found (tried $ANTLM_BENCH_DATA={candidates[0]!r} and {_FALLBACK})"
    if os.environ.get("CI"):
        pytest.fail(message + "; CI must provide it (.ci/run sets ANTLM_BENCH_DATA=../shared/data)")
    pytest.skip(message)


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    """Every test model is tiny: a second thread buys nothing, and where other jobs share the 2 cores, OpenMP
    threads waiting for each other make each small matmul ~30x slower. Subprocess tests set OMP_NUM_THREADS=1."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    """A tiny seeded LlamaForCausalLM with its BPE tokenizer, saved as a Hugging Face folder."""
    from tiny_models import save_tiny

    return save_tiny("llama", tmp_path_factory.mktemp("llama"))


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    """A tiny seeded BertForMaskedLM with its tokenizer, saved as a Hugging Face folder."""
    from tiny_models import save_tiny

    return save_tiny("bert", tmp_path_factory.mktemp("bert"))
