"""The README's quickstart works as written: its commands exist and run from a fresh checkout.

The exact quickstart command trains for a few minutes, so the default suite runs it with budget flags appended
(the same code path, a smaller corpus and schedule); `pytest -m slow` runs it verbatim.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
BUDGET = ["--preset", "tiny", "--schedule", "0.5_CLM+0.5_MLM", "--max-words", "3000", "--limit", "3",
          "--eval-limit", "2", "--glue-epochs", "1", "--glue-max-train-examples", "24", "--quiet"]


def _section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    match = re.search(rf"^## {title}\n(.*?)(?=^## )", text, flags=re.S | re.M)
    assert match, f"README has no '## {title}' section"
    return match.group(1)


def _commands(section: str) -> list[list[str]]:
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    lines = [line.split("#")[0].strip() for block in blocks for line in block.splitlines()]
    return [shlex.split(line) for line in lines if line.startswith("antlm-bench ")]


def _commands_text(section: str) -> str:
    return "\n".join(re.findall(r"```bash\n(.*?)```", section, flags=re.S))


def _cli(args: list[str], env: dict[str, str], cwd: Path, timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "antlm_bench", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture
def quickstart_env(real_data_dir, tmp_path):
    env = {**os.environ, "ANTLM_BENCH_DATA": str(real_data_dir), "OMP_NUM_THREADS": "1",
           "XDG_CACHE_HOME": str(tmp_path / "cache")}
    return env


def test_quickstart_fetches_the_data_then_runs_the_documented_command():
    section = _section("Quickstart")
    # the data hint works on any machine (issue #55): the fetch first, then a copy of one's own through the variable
    assert "$ANTLM_BENCH_DATA" in section and "../shared/data" not in _commands_text(section)
    fetch, run = _commands(section)[:2]
    assert fetch == ["antlm-bench", "data", "fetch", "babylm"]
    assert run == ["antlm-bench", "run", "--model", "antlm-babyllama", "--tasks", "blimp,ewok,glue"]


@pytest.mark.slow  # the quickstart again from an empty cache through a loopback fetch (~50 s); test_quickstart_command_runs_end_to_end_on_a_budget runs it
def test_quickstart_from_a_fresh_cache_with_the_fetch_against_a_loopback_mirror(real_data_dir, tmp_path):
    """The quickstart as a newcomer runs it: no data folder at all, `data fetch babylm` (served by a loopback
    mirror of the upstream paths), then the run (on a budget). The evaluation files carry their real pinned
    checksums; the mirror has only snippets of the pre-training files, so the registry given here pins those
    snippets by sha256 instead (the same code path: download, check, keep)."""
    import lzma  # noqa: F401  (the mirror rebuilds the xz'd files)

    from loopback_http import Server, upstream_files

    from antlm_bench.data.sources import REGISTRY_FILE, load_registry

    served = upstream_files(real_data_dir)
    rows = [line for line in REGISTRY_FILE.read_text(encoding="utf-8").splitlines()
            if line.startswith("#") or line.startswith("source\t")]
    for item in load_registry(REGISTRY_FILE):
        if item.source == "pretrain":
            snippet = real_data_dir / item.dest
            path = f"snippets/{item.dest}"
            served[f"/{item.repo}/{item.commit}/{path}"] = snippet.read_bytes()
            import hashlib
            checksum = "sha256:" + hashlib.sha256(snippet.read_bytes()).hexdigest()
            rows.append("\t".join([item.source, item.dest, item.repo, item.commit, path, checksum]))
        else:
            rows.append("\t".join([item.source, item.dest, item.repo, item.commit, item.path, item.checksum]))
    registry = tmp_path / "sources.tsv"
    registry.write_text("\n".join(rows) + "\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "ANTLM_BENCH_DATA"}
    env.update({"OMP_NUM_THREADS": "1", "XDG_CACHE_HOME": str(tmp_path / "cache"),
                "ANTLM_BENCH_SOURCES": str(registry)})
    fetch, run = _commands(_section("Quickstart"))[:2]
    with Server(b"", name="unused", paths=served, lifetime_s=600) as server:
        env["ANTLM_BENCH_MIRROR"] = server.base
        fetched = _cli(fetch[1:], env, tmp_path, timeout=300)
    assert fetched.returncode == 0, fetched.stderr[-2000:]
    assert str(tmp_path / "cache" / "antlm-bench" / "data") in fetched.stdout
    result = _cli(run[1:] + BUDGET, env, tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    for column in ("blimp", "ewok", "glue", "macro"):
        assert column in result.stdout


def test_every_documented_command_has_help():
    text = README.read_text(encoding="utf-8")
    documented = set(re.findall(r"`antlm-bench ([a-z][a-z-]*)(?: [a-z]+)?", text))
    assert {"run", "train", "eval", "schedule", "leaderboard", "check", "data", "list"} <= documented
    for command in sorted(documented):
        result = subprocess.run([sys.executable, "-m", "antlm_bench", command, "--help"], capture_output=True,
                                text=True, timeout=120)
        assert result.returncode == 0, f"antlm-bench {command} --help failed: {result.stderr[-500:]}"


def test_quickstart_command_runs_end_to_end_on_a_budget(quickstart_env, tmp_path):
    command = _commands(_section("Quickstart"))[1]
    result = _cli(command[1:] + BUDGET, quickstart_env, tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout
    assert "preset tiny" in out or "no CUDA device" in out
    for column in ("blimp", "ewok", "glue", "macro"):
        assert column in out
    tables = list((tmp_path / "results").rglob("scores.parquet"))
    assert len(tables) == 1
    # the second invocation reuses everything and says so
    again = _cli(command[1:] + BUDGET, quickstart_env, tmp_path, timeout=600)
    assert again.returncode == 0 and "reusing" in again.stdout


@pytest.mark.slow
def test_quickstart_verbatim(quickstart_env, tmp_path):
    command = _commands(_section("Quickstart"))[1]
    result = _cli(command[1:], quickstart_env, tmp_path, timeout=900)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "macro" in result.stdout


def test_the_readme_is_a_guide_that_starts_with_the_two_commands():
    """Issue #55: a guide of at most 250 lines, the set-up in two commands first; the reference is in docs/ and
    every docs/ file it links exists."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    start = [line.split("#")[0].strip() for line in re.findall(r"```bash\n(.*?)```", _section("Start"), flags=re.S)[0]
             .splitlines()]
    assert [line for line in start if line.startswith("make")] == ["make run", "make test"]
    linked = set(re.findall(r"\bdocs/[\w./-]+\.md", text))
    assert {"docs/usage.md", "docs/data.md", "docs/benchmarks.md"} <= linked
    assert all((README.parent / path).is_file() for path in linked), linked


def test_ci_runs_exactly_the_readme_test_command():
    tests = _section("Tests")
    (command,) = re.findall(r"```bash\n(.*?)\n```", tests, flags=re.S)
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()
    runs = [line.strip() for line in ci if (line.strip() == command or "pytest" in line)
            and not line.lstrip().startswith("#")]
    # the README's command verbatim, then the SLURM stage (docs/sweep.md, "SLURM on one machine")
    assert runs == [command, "python3 -m pytest -q -m slurm --durations=25"]
