"""--convention babylm-2026: entity tracking without its "nothing"-answer items, as the BabyLM 2026 pipeline scores
it, on the real data: parity of the filter with an independent implementation of the rule and with the item counts
the 2026 pipeline checks predictions against; the 2026 fast set; the 2026 task group without WUG."""

from __future__ import annotations

import json
import lzma
from collections import Counter
from pathlib import Path

import pytest
from tiny_models import build_tiny_llama, build_tiny_tokenizer

from antlm_bench.conventions import resolve_convention
from antlm_bench.evaluate import evaluate
from antlm_bench.tasks import resolve_tasks

FILES = ("regular", "ambiref", "move_contents")
# the 2026 pipeline's collate_preds.py: ENTITY_TRACKING_SIZES, what it requires of a full submission's predictions
# once the "nothing"-answer items are gone (9,483 items in the 2025 files, 6,780 here); its fast set
# (ENTITY_TRACKING_FAST_SIZE) is the regular groups alone, with the same counts
OFFICIAL_2026_SIZES = {
    "regular": [517, 409, 405, 425, 388, 94],
    "ambiref": [508, 428, 413, 409, 434, 123],
    "move_contents": [516, 437, 399, 406, 353, 116],
}


def leaderboard_keeps(gold: dict) -> bool:
    """The 2026 leaderboard's rule for a gold item (written from its description): dropped when its target is text
    containing "nothing". The data files here carry the options with the target first, not a target field."""
    target = gold["options"][0]
    return not (isinstance(target, str) and "nothing" in target)


def _raw_items(data_dir: Path, name: str) -> list[dict]:
    with lzma.open(data_dir / "entity_tracking" / f"{name}.jsonl.xz", "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _adapter(eval_set: str = "full"):
    (request,) = resolve_tasks("entity_tracking")
    adapter = request.adapter()
    adapter.eval_set = eval_set
    return adapter


def test_the_filter_keeps_what_the_2026_pipeline_counts(real_data_dir: Path) -> None:
    loaded, dropped = _adapter().load(real_data_dir, None, skip_nothing_targets=True)
    everything, none_dropped = _adapter().load(real_data_dir, None)
    assert set(none_dropped.values()) == {0}
    for name in FILES:
        raw = _raw_items(real_data_dir, name)
        kept = [item for item in raw if leaderboard_keeps(item)]
        by_group = Counter(item["numops"] for item in kept)
        assert [by_group[g] for g in range(6)] == OFFICIAL_2026_SIZES[name]
        # the adapter keeps exactly these items, in file order, and drops the rest
        assert [r["sample_id"] for r in loaded[name]] == [r["sample_id"] for r in kept]
        assert dropped[name] == len(raw) - len(kept) > 800
        assert len(everything[name]) == len(raw)
        # why the rule exists: "nothing." is an option only where it is the correct one
        assert all(not any("nothing" in o for o in item["options"][1:]) for item in raw)
    assert sum(len(v) for v in loaded.values()) == 6780 and sum(len(v) for v in everything.values()) == 9483


def test_the_2026_fast_set_is_regular_filtered(real_data_dir: Path) -> None:
    loaded, _ = _adapter("fast").load(real_data_dir, None, skip_nothing_targets=True)
    assert list(loaded) == ["regular"]
    assert [Counter(r["numops"] for r in loaded["regular"])[g] for g in range(6)] == OFFICIAL_2026_SIZES["regular"]


def test_eval_under_babylm_2026_scores_no_nothing_item(real_data_dir: Path) -> None:
    model = (build_tiny_llama(), build_tiny_tokenizer("bpe"))
    out = evaluate(model, "entity_tracking", limit=2, data_dir=real_data_dir, progress=False, log_samples=True,
                   convention="babylm-2026")
    rows = out.scores.to_pylist()
    assert {r["convention"] for r in rows} == {"babylm-2026"}
    total = next(r for r in rows if r["subtask"] == "")
    assert total["n"] == 2 * 6 * 3  # --limit counts the items kept
    assert "'nothing' answer dropped (2703)" in total["notes"]
    assert out.items is not None and out.items.num_rows == 36
    assert not any("nothing" in good for good in out.items.column("sentence_good").to_pylist())
    # the same items under babylm-2025 include "nothing" answers (the first items of several groups are such)
    before = evaluate(model, "entity_tracking", limit=2, data_dir=real_data_dir, progress=False, log_samples=True)
    assert any("nothing" in good for good in before.items.column("sentence_good").to_pylist())


def test_the_2026_convention_and_group() -> None:
    convention = resolve_convention("babylm-2026")
    assert convention.skip_nothing_targets and not convention.leading_space
    assert not resolve_convention("babylm-2025").skip_nothing_targets
    names = [request.name for request in resolve_tasks("babylm-2026")]
    assert "wug_adj" not in names and {"entity_tracking", "reading", "blimp", "glue"} <= set(names)
    assert "wug_adj" in [request.name for request in resolve_tasks("babylm-2025")]


@pytest.mark.parametrize("command", ["train", "run"])
def test_babylm_2026_is_for_evaluation_only(command: str) -> None:
    """Training keeps the conventions its --eval-every scores with (the per-phase scores stay comparable)."""
    from pydantic import ValidationError

    if command == "train":
        from antlm_bench.config import TrainConfig

        TrainConfig.model_validate({"model": "gpt-bert", "output": "x", "convention": "babylm-2025"})
        with pytest.raises(ValidationError, match="convention"):
            TrainConfig.model_validate({"model": "gpt-bert", "output": "x", "convention": "babylm-2026"})
    else:
        from antlm_bench.config import RunConfig

        RunConfig.model_validate({"model": {"name": "gpt-bert"}, "evaluation": {"convention": "babylm-2025"}})
        with pytest.raises(ValidationError, match="convention"):
            RunConfig.model_validate({"model": {"name": "gpt-bert"}, "evaluation": {"convention": "babylm-2026"}})
