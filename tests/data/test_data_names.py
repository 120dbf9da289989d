"""One name per thing: the task group, the data group and the convention of BabyLM 2025 are all ``babylm-2025``;
the quickstart's ``data fetch babylm`` brings every shipped task's data; a missing BabyLM 2025 folder names the
group that brings it; ``run --help`` and the data table of docs/data.md list everything there is."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cli_support import run_cli
from typer.testing import CliRunner

from antlm_bench.cli import app
from antlm_bench.data.sources import GROUPS, load_registry, source_names
from antlm_bench.errors import UserError
from antlm_bench.tasks import resolve_tasks

REPO = Path(__file__).resolve().parents[2]
SHIPPED_TASKS = ["blimp", "blimp_supplement", "ewok", "entity_tracking", "wug_adj", "reading", "glue"]


def test_one_spelling_for_babylm_2025():
    assert [r.name for r in resolve_tasks("babylm-2025")] == SHIPPED_TASKS
    with pytest.raises(UserError, match="unknown task 'babylm2025'"):
        resolve_tasks("babylm2025")  # no alias for the old spelling
    assert "babylm-2025" in GROUPS
    assert not list(REPO.glob("tasks/babylm2025*")) and not list(REPO.glob("leaderboards/babylm2025*"))


def test_the_quickstart_fetch_brings_every_source_and_babylm_2025_every_task():
    assert set(GROUPS["babylm"]) == set(source_names(load_registry()))
    assert set(GROUPS["babylm-2025"]) == set(GROUPS["babylm"]) - {"pretrain"}


def test_a_missing_babylm_2025_folder_names_the_group_that_brings_it(tmp_path, llama_dir, monkeypatch, capsys):
    (tmp_path / "data").mkdir()
    code, _, stderr = run_cli(monkeypatch, capsys, "eval", "--model", str(llama_dir), "--tasks", "entity_tracking",
                              "--data-dir", str(tmp_path / "data"))
    assert code == 2 and "antlm-bench data fetch babylm-2025" in stderr, stderr


def test_run_help_names_every_task_and_group_it_accepts():
    result = CliRunner().invoke(app, ["run", "--help"], terminal_width=200)
    text = " ".join(result.output.split())
    for name in [*SHIPPED_TASKS, "babylm", "babylm-2025", "zero-shot"]:
        assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text), name


def test_the_data_docs_table_lists_every_folder_of_the_data(real_data_dir):
    section = (REPO / "docs" / "data.md").read_text(encoding="utf-8")  # the README links there (issue #55)
    listed = set(re.findall(r"^\| `([^/`*.]+)", section, flags=re.MULTILINE))
    folders = {p.name.removesuffix(".zip") for p in real_data_dir.iterdir()
               if p.is_dir() or p.suffix == ".zip"}
    assert folders <= listed, folders - listed
