"""Data loaders for the offline lm-eval task YAMLs in this folder (``custom_dataset: !function antlm_data.load``).

They read the BabyLM data folder that antlm-bench uses (``--metadata '{"data_dir": "DIR"}'``, else
``$ANTLM_BENCH_DATA``, else ``~/.cache/antlm-bench/data``, filled by ``antlm-bench data fetch babylm``), so lm-eval
never asks the Hugging Face hub for anything. EWoK is read from its password zip in memory, never unpacked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

FIELDS = {"minimal_pairs": ("sentence_good", "sentence_bad"), "ewok": ("Context1", "Target1", "Target2")}


def load(folder: str, name: str, kind: str = "minimal_pairs", data_dir: str | None = None, **_: Any) -> Any:
    """``{"test": Dataset}`` of one subtask: ``folder/name.jsonl[.xz]``, or member ``folder/name.jsonl`` of
    ``folder.zip`` (password ``ewok``) for EWoK. Only the fields the task reads are kept."""
    import datasets

    from antlm_bench.data import read_jsonl, read_zip_jsonl, resolve_data_dir
    from antlm_bench.errors import UserError

    root = resolve_data_dir(data_dir)
    if kind == "ewok":
        zip_path = root / f"{folder}.zip"
        if not zip_path.is_file():
            raise UserError(f"{zip_path}: no such file; run `antlm-bench data fetch ewok` or set $ANTLM_BENCH_DATA")
        records = read_zip_jsonl(zip_path, f"{folder}/{name}.jsonl", "ewok")
    else:
        candidates = [root / folder / f"{name}.jsonl", root / folder / f"{name}.jsonl.xz"]
        path = next((p for p in candidates if p.is_file()), None)
        if path is None:
            raise UserError(f"{Path(candidates[0])}[.xz]: no such file; run `antlm-bench data fetch babylm-eval` or "
                            "set $ANTLM_BENCH_DATA")
        records = read_jsonl(path)
    fields = FIELDS[kind]
    rows = [{f: str(r.get(f, "")) for f in fields} for r in records]
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)})
