"""Shared fixtures: the real-data folder, and tiny seeded models built in the tests themselves."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

_FALLBACK = Path(__file__).resolve().parents[2] / "shared" / "data"


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
