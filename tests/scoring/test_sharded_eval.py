"""Evaluation sharded over processes (torchrun, gloo on CPU): the same numbers as one process, rank 0 writes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from antlm_bench.results.store import read_results_folder

TASKS = "blimp,blimp_supplement,ewok,entity_tracking,wug_adj,reading"


def _run(args: list[str], data_dir: Path, cwd: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "ANTLM_BENCH_DATA": str(data_dir)}
    done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def _scores(folder: Path) -> dict[tuple, tuple]:
    rows = read_results_folder(folder / "scores.parquet", with_items=False).scores.to_pylist()
    # repr: a NaN (WUG's rho with --limit 2: two saturated items) then compares equal to itself
    return {(r["task"], r["subtask"], r["metric"]): repr((r["value"], r["n"], r["n_ties"], r["ci_low"], r["ci_high"]))
            for r in rows}


def _free_port() -> int:
    with socket.socket() as probe:  # torchrun's static rendezvous needs a real port (0 is not resolved)
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _compare(model: Path, scoring: str, limit: str, data_dir: Path, tmp_path: Path) -> None:
    common = ["eval", "--model", str(model), "--tasks", TASKS, "--limit", limit, "--scoring", scoring,
              "--no-progress", "--batch-tokens", "512"]
    _run([sys.executable, "-m", "antlm_bench", *common, "--output", str(tmp_path / "one")], data_dir, tmp_path)
    _run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
          "--master-port", str(_free_port()),
          "-m", "antlm_bench", *common, "--output", str(tmp_path / "two")], data_dir, tmp_path)
    one, two = _scores(tmp_path / "one"), _scores(tmp_path / "two")
    assert one.keys() == two.keys() and len(one) > 90
    assert one == two  # every value, count and interval bit for bit


@pytest.mark.slow  # three interpreter starts (~40 s on 2 shared cores)
def test_two_processes_equal_one_clm(llama_dir, real_data_dir, tmp_path):
    _compare(llama_dir, "clm", "2", real_data_dir, tmp_path)


@pytest.mark.slow
def test_two_processes_equal_one_pll(bert_dir, real_data_dir, tmp_path):
    _compare(bert_dir, "pll", "1", real_data_dir, tmp_path)


@pytest.mark.parametrize("kind,method", [("llama", "clm"), ("bert", "pll"), ("bert", "mntp")])
def test_rank_split_in_process(monkeypatch, kind, method):
    """The engine's split, without processes: rank 1's values handed to rank 0's gather give exactly the
    one-process scores (prefix-tree and plain clm batches, masked batches)."""
    import numpy as np
    from tiny_models import build_tiny_bert, build_tiny_llama, build_tiny_tokenizer

    from antlm_bench.scoring import engine, wrap_model
    from antlm_bench.scoring.babylm2025 import span_seqs
    from antlm_bench.scoring.encode import dedupe

    model, tok = (build_tiny_llama(), build_tiny_tokenizer("bpe")) if kind == "llama" else (
        build_tiny_bert(), build_tiny_tokenizer("bert"))
    sm = wrap_model(model, tok)
    texts = [f"the {w} sat on the mat and then {v} ran away." for w in ("cat", "dog", "bird") for v in ("it", "he")]
    seqs, _ = dedupe(span_seqs(tok, texts, [t[8:] for t in texts], method))
    one = engine.score_seqs(sm, seqs, method, batch_tokens=64)
    captured = {}
    monkeypatch.setattr(engine, "shard", lambda: (1, 2))
    monkeypatch.setattr(engine, "_sum_over_ranks", lambda values, world: captured.setdefault("r1", values.clone()))
    engine.score_seqs(sm, seqs, method, batch_tokens=64)
    monkeypatch.setattr(engine, "shard", lambda: (0, 2))
    monkeypatch.setattr(engine, "_sum_over_ranks", lambda values, world: values + captured["r1"])
    two = engine.score_seqs(sm, seqs, method, batch_tokens=64)
    assert np.array_equal(one, two)


def test_rank_split_in_process_with_shared_bases(monkeypatch):
    """BabyLlama's shared-base rows (entity tracking's path: bases run once, rows continue from their keys and
    values) split over two ranks give exactly the one-process scores, batch by batch."""
    import numpy as np
    from test_scoring_shared_prefix import _random_groups, babyllama

    from antlm_bench.scoring import engine, wrap_model
    from antlm_bench.scoring.encode import dedupe

    model, tok = babyllama()
    sm = wrap_model(model, tok)
    assert sm.keeps_prefixes
    seqs, groups = _random_groups(0)
    unique, index = dedupe(seqs)
    groups = [np.unique(index[g]) for g in groups]
    one = engine.score_seqs(sm, unique, "clm", batch_tokens=256, groups=groups)
    captured = {}
    monkeypatch.setattr(engine, "shard", lambda: (1, 2))
    monkeypatch.setattr(engine, "_sum_over_ranks", lambda values, world: captured.setdefault("r1", values.clone()))
    engine.score_seqs(sm, unique, "clm", batch_tokens=256, groups=groups)
    monkeypatch.setattr(engine, "shard", lambda: (0, 2))
    monkeypatch.setattr(engine, "_sum_over_ranks", lambda values, world: values + captured["r1"])
    two = engine.score_seqs(sm, unique, "clm", batch_tokens=256, groups=groups)
    assert np.array_equal(one, two)
