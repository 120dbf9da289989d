"""The tests are arranged as the package is (issue #52): one folder per stage, named after its package folder
(tests/data for antlm_bench/data, ...), and tests/project for the checks of the whole project. The helpers they
share stay in tests/ (pyproject's ``pythonpath``), so that any one test file runs alone."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
PACKAGE = ROOT / "antlm_bench"
PROJECT = "project"  # the whole project's checks: layout, maps, README, wheel, set-up commands


def _stage_folders() -> set[str]:
    return {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()} | {PROJECT}


def _test_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "fixtures" not in p.relative_to(TESTS).parts)


def test_every_test_file_lives_in_a_stage_folder():
    misplaced = [str(p.relative_to(TESTS)) for p in _test_files()
                 if len(p.relative_to(TESTS).parts) != 2 or p.parent.name not in _stage_folders()]
    assert not misplaced, (f"test files belong in tests/<stage>/, a stage being a package folder of antlm_bench or "
                           f"{PROJECT!r}: {misplaced}")


def test_each_test_folder_is_a_stage_and_holds_only_tests():
    folders = [p for p in TESTS.iterdir() if p.is_dir() and p.name not in ("fixtures", "__pycache__")]
    assert folders, "no stage folders under tests/"
    unknown = sorted(p.name for p in folders if p.name not in _stage_folders())
    assert not unknown, f"tests/{unknown}: not a package folder of antlm_bench nor {PROJECT!r}"
    # a helper inside a stage folder is importable only once pytest has put that folder on sys.path: it belongs in
    # tests/, beside conftest.py
    helpers = sorted(str(p.relative_to(TESTS)) for folder in folders for p in folder.rglob("*.py")
                     if not p.name.startswith("test_"))
    assert not helpers, f"helpers belong in tests/ (importable from every folder): {helpers}"


def test_test_file_names_are_unique():
    """pytest imports each test file by its bare name (no __init__.py): two of one name would clash."""
    twice = [name for name, n in Counter(p.name for p in _test_files()).items() if n > 1]
    assert not twice, twice


def test_no_test_file_imports_a_test_file_of_another_folder():
    """Such an import works in the whole suite (pytest has put the other folder on sys.path by then) and fails when
    the file runs alone: what tests share goes into a helper module in tests/."""
    crossing = []
    for path in _test_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else \
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            for name in names:
                if name.startswith("test_") and not (path.parent / f"{name}.py").is_file():
                    crossing.append(f"{path.relative_to(TESTS)}:{node.lineno}: {name}")
    assert not crossing, crossing
