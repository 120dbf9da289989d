"""Damaged evaluation data is refused with one line naming the file (and the record, line or column), before any
number is made of it: a folder where a data file belongs, an empty sentence, a WUG ratio that is not a finite
number, a reading file too short or too empty to fit its regressions (issue #25)."""

from __future__ import annotations

import json
import lzma
import shutil
from pathlib import Path

import pytest
from tiny_models import build_tiny_llama, build_tiny_tokenizer

from antlm_bench.errors import UserError
from antlm_bench.evaluate import evaluate


@pytest.fixture(scope="module")
def model():
    return build_tiny_llama(), build_tiny_tokenizer("bpe")


def _copy(real_data_dir: Path, tmp_path: Path, folder: str) -> Path:
    shutil.copytree(real_data_dir / folder, tmp_path / folder)
    return tmp_path / folder


def _refused(model, data_dir: Path, task: str, *fragments: str) -> str:
    with pytest.raises(UserError) as caught:
        evaluate(model, task, limit=3, data_dir=data_dir, progress=False)
    message = str(caught.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


def test_a_folder_where_a_data_file_belongs(model, real_data_dir: Path, tmp_path: Path) -> None:
    folder = _copy(real_data_dir, tmp_path, "blimp_filtered")
    victim = sorted(folder.iterdir())[0]
    victim.unlink()
    victim.mkdir()
    _refused(model, tmp_path, "blimp", str(victim), "a folder where a data file belongs")


def test_a_dangling_link_where_a_data_file_belongs(model, real_data_dir: Path, tmp_path: Path) -> None:
    folder = _copy(real_data_dir, tmp_path, "supplement_filtered")
    victim = sorted(folder.iterdir())[0]
    victim.unlink()
    victim.symlink_to(tmp_path / "nowhere")
    _refused(model, tmp_path, "blimp_supplement", str(victim), "dangling link")


def test_an_empty_sentence(model, real_data_dir: Path, tmp_path: Path) -> None:
    folder = _copy(real_data_dir, tmp_path, "supplement_filtered")
    victim = sorted(folder.iterdir())[0]
    opener = lzma.open if victim.suffix == ".xz" else open
    with opener(victim, "rt", encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    records[1]["sentence_good"] = "   "
    with opener(victim, "wt", encoding="utf-8") as handle:
        handle.write("".join(json.dumps(r) + "\n" for r in records))
    _refused(model, tmp_path, "blimp_supplement", str(victim), "record 2", "'sentence_good' is empty")


@pytest.mark.parametrize("ratio", ["NaN", "Infinity", "true", '"0.5"'])
def test_a_wug_ratio_that_is_not_a_finite_number(model, real_data_dir: Path, tmp_path: Path, ratio: str) -> None:
    folder = _copy(real_data_dir, tmp_path, "wug_adj_nominalization")
    (victim,) = folder.iterdir()
    with lzma.open(victim, "rt", encoding="utf-8") as handle:
        lines = [line for line in handle if line.strip()]
    record = json.loads(lines[0])
    lines[0] = json.dumps(record).replace(json.dumps(record["ratio"]), ratio, 1) + "\n"
    with lzma.open(victim, "wt", encoding="utf-8") as handle:
        handle.write("".join(lines))
    _refused(model, tmp_path, "wug_adj", str(victim), "record 1", "finite numeric 'ratio'")


def _reading(real_data_dir: Path, tmp_path: Path) -> tuple[Path, list[str]]:
    folder = tmp_path / "reading"
    folder.mkdir()
    with lzma.open(real_data_dir / "reading" / "reading_data.csv.xz", "rt", encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    return folder / "reading_data.csv", lines


def test_a_reading_file_too_short_for_its_regressions(model, real_data_dir: Path, tmp_path: Path) -> None:
    path, lines = _reading(real_data_dir, tmp_path)
    path.write_text("\n".join(lines[:6]) + "\n", encoding="utf-8")  # the header and five rows: today 1/0
    _refused(model, tmp_path, "reading", str(path), "rows with a value", "at least 30")


def test_a_reading_column_with_no_values(model, real_data_dir: Path, tmp_path: Path) -> None:
    path, lines = _reading(real_data_dir, tmp_path)
    header = lines[0].split(",")
    column = header.index("RTgopast")
    blanked = [lines[0]] + [",".join("NA" if i == column else v for i, v in enumerate(line.split(",")))
                            for line in lines[1:] if len(line.split(",")) == len(header)]
    path.write_text("\n".join(blanked) + "\n", encoding="utf-8")
    _refused(model, tmp_path, "reading", str(path), "column RTgopast", "0 rows with a value")


@pytest.mark.parametrize("numops", ['"two"', "1.5", "true", "-1"])
def test_an_entity_tracking_numops_that_is_not_a_count(model, real_data_dir: Path, tmp_path: Path, numops: str) -> None:
    folder = _copy(real_data_dir, tmp_path, "entity_tracking")
    victim = folder / "regular.jsonl.xz"
    with lzma.open(victim, "rt", encoding="utf-8") as handle:
        lines = [line for line in handle if line.strip()]
    record = json.loads(lines[0])
    record["numops"] = json.loads(numops)
    lines[0] = json.dumps(record) + "\n"
    with lzma.open(victim, "wt", encoding="utf-8") as handle:
        handle.write("".join(lines))
    _refused(model, tmp_path, "entity_tracking", str(victim), "record 1", "field numops")
