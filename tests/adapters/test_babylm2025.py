"""BabyLM 2025 zero-shot tasks (entity tracking, WUG, reading): parity with an independent batch-1 implementation
(tests/babylm2025_reference.py, written from EVAL-2025.md) on tiny seeded models, and known-answer cases."""

from __future__ import annotations

import copy
import functools
import json
import lzma
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from babylm2025_reference import entity_value, gain, span_score, spearman, surprisal, wug_p_first
from tiny_models import build_tiny_bert, build_tiny_llama, build_tiny_tokenizer

from antlm_bench.adapters.babylm2025 import (
    EYE_TRACKING,
    option_credit,
    read_reading_csv,
    reading_scores,
    word_surprisals,
)
from antlm_bench.adapters.babylm2025 import spearman as our_spearman
from antlm_bench.adapters.babylm2025 import wug_p_first as our_p_first
from antlm_bench.errors import UserError
from antlm_bench.evaluate import evaluate
from antlm_bench.scoring import wrap_model
from antlm_bench.scoring.babylm2025 import span_seqs
from antlm_bench.scoring.encode import dedupe
from antlm_bench.scoring.engine import score_seqs

ITEM_TOL = 1e-6  # per item / per word, nats
REGRESSION_TOL = 1e-9


@functools.cache
def models(kind: str):
    """float64 copies of the tiny models: batched and batch-1 forwards then agree far below 1e-6, so the
    comparison sees the scoring rules, not float32 noise (log-softmax stays float32 on both sides)."""
    if kind == "llama":
        return copy.deepcopy(build_tiny_llama()).double(), build_tiny_tokenizer("bpe")
    return copy.deepcopy(build_tiny_bert()).double(), build_tiny_tokenizer("bert")


CASES = [("llama", "clm"), ("bert", "pll"), ("bert", "mntp")]


def _fives(n: int) -> list:
    """Consecutive runs of five sequences as prefix-sharing groups (an item's options; any grouping is exact)."""
    return [np.arange(k, min(k + 5, n)) for k in range(0, n, 5)]


def ours(model, tok, sentences, completions, method, batch_tokens=2048):
    sm = wrap_model(model, tok)
    unique, index = dedupe(span_seqs(tok, sentences, completions, method))
    return score_seqs(sm, unique, method, batch_tokens, groups=_fives(len(unique)) if method == "clm" else None)[index]


def entity_items(data_dir: Path, per_group: int):
    out = []
    for name in ("regular", "ambiref", "move_contents"):
        taken: dict[int, int] = {}
        with lzma.open(data_dir / "entity_tracking" / f"{name}.jsonl.xz", "rt") as handle:
            for line in handle:
                record = json.loads(line)
                if taken.get(record["numops"], 0) < per_group:
                    taken[record["numops"]] = taken.get(record["numops"], 0) + 1
                    out.append((name, record))
    return out


@pytest.mark.parametrize("kind,method", CASES)
def test_entity_tracking_parity(real_data_dir, kind, method):
    """Every option's score within 1e-6 of the reference, and the task value equal to the reference's."""
    model, tok = models(kind)
    items = entity_items(real_data_dir, 2 if method == "clm" else 1)
    sentences = [r["input_prefix"] + o for _, r in items for o in r["options"]]
    completions = [o for _, r in items for o in r["options"]]
    got = ours(model, tok, sentences, completions, method)
    expected = np.asarray([span_score(model, tok, s, c, method) for s, c in zip(sentences, completions)])
    assert np.max(np.abs(got - expected)) < ITEM_TOL
    reference = entity_value([(n, r["numops"], list(expected[5 * k:5 * k + 5])) for k, (n, r) in enumerate(items)])
    out = evaluate((model, tok), "entity_tracking", scoring=method, limit=2 if method == "clm" else 1,
                   data_dir=real_data_dir, progress=False)
    task_row = [r for r in out.scores.to_pylist() if r["subtask"] == ""][0]
    assert task_row["value"] == pytest.approx(reference, abs=1e-12)
    assert {r["subtask"] for r in out.scores.to_pylist()} == {"", "regular", "ambiref", "move_contents"}


@pytest.mark.parametrize("kind,method", CASES)
def test_wug_parity(real_data_dir, kind, method):
    model, tok = models(kind)
    with lzma.open(real_data_dir / "wug_adj_nominalization" / "wug_adj_nominalization.jsonl.xz", "rt") as handle:
        records = [json.loads(line) for line in handle]
    limit = 200 if method == "clm" else 40
    records = records[:limit]
    firsts = [r["sentences"].split("\t")[0] for r in records]
    seconds = [r["sentences"].split("\t")[1] for r in records]
    got = ours(model, tok, [*firsts, *seconds], [*firsts, *seconds], method)
    expected = np.asarray([span_score(model, tok, s, s, method) for s in [*firsts, *seconds]])
    assert np.max(np.abs(got - expected)) < ITEM_TOL
    p_ref = np.asarray([wug_p_first(a, b) for a, b in zip(expected[:limit], expected[limit:])])
    rho_ref = spearman(p_ref, np.asarray([r["ratio"] for r in records]))
    out = evaluate((model, tok), "wug_adj", scoring=method, limit=limit, data_dir=real_data_dir, progress=False)
    row = out.scores.to_pylist()[0]
    assert row["metric"] == "spearman" and row["n"] == limit
    assert row["value"] == pytest.approx(rho_ref, abs=1e-9)


def _reading_frame(path: Path):
    pd = pytest.importorskip("pandas")
    frame = pd.read_csv(path, dtype={"item": str})  # the official reader, quirks included
    frame["item"] = frame["item"].fillna("None")
    return frame


@pytest.mark.parametrize("kind,method", CASES)
def test_reading_parity(real_data_dir, kind, method):
    """Surprisal per word (the first rows, and row 320 whose context is the word "None") within 1e-6; the
    regression scores computed independently (sklearn) from our surprisals within 1e-9."""
    model, tok = models(kind)
    path = real_data_dir / "reading" / "reading_data.csv.xz"
    frame = _reading_frame(path)
    data = read_reading_csv(path)
    assert data.item == list(frame["item"]) and data.word == list(frame["word"])
    assert [p is None for p in data.prev_item] == [not isinstance(p, str) for p in frame["prev_item"]]
    rows = [*range(0, 60 if method == "clm" else 25), 320, 971]
    sm = wrap_model(model, tok)

    def score(seqs):
        unique, index = dedupe(seqs)
        return score_seqs(sm, unique, method, 2048)[index]

    got = word_surprisals(tok, [data.item[i] for i in rows], [data.word[i] for i in rows], method, score)
    expected = np.asarray([surprisal(model, tok, frame["item"][i], frame["word"][i], method) for i in rows])
    assert np.max(np.abs(got - expected)) < ITEM_TOL

    n = len(data.word)
    both = word_surprisals(tok, [*data.item, *data.prev_item], [*data.word, *data.prev_word], method, score)
    pred, prev_pred = both[:n], both[n:]
    assert int(np.isnan(prev_pred).sum()) == 206  # 205 sentence-initial + row 971 (prev_item "None" -> NaN)
    eye, spr, _ = reading_scores(data, pred, prev_pred)
    columns = {c: frame[c].to_numpy(dtype=float) for c in frame.columns if frame[c].dtype.kind == "f"
               or frame[c].dtype.kind == "i"}
    f = {"S": columns["Subtlex_log10"], "L": columns["length"], "C": columns["context_length"],
         "PL": columns["prev_length"], "PP": prev_pred}
    eye_ref = np.mean([gain({**f, dv: columns[dv]}, dv, ["S", "L", "C"], pred) for dv in EYE_TRACKING])
    spr_ref = gain({**f, "spr": columns["self_paced_reading_time"]}, "spr", ["S", "L", "C", "PL", "PP"], pred)
    assert eye == pytest.approx(eye_ref, abs=REGRESSION_TOL)
    assert spr == pytest.approx(spr_ref, abs=REGRESSION_TOL)
    assert eye >= 0 and spr >= 0


def test_reading_task_rows(real_data_dir):
    out = evaluate(models("llama"), "reading", limit=5, data_dir=real_data_dir, progress=False)
    rows = {r["metric"]: r for r in out.scores.to_pylist()}
    assert set(rows) == {"eye_tracking", "self_paced_reading"}
    assert rows["eye_tracking"]["n"] == 1696 and rows["self_paced_reading"]["n"] == 1496
    assert rows["eye_tracking"]["limit"] is None  # the regressions need every row: --limit does not apply
    assert any("--limit does not apply" in note for note in out.notes)


# -- known answers --------------------------------------------------------------------------------------------------
def test_wug_known_rankings():
    ratio = np.linspace(0.1, 0.9, 9)
    gaps = np.log(ratio / (1 - ratio))  # s0 - s1 = logit(ratio): p_first = ratio exactly in exact arithmetic
    p = our_p_first(gaps, np.zeros(9))
    assert our_spearman(p, ratio) == pytest.approx(1.0, abs=1e-12)
    assert our_spearman(our_p_first(-gaps, np.zeros(9)), ratio) == pytest.approx(-1.0, abs=1e-12)
    # float32 saturation: a gap of 24 ln 2 or more is exactly 1.0, and those items tie at the top rank
    saturated = our_p_first(np.asarray([17.0, 30.0, 1.0]), np.zeros(3))
    assert saturated[0] == 1.0 and saturated[1] == 1.0 and saturated[2] < 1.0
    assert our_spearman(saturated, np.asarray([0.9, 0.8, 0.1])) == pytest.approx(spearman(saturated, [0.9, 0.8, 0.1]))
    assert math.isnan(our_spearman(np.ones(4), np.arange(4.0)))


def test_option_credit_ties():
    credit, tied = option_credit(np.asarray([[-1.0, -1.0, -2.0, -3.0, -4.0], [-5.0, -1.0, -1.0, -1.0, -1.0],
                                             [-1.0, -1.0, -1.0, -1.0, -1.0], [-0.5, -1.0, -2.0, -3.0, -4.0]]))
    assert credit.tolist() == [0.5, 0.0, 0.2, 1.0]
    assert tied.tolist() == [True, False, True, False]


def _write_entity(folder: Path, options: list[str], numops_values=range(6), per_group: int = 2) -> None:
    (folder / "entity_tracking").mkdir(parents=True)
    for name in ("regular", "ambiref", "move_contents"):
        with open(folder / "entity_tracking" / f"{name}.jsonl", "w") as handle:
            k = 0
            for numops in numops_values:
                for _ in range(per_group):
                    record = {"sample_id": k, "numops": numops, "input_prefix": "Box 0 contains ",
                              "options": options, "example_id": k}
                    handle.write(json.dumps(record) + "\n")
                    k += 1


def test_constant_model_entity_tracking_is_chance_with_ties(tmp_path):
    """A model whose every distribution is uniform gives the five same-length options equal scores: chance
    (1/5), every item a tie; the official first-index rule would report 100%."""
    model, tok = copy.deepcopy(build_tiny_llama()), build_tiny_tokenizer("bpe")
    with torch.no_grad():
        model.lm_head.weight.zero_()
    options = ["a.", "b.", "c.", "d.", "e."]
    assert len({len(tok(o, add_special_tokens=False)["input_ids"]) for o in options}) == 1
    _write_entity(tmp_path, options)
    out = evaluate((model, tok), "entity_tracking", data_dir=tmp_path, progress=False)
    rows = {r["subtask"]: r for r in out.scores.to_pylist()}
    assert rows[""]["value"] == pytest.approx(0.2, abs=1e-12)
    assert rows[""]["n_ties"] == rows[""]["n"] == 36


def test_long_inputs_scored_whole_or_refused(tmp_path):
    """Rotary positions: an input beyond max_position_embeddings is scored whole (equal to the plain forward),
    and the rows say so; learned absolute positions: one line naming the limit."""
    from transformers import BertConfig, BertForMaskedLM, LlamaConfig, LlamaForCausalLM

    tok = build_tiny_tokenizer("bpe")
    config = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=16,
                         bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    llama = LlamaForCausalLM(config).eval()
    options = ["the red rose and the blue card.", "the blue card and the red rose.", "the hat.", "nothing.", "a b."]
    _write_entity(tmp_path, options, numops_values=[0], per_group=1)
    out = evaluate((llama, tok), "entity_tracking", data_dir=tmp_path, progress=False)
    assert all("positions beyond the configured 16" in r["notes"] for r in out.scores.to_pylist())
    sentence = "Box 0 contains " + options[0]
    got = ours(llama, tok, [sentence], [options[0]], "clm")[0]
    assert got == pytest.approx(span_score(llama, tok, sentence, options[0], "clm"), abs=1e-5)

    btok = build_tiny_tokenizer("bert")
    bert = BertForMaskedLM(BertConfig(vocab_size=len(btok), hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=1, num_attention_heads=2, max_position_embeddings=8)).eval()
    with pytest.raises(UserError, match="exceeds the model's 8 learned positions") as info:
        evaluate((bert, btok), "entity_tracking", scoring="pll", data_dir=tmp_path, progress=False)
    assert "\n" not in str(info.value)


def test_pll_word_l2r_refused(real_data_dir):
    with pytest.raises(UserError, match="defines clm, pll"):
        evaluate(models("bert"), "wug_adj", scoring="pll-word-l2r", limit=2, data_dir=real_data_dir, progress=False)
