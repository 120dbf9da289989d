"""Damaged data for every 2025 task, by class (issue #34): each damage is refused with one line naming the file,
never a traceback and never a plausible number. The classes: a file that cannot be read as its format (truncated,
another encoding, not xz, a field past the csv module's limit), a file with no records, a data file that is a
folder or a dangling link (refused by every task that reads a folder, heldout as BLiMP), records that cannot be
scored (good == bad, pair ids all 0, empty options) and values of the wrong type (GLUE sentences that are numbers
or null)."""

from __future__ import annotations

import json
import lzma
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from tiny_models import build_tiny_llama, build_tiny_tokenizer

from antlm_bench.errors import UserError
from antlm_bench.evaluate import evaluate


@pytest.fixture(scope="module")
def model():
    return build_tiny_llama(), build_tiny_tokenizer("bpe")


def _records(path: Path) -> list[dict]:
    opener = lzma.open if path.suffix == ".xz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _write_records(path: Path, records: list[dict]) -> None:
    opener = lzma.open if path.suffix == ".xz" else open
    with opener(path, "wt", encoding="utf-8") as handle:
        handle.write("".join(json.dumps(r) + "\n" for r in records))


def _edit(change: Callable[[list[dict]], list[dict]]) -> Callable[[Path], None]:
    return lambda path: _write_records(path, change(_records(path)))


def _each(field: str, value: object, first_only: bool = False) -> Callable[[Path], None]:
    def change(records: list[dict]) -> list[dict]:
        for i, record in enumerate(records):
            if not first_only or i == 0:
                record[field] = value
        return records
    return _edit(change)


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _not_xz(path: Path) -> None:
    path.write_bytes(b"plain text, not xz at all\n" * 10)


def _latin1(path: Path) -> None:
    opener = lzma.open if path.suffix == ".xz" else open
    with opener(path, "rb") as handle:
        text = handle.read().decode("utf-8")
    with opener(path, "wb") as handle:
        handle.write(text.replace("e", "\u00e9", 50).encode("latin-1", "replace"))


def _write_text(path: Path, text: str) -> None:
    with lzma.open(path, "wt", encoding="utf-8") as handle:
        handle.write(text)


def _empty(path: Path) -> None:
    opener = lzma.open if path.suffix == ".xz" else open
    with opener(path, "wb") as handle:
        handle.write(b"")


def _folder(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _dangling(path: Path) -> None:
    path.unlink()
    path.symlink_to(path.parent / "nowhere")


def _huge_field(path: Path) -> None:
    with lzma.open(path, "rt", encoding="utf-8") as handle:
        header = handle.readline()
    with lzma.open(path, "wt", encoding="utf-8") as handle:
        handle.write(header + '"' + "x" * 200_000 + '"' + "," * header.count(",") + "\n")


def _good_is_bad(records: list[dict]) -> list[dict]:
    for record in records:
        record["sentence_bad"] = record["sentence_good"]
    return records


# task -> (data folder, the file damaged, relative to the folder)
FILES = {
    "blimp": ("blimp_filtered", None),
    "entity_tracking": ("entity_tracking", "regular.jsonl.xz"),
    "wug_adj": ("wug_adj_nominalization", "wug_adj_nominalization.jsonl.xz"),
    "reading": ("reading", "reading_data.csv.xz"),
    "heldout": ("pretrain_sample", "dev/childes.dev"),
    "glue:rte": ("glue_filtered", "rte.valid.jsonl.xz"),
}

# damage class -> (what to do to the file, the tasks whose files it applies to, a piece of the line)
CASES: list[tuple[str, str, Callable[[Path], None], tuple[str, ...]]] = [
    # a file that is not its format
    *[("truncated-xz", t, _truncate, ("corrupt",)) for t in ("entity_tracking", "wug_adj", "reading", "glue:rte")],
    *[("not-xz", t, _not_xz, ("xz",)) for t in ("entity_tracking", "wug_adj", "reading", "glue:rte")],
    *[("latin-1", t, _latin1, ("UTF-8",)) for t in ("entity_tracking", "wug_adj", "reading", "heldout")],
    ("csv-field-too-large", "reading", _huge_field, ("field",)),
    ("csv-ragged-rows", "reading", lambda p: _write_text(p, "item,word\n1,a,extra,extra\n"), ("column|empty",)),
    # no records
    *[("empty", t, _empty, ("no |empty|at least",)) for t in ("entity_tracking", "wug_adj", "reading", "heldout", "glue:rte")],
    # a folder or a dangling link where a data file belongs
    *[("a-folder", t, _folder, ("a folder where a data file belongs",))
      for t in ("entity_tracking", "wug_adj", "reading", "heldout", "glue:rte")],
    *[("dangling-link", t, _dangling, ("dangling link",))
      for t in ("entity_tracking", "wug_adj", "reading", "heldout", "glue:rte")],
    # records that cannot be scored
    ("good-equals-bad", "blimp", _edit(_good_is_bad), ("sentence_good", "sentence_bad")),
    ("pair-ids-all-0", "blimp", _each("pair_id", 0), ("pair_id",)),
    ("options-empty", "entity_tracking", _each("options", [], first_only=True), ("options",)),
    ("options-one-empty-text", "entity_tracking",
     _edit(lambda rs: [{**r, "options": [*r["options"][:-1], "  "]} if i == 0 else r for i, r in enumerate(rs)]),
     ("options",)),
    # values of the wrong type
    ("sentence-a-number", "glue:rte", _each("sentence1", 12345, first_only=True), ("sentence1",)),
    ("sentence-null", "glue:rte", _each("sentence2", None, first_only=True), ("sentence2",)),
]


def _damage(real_data_dir: Path, tmp_path: Path, task: str, damage: Callable[[Path], None]) -> Path:
    folder, name = FILES[task]
    shutil.copytree(real_data_dir / folder, tmp_path / folder)
    victim = (tmp_path / folder / name) if name else sorted((tmp_path / folder).iterdir())[0]
    damage(victim)
    return victim


@pytest.mark.parametrize(("damage", "task", "apply", "fragments"),
                         [pytest.param(*c, id=f"{c[0]}-{c[1]}") for c in CASES])
def test_damaged_task_data_is_one_line(model, real_data_dir: Path, tmp_path: Path, damage: str, task: str,
                                       apply: Callable[[Path], None], fragments: tuple[str, ...]) -> None:
    victim = _damage(real_data_dir, tmp_path, task, apply)
    options = {"epochs": 1, "max_train_examples": 4, "probe": True} if task.startswith("glue") else None
    with pytest.raises(UserError) as caught:
        evaluate(model, task, limit=3, data_dir=tmp_path, progress=False, options=options)
    message = str(caught.value)
    assert "\n" not in message
    assert victim.name in message or victim.parent.name in message, message
    for fragment in fragments:  # a|b: either
        assert any(part.lower() in message.lower() for part in fragment.split("|")), (fragment, message)


def test_corpus_size():
    assert len(CASES) >= 35 and len({(c[0], c[1]) for c in CASES}) == len(CASES)
