"""The heldout task: loss on the corpus's dev split, checked against the model's own forward pass; fixed masks;
the trained sequence length; its items feed the board's statistics."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from antlm_bench.adapters.heldout import HeldoutLossTask
from antlm_bench.evaluate import evaluate
from antlm_bench.results.leaderboard import leaderboard_from_paths
from antlm_bench.scoring import load_scoring_model
from antlm_bench.tasks import resolve_tasks


def _rows(out):
    return {r["subtask"]: r for r in out.scores.to_pylist()}


def test_clm_loss_is_the_models_own_cross_entropy_per_sequence(llama_dir, real_data_dir):
    out = evaluate(llama_dir, "heldout", limit=3, data_dir=real_data_dir, progress=False, log_samples=True)
    assert out.method == "clm"
    rows = _rows(out)
    assert {r["metric"] for r in rows.values()} == {"loss"} and rows[""]["n"] == 3 * (len(rows) - 1)
    sources = [s for s in rows if s]
    assert rows[""]["value"] == pytest.approx(np.mean([rows[s]["value"] for s in sources]))  # unweighted over sources
    # recompute the first childes sequence by hand: the corpus packed as training packs it, the model's logits
    adapter = resolve_tasks("heldout")[0].adapter()
    sm = load_scoring_model(llama_dir)
    from antlm_bench.adapters.base import EvalContext

    ctx = EvalContext(model_path=llama_dir, data_dir=real_data_dir, model=sm, limit=3)
    (childes,) = [s for s in adapter.sequences(ctx, sm.tokenizer, "clm", 128) if s.name == "childes"]
    ids = torch.as_tensor(childes.input_ids[:1])
    with torch.no_grad():
        logits = sm.module(input_ids=ids).logits.float()
    expected = torch.nn.functional.cross_entropy(logits[0, :-1], ids[0, 1:]).item()
    items = [i for i in out.items.to_pylist() if i["subtask"] == "childes"]
    assert [i["item_id"] for i in items] == ["0", "1", "2"]
    assert items[0]["value"] == pytest.approx(expected, rel=1e-5)
    assert rows["childes"]["value"] == pytest.approx(np.mean([i["value"] for i in items]))
    assert "seq_len=128 (the task's default)" in rows[""]["notes"] and "corruption: none" in rows[""]["notes"]


def test_masked_loss_uses_fixed_masks_every_model_sees(bert_dir, real_data_dir):
    from antlm_bench.adapters.base import EvalContext

    sm = load_scoring_model(bert_dir)
    adapter = resolve_tasks("heldout")[0].adapter()
    ctx = EvalContext(model_path=bert_dir, data_dir=real_data_dir, model=sm, limit=2)
    first = {s.name: s for s in adapter.sequences(ctx, sm.tokenizer, "pll", 64)}
    ctx.limit = 5
    again = {s.name: s for s in adapter.sequences(ctx, sm.tokenizer, "pll", 64)}
    for name, seqs in first.items():
        # the same masks whatever the number scored, and on a second reading
        assert np.array_equal(seqs.input_ids, again[name].input_ids[:2])
        assert np.array_equal(seqs.labels, again[name].labels[:2])
        chosen = seqs.labels != -100
        assert 0.05 < chosen.mean() < 0.3 and (seqs.input_ids[chosen] == sm.tokenizer.mask_token_id).mean() > 0.5
    out = evaluate(bert_dir, "heldout", limit=2, data_dir=real_data_dir, progress=False, log_samples=True)
    assert out.method == "pll"
    seqs = next(s for s in adapter.sequences(ctx, sm.tokenizer, "pll", 128) if s.name == "gutenberg")
    ids, labels = torch.as_tensor(seqs.input_ids[:1]), torch.as_tensor(seqs.labels[:1])
    with torch.no_grad():
        logits = sm.module(input_ids=ids).logits.float()
    expected = torch.nn.functional.cross_entropy(logits[0], labels[0], ignore_index=-100).item()
    item = next(i for i in out.items.to_pylist() if i["subtask"] == "gutenberg" and i["item_id"] == "0")
    assert item["value"] == pytest.approx(expected, rel=1e-5)
    assert "80% [MASK]" in out.scores.to_pylist()[0]["notes"]


def test_the_sequence_length_is_the_checkpoints_trained_one(llama_dir, real_data_dir, tmp_path):
    folder = tmp_path / "ckpt"
    shutil.copytree(llama_dir, folder)
    state = {"schedule": "1_CLM", "phases": [], "phase_index": 0, "phase_objective": "CLM", "epoch": 1.0,
             "step": 1, "tokens_seen": 10, "recipe": "antlm-babyllama", "preset": "tiny", "architecture": "babyllama",
             "seed": 1, "data_hash": "abc", "tokenizer_hash": "def", "package_version": "0.1.0", "seq_len": 32}
    (folder / "antlm_state.json").write_text(json.dumps(state))
    out = evaluate(folder, "heldout", limit=2, data_dir=real_data_dir, progress=False)
    assert "seq_len=32 (the checkpoint's trained seq_len)" in out.scores.to_pylist()[0]["notes"]


def test_the_board_reads_heldout_items(llama_dir, real_data_dir, tmp_path):
    """The board's heldout cell gets its item statistics from the sequences' losses (the items' value column)."""
    out = evaluate(llama_dir, "heldout", limit=4, data_dir=real_data_dir, progress=False, log_samples=True,
                   output_dir=tmp_path / "r1")
    board = leaderboard_from_paths([tmp_path / "r1"])
    cell = board.rows[0].cells["heldout"]
    assert cell.metric == "loss" and cell.items is not None and cell.item_var > 0
    stored = [i["value"] for i in out.items.to_pylist() if i["subtask"] == "childes"]
    assert cell.items["childes"].correct[0] == pytest.approx(stored)


def test_a_folder_without_dev_text_is_one_line(tmp_path, llama_dir):
    (tmp_path / "pretrain_sample").mkdir()
    adapter = HeldoutLossTask(resolve_tasks("heldout")[0].spec)
    from antlm_bench.errors import UserError

    with pytest.raises(UserError, match=r"no \*\.dev files"):
        adapter.check_data(tmp_path)


def test_a_tokenizer_left_with_truncation_still_reads_whole_lines(llama_dir, real_data_dir):
    """transformers leaves truncation set on a fast tokenizer's backend after a call with truncation=True (GLUE's
    encoder makes one); held-out lines must still be read whole, as training reads them."""
    sm = load_scoring_model(llama_dir)
    from antlm_bench.adapters.base import EvalContext

    ctx = EvalContext(model_path=llama_dir, data_dir=real_data_dir, model=sm, limit=3)
    adapter = resolve_tasks("heldout")[0].adapter()
    whole = {s.name: s.input_ids.shape[0] for s in adapter.sequences(ctx, sm.tokenizer, "clm", 128)}
    sm.tokenizer(["a line of text"], truncation=True, max_length=4)  # leaves the backend truncating at 4
    assert sm.tokenizer.backend_tokenizer.truncation is not None
    again = {s.name: s.input_ids.shape[0] for s in adapter.sequences(ctx, sm.tokenizer, "clm", 128)}
    assert again == whole and all(n == 3 for n in whole.values())
