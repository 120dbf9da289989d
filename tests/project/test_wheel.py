"""The wheel is a package: the code, the recipes, the task specs and the board definitions, not the studies' committed
results; installed from it, a board whose results are not installed says in one line where they are."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_WHEEL_BYTES = 5 * 1024 * 1024  # issue #55: definitions, recipes and tasks, well under 5 MB


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # hatchling (the build backend, in the dev extra) builds from the checkout as `pip wheel .` does
    built = subprocess.run([sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(out)], cwd=ROOT,
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    (path,) = out.glob("*.whl")
    return path


def test_the_wheel_ships_definitions_recipes_and_tasks_and_no_results(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert wheel.stat().st_size < MAX_WHEEL_BYTES, f"{wheel.name}: {wheel.stat().st_size:,} bytes"
    shipped = {f"antlm_bench/_bundled/{path.relative_to(ROOT)}" for folder in ("trainers", "tasks", "leaderboards")
               for path in (ROOT / folder).glob("*.yaml")}
    assert shipped and shipped <= names, sorted(shipped - names)
    assert "antlm_bench/data/sources.tsv" in names and "antlm_bench/cli/app.py" in names
    results = [n for n in names if n.endswith((".parquet", ".arrow", ".safetensors", ".pt"))
               or n.startswith("antlm_bench/_bundled/leaderboards/") and n.count("/") > 3]
    assert not results, results[:5]


def test_installed_from_the_wheel_a_board_without_its_results_says_where_they_are(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    env = {**os.environ, "PYTHONPATH": str(site), "OMP_NUM_THREADS": "1"}
    where = subprocess.run([sys.executable, "-c", "import antlm_bench; print(antlm_bench.__file__)"], env=env,
                           cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert where.stdout.strip() == str(site / "antlm_bench" / "__init__.py")  # the wheel's copy, not the checkout
    listed = subprocess.run([sys.executable, "-m", "antlm_bench", "list", "models", "--json"], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and "antlm-babyllama" in listed.stdout, listed.stderr[-1000:]
    board = subprocess.run([sys.executable, "-m", "antlm_bench", "leaderboard", "-d", "cpu-study-ltgbert"], env=env,
                           cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert board.returncode == 2, board.stdout[-1000:] + board.stderr[-1000:]
    lines = board.stderr.strip().splitlines()
    assert len(lines) == 1 and "cpu-study-ltgbert" in lines[0] and "not installed" in lines[0], lines
    assert "source repository" in lines[0] and "Traceback" not in board.stderr
