"""The README's two commands, `make run` and `make test` (Makefile): each sets up what is missing and nothing more,
finds or fetches the data, then runs the command. Tested against a stand-in environment whose `antlm-bench` and
`python` only record how they were called, so nothing is installed or trained here."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
QUICKSTART_ARGS = "--model antlm-babyllama --tasks blimp,ewok,glue"
STAMPS = (".torch-2.13.0", ".antlm-bench", ".antlm-bench-dev")
TF4_STAMP = ".transformers-4.57.1-tokenizers-0.22.1"
RECORDER = """#!/bin/sh
printf '%s|%s\\n' "${ANTLM_BENCH_DATA:-}" "$*" >> "$(dirname "$0")/calls.log"
printf '%s\\n' "${ANTLM_BENCH_TF4_PYTHON:-}" >> "$(dirname "$0")/tf4.log"
if [ "$1 $2" = "data where" ]; then echo "$FAKE_FETCHED"; fi
if [ "$1 $2" = "data fetch" ] && [ -n "${FAKE_FETCH_FAILS:-}" ]; then echo "fetch: no network" >&2; exit 4; fi
exit 0
"""


@pytest.fixture
def make() -> str:
    found = shutil.which("make")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("`make` is not installed; the README's commands need it (Debian: apt-get install make)")
        pytest.skip("make is not installed")
    return found


def _environment(tmp_path: Path, stamped: bool = True) -> Path:
    """A stand-in for the set-up's environments: recorders for antlm-bench and python, stamps as a finished set-up
    leaves them (newer than pyproject.toml)."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (tmp_path / "venv-tf4").mkdir()
    for name in ("antlm-bench", "python"):
        (venv / "bin" / name).write_text(RECORDER)
        (venv / "bin" / name).chmod(0o755)
    if stamped:
        for stamp in STAMPS:
            (venv / stamp).touch()
        (tmp_path / "venv-tf4" / TF4_STAMP).touch()
    return venv


def _make(make: str, target: str, venv: Path, *extra: str, env: dict[str, str] | None = None,
          dry: bool = False) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ANTLM_BENCH", "MAKE"))}
    base.update(env or {})
    return subprocess.run([make, "-C", str(REPO), *(["-n"] if dry else []), target, f"VENV={venv}", *extra],
                          env=base, capture_output=True, text=True, timeout=120)


def _calls(venv: Path) -> list[tuple[str, str]]:
    log = venv / "bin" / "calls.log"
    lines = log.read_text().splitlines() if log.is_file() else []
    return [tuple(line.split("|", 1)) for line in lines]  # type: ignore[misc]


def test_a_second_call_installs_nothing(make, tmp_path):
    fresh = _make(make, "test", _environment(tmp_path / "fresh", stamped=False), dry=True)
    assert fresh.returncode == 0, fresh.stderr
    for step in ("-m venv", "torch==2.13.0", 'install -q -e ".[dev]"', "transformers==4.57.1"):
        assert step in fresh.stdout, step
    for target in ("run", "test"):
        again = _make(make, target, _environment(tmp_path / target), dry=True)
        assert again.returncode == 0, again.stderr
        assert "pip" not in again.stdout and "-m venv" not in again.stdout, again.stdout
    # a changed pyproject.toml (new dependencies) is installed again
    venv = tmp_path / "run" / "venv"
    past = (REPO / "pyproject.toml").stat().st_mtime - 60
    os.utime(venv / ".torch-2.13.0", (past - 60, past - 60))  # torch stays installed
    os.utime(venv / ".antlm-bench", (past, past))
    assert 'install -q -e .' in _make(make, "run", venv, dry=True).stdout


def test_run_uses_the_data_given_else_the_shared_folder_else_fetches_it(make, tmp_path):
    shared = tmp_path / "shared"
    (shared / "blimp_filtered").mkdir(parents=True)
    fetched = str(tmp_path / "cache" / "antlm-bench" / "data")
    venv = _environment(tmp_path / "given")
    done = _make(make, "run", venv, f"SHARED_DATA={shared}", env={"ANTLM_BENCH_DATA": "/data/mine"})
    assert done.returncode == 0, done.stderr
    assert _calls(venv) == [("/data/mine", f"run {QUICKSTART_ARGS}")]
    venv = _environment(tmp_path / "shared-here")
    assert _make(make, "run", venv, f"SHARED_DATA={shared}").returncode == 0
    assert _calls(venv) == [(str(shared), f"run {QUICKSTART_ARGS}")]
    venv = _environment(tmp_path / "nothing")
    done = _make(make, "run", venv, f"SHARED_DATA={tmp_path / 'none'}", "ARGS=--preset tiny --seeds 1,2",
                 env={"FAKE_FETCHED": fetched})
    assert done.returncode == 0, done.stderr
    assert _calls(venv) == [("", "data fetch babylm"), ("", "data where"), (fetched, "run --preset tiny --seeds 1,2")]


def test_a_failed_fetch_stops_before_the_run(make, tmp_path):
    venv = _environment(tmp_path)
    done = _make(make, "run", venv, f"SHARED_DATA={tmp_path / 'none'}", env={"FAKE_FETCH_FAILS": "1"})
    assert done.returncode != 0 and "fetch: no network" in done.stderr
    assert [call for _, call in _calls(venv)] == ["data fetch babylm"]


def test_make_test_runs_the_suite_with_the_transformers_4_environment(make, tmp_path):
    venv = _environment(tmp_path)
    done = _make(make, "test", venv, "PYTEST_ARGS=tests/runs/test_schedule.py -x", env={"ANTLM_BENCH_DATA": "/data/x"})
    assert done.returncode == 0, done.stderr
    assert _calls(venv) == [("/data/x", "-m pytest -q -n auto --durations=25 tests/runs/test_schedule.py -x")]
    # the export test's transformers 4.x environment, made beside the first (tests/cli/test_export_transformers4.py)
    assert (venv / "bin" / "tf4.log").read_text().split() == [f"{venv}-tf4/bin/python"]


def test_the_makefile_runs_the_readme_quickstart():
    line = next(line for line in (REPO / "Makefile").read_text().splitlines() if line.startswith("ARGS ?="))
    assert shlex.split(line.split("?=", 1)[1]) == shlex.split(QUICKSTART_ARGS)
