"""A run's two identities, defined once: which network it is, and which configuration trained it.

- **The network** (``weights_digest``): sha256 over the tensors a checkpoint folder's safetensors files hold, in name
  order, each as ``name|dtype|shape|`` then its raw bytes. The trainer computes it from the files it has just
  written and records it in the checkpoint's ``antlm_state.json`` (and the final one in ``run.json``); every score
  row carries its checkpoint's digest (column ``weights_digest``); the export records it per revision. Two runs are
  *the same networks* only when their digests are equal: whatever changed in between (an optimizer step, a dropout
  draw, another BLAS), different weights are different networks, and equal weights score identically whatever
  produced them. It covers the weights only: not the tokenizer files, the config or the code that runs the model
  (the score rows' ``package_version`` and ``git_commit`` say that).
- **The configuration** (``configuration_digest``, stored as ``config_fingerprint``): a hash of everything a seed
  does not choose but that decides which network a seed trains: the recipe's content (architecture, sizes of the
  preset, tokenizer, optimizer, learning-rate schedules, masking, phase policy), the preset, the schedule, the
  precision, the corpus as trained on (the data hash: its cleaned text after ``--max-words``), the tokenizer (its
  hash) and the package version. Seeds of one configuration are what a leaderboard row pools and
  what a seed SD is borrowed within. It leaves out, on purpose, what only moves float rounding or nothing at all:
  the device, the number of processes, the micro-batch size (gradient accumulation), ``--deterministic``, the
  thread count, checkpoint and evaluation settings, ``--max-steps`` (a run stopped early has no final model; resumed,
  it trains the same network); and the code between two package versions (the git commit).

- **The label** (``run --label``): a name a run carries beside its seed, in its folder's name, its records and its
  rows (the board shows ``SCHEDULE [label]`` as a row of its own). It is not part of the configuration, and it
  changes every random draw: seed s under a label trains with ``training_seed(s, label)``, another initialisation,
  data order and masking than seed s without it. So one configuration under two labels is two independent draws
  paired by seed label: a negative control (``sweep --negative-control``) whose true gap is zero by construction.

- **The run** (``RunIdentity``: recipe, preset, canonical schedule, seed, label): which run a command asks for, built
  once where it is asked for and passed down. It names the run, once for every caller: its folder
  (``folder_name``, also the run id of the rows ``run`` writes), the run id of a checkpoint ``eval`` scores alone
  (``eval_run_id``) and its board row (``row``); and it is the one "same run" check (``difference``): a resume
  continues, and ``run`` reuses, only a folder whose record names this run.

Neither identity says two numbers are equal across machines; the weights digest says two networks are.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from antlm_bench.errors import UserError, one_line

WEIGHTS_FILES = ("model.safetensors", "model-*-of-*.safetensors")  # one file, or save_pretrained's shards
CONFIG_DIGEST_VERSION = 2  # 1: config_fingerprint (recipe, preset, schedule, precision but fp32), before issue 32


def tensors_digest(tensors: Mapping[str, Any]) -> str:
    """sha256 over ``tensors`` (name -> torch tensor) in name order: ``name|dtype|shape|`` then the raw bytes."""
    import torch

    digest = hashlib.sha256()
    for name in sorted(tensors):
        tensor: torch.Tensor = tensors[name]
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def weight_files(folder: str | Path) -> list[Path]:
    """The safetensors files that hold a model folder's weights (one file, or shards), by name."""
    folder = Path(folder)
    return sorted({path for pattern in WEIGHTS_FILES for path in folder.glob(pattern) if path.is_file()})


def weights_digest(folder: str | Path) -> str:
    """The network a model folder holds (see the module's text); a ``UserError`` naming the file when it has no
    weights file or one that does not read."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    files = weight_files(folder)
    if not files:
        raise UserError(f"{Path(folder) / WEIGHTS_FILES[0]}: missing; the model folder holds no safetensors weights")
    tensors: dict[str, Any] = {}
    for path in files:
        try:
            tensors.update(load_file(str(path), device="cpu"))
        except (SafetensorError, OSError, ValueError) as err:
            reason = one_line(err)
            raise UserError(f"{path}: truncated or corrupt ({reason}); the weights cannot be identified") from None
    return tensors_digest(tensors)


def training_seed(seed: int, label: str | None) -> int:
    """The seed every random draw of a run uses: ``seed`` itself without a label (every run before labels), else a
    hash of the label and the seed in [0, 2**31), so that seed s under two labels starts from unrelated states."""
    if label is None:
        return seed
    from antlm_bench.options import MAX_SEED

    digest = hashlib.sha256(f"{label}\0{seed}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % (MAX_SEED + 1)


def labelled_schedule(schedule: str, label: str | None) -> str:
    """The board's name for the runs of ``schedule`` under ``label``: ``2_CLM [negative-control]``, a row of its own
    beside the unlabelled ``2_CLM``; the schedule itself without a label."""
    return f"{schedule} [{label}]" if label else schedule


class RunRecordLike(Protocol):
    """What names a run in a record: run.json's ``RunRecord`` and a checkpoint's ``CheckpointRecord`` both say it."""

    @property
    def recipe(self) -> str | None: ...
    @property
    def preset(self) -> str | None: ...
    @property
    def schedule(self) -> str | None: ...
    @property
    def seed(self) -> int | None: ...
    @property
    def label(self) -> str | None: ...


# the fields that name a run, in the order a difference is reported
_IDENTITY_FIELDS = ("recipe", "preset", "schedule", "seed", "label")


@dataclass(frozen=True)
class RunIdentity:
    """Which run: a recipe's preset trained through a schedule from a seed, under a label or none. Built once where a
    run is asked for (``train``, ``run``, a sweep's cell) and passed down; it names the run (:attr:`folder_name`,
    :attr:`row`, :attr:`eval_run_id`), draws its random numbers (:attr:`random_seed`) and tells whether a record is
    of the same run (:meth:`difference`)."""

    recipe: str
    preset: str
    schedule: str  # canonical (runs.schedule)
    seed: int | None  # None only as a record that does not say reads (a foreign antlm_state.json)
    label: str | None = None

    @classmethod
    def of_record(cls, record: RunRecordLike) -> RunIdentity:
        """The run a record (run.json's or a checkpoint's) says it belongs to; a field it does not say is empty."""
        return cls(record.recipe or "", record.preset or "", record.schedule or "", record.seed, record.label)

    @property
    def folder_name(self) -> str:
        """The folder ``run`` trains the seed in (and a sweep's cell is), and the run id of the rows ``run`` and
        ``--eval-every`` write there: ``<recipe>-<preset>-<schedule>[-<label>]-seed<s>``, the schedule's punctuation as
        ``_``."""
        slug = re.sub(r"[^A-Za-z0-9.]+", "_", self.schedule).strip("_")
        label = f"-{self.label}" if self.label else ""
        return f"{self.recipe}-{self.preset}-{slug}{label}-seed{self.seed}"

    @property
    def eval_run_id(self) -> str:
        """The run id of the rows ``eval`` scores from a checkpoint's record alone (no run folder around it): the
        fields joined by ``-``, the empty ones left out, the schedule's ``+:()`` kept. Not the folder name (rows of a
        ``run`` carry that): rows already committed carry both spellings, so both stay as they are."""
        parts = [self.recipe, self.preset, self.schedule, self.label or "",
                 f"seed{self.seed if self.seed is not None else ''}"]
        return re.sub(r"[^A-Za-z0-9_.+:()-]+", "_", "-".join(part for part in parts if part))

    @property
    def row(self) -> str:
        """The board row the run pools into: its schedule, and its label beside it (``labelled_schedule``)."""
        return labelled_schedule(self.schedule, self.label)

    @property
    def random_seed(self) -> int:
        """What every random draw of the run starts from (``training_seed``)."""
        if self.seed is None:
            raise ValueError("a run identity without a seed draws nothing")
        return training_seed(self.seed, self.label)

    def difference(self, record: RunRecordLike) -> str | None:
        """The one "same run" check: None when ``record`` (run.json's or a checkpoint's) is of this run, else the
        words naming the first field that differs, as ``seed=3, now 4`` (the record's value, then this one's). A
        field the record does not say differs too: an unnamed run is not provably this one."""
        for name in _IDENTITY_FIELDS:
            then, now = getattr(record, name), getattr(self, name)
            if then != now:
                return f"{name}={then!r}, now {now!r}"
        return None


def configuration_digest(recipe_content: Mapping[str, Any], preset: str, preset_content: Mapping[str, Any],
                         schedule: str, precision: str, data_hash: str, tokenizer_hash: str,
                         package_version: str) -> str:
    """The configuration a seed trains (see the module's text): 16 hex digits, recorded as ``config_fingerprint``.
    ``recipe_content``: the recipe as JSON, without its description, source and presets."""
    content = {
        "version": CONFIG_DIGEST_VERSION, "recipe": dict(recipe_content),
        "preset": {"name": preset, **preset_content}, "schedule": schedule, "precision": precision,
        "data_hash": data_hash, "tokenizer_hash": tokenizer_hash, "package_version": package_version,
    }
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()[:16]
