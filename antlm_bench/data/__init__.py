"""The data stage: where the data lives, how its files are read, the training corpus and the tokenizer.

Owns the data folder's resolution (``--data-dir``, ``$ANTLM_BENCH_DATA``, the user cache: ``resolve.py``), the
BabyLM file readers (``readers.py``: jsonl, xz, password zips read in memory), content hashes and atomic writes
(``files.py``), ``antlm-bench data fetch`` (``fetch.py``) and its source registry (``sources.py``), the training
corpus (``corpus.py``) and the BPE tokenizer (``tokenizer.py``). It is the bottom of the flow.
"""

from antlm_bench.data.fetch import check_url, fetch
from antlm_bench.data.files import atomic_write_bytes, hash_files, readable_file_mode, sha256_file
from antlm_bench.data.readers import list_zip_members, open_text, parse_jsonl_lines, read_jsonl, read_zip_jsonl
from antlm_bench.data.resolve import DATA_ENV_VAR, default_cache_dir, resolve_data_dir, verify_manifest

__all__ = [
    "DATA_ENV_VAR", "atomic_write_bytes", "check_url", "default_cache_dir", "fetch", "hash_files", "list_zip_members",
    "open_text", "parse_jsonl_lines", "read_jsonl", "read_zip_jsonl", "readable_file_mode", "resolve_data_dir",
    "sha256_file", "verify_manifest",
]
