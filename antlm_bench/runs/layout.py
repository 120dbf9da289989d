"""``RunLayout``: where a run folder keeps what. The one place that spells a run's file and folder names.

    <run>/run.json                   the run file: settings, plan, status (running, finished, stopped, ...)
    <out>/eval.json                  in an ``eval --output`` folder: the latest evaluation's record
    <run>/metrics.jsonl              one line per optimizer step
    <run>/checkpoints/phase-<k>-<OBJ>  a checkpoint at every phase end (the last phase's is the final model)
    <run>/checkpoints/epoch-<e>      with --save-every-epoch / --eval-every epoch
    <run>/checkpoints/chck_<N>M      at the first step where the words seen reach N million (--save-at-words)
    <run>/last -> .resume/step-<N>   the resume point (a link swapped atomically)
    <run>/scores.parquet/            the results store (per-phase scores, final evaluations)
    <run>/index.jsonl                one line per committed evaluation, for people
    <run>/evals/                     markers of finished final evaluations (``run`` reuses them)
    <run>/work/                      scratch space of evaluations (fine-tuned heads)
    <run>/tensorboard/               with --report-to tensorboard

Every stage finds a run's parts here; none spells a file name or parses a phase label itself.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from antlm_bench.data.files import not_regular, refuse_planted_links
from antlm_bench.errors import UserError
from antlm_bench.runs.run_file import RunRecord, read_run_record
from antlm_bench.runs.schedule import Phase, parse_schedule

RUN_FILE = "run.json"
EVAL_FILE = "eval.json"  # the latest evaluation's record, in an eval --output folder (never a run's run.json)
METRICS_FILE = "metrics.jsonl"
CHECKPOINTS = "checkpoints"
LAST = "last"
RESUME_DIR = ".resume"
SCORES = "scores.parquet"
ITEMS = "items.parquet"
INDEX_FILE = "index.jsonl"
EVALS_DIR = "evals"
WORK_DIR = "work"
TENSORBOARD_DIR = "tensorboard"

# what a training run owns in its folder (a restart clears these; evaluations' results are kept apart below)
RUN_ITEMS = (RUN_FILE, METRICS_FILE, CHECKPOINTS, SCORES, LAST, RESUME_DIR, INDEX_FILE, TENSORBOARD_DIR)
# what only --overwrite may delete: finished checkpoints and the scores of checkpoints
KEPT_ITEMS = (CHECKPOINTS, SCORES, INDEX_FILE)
# what a command makes in a run or results folder, by kind: never a link (one there was planted, and writing
# through it would change another folder), never the other kind (``last`` is the one link we make)
OWN_FILES = (RUN_FILE, EVAL_FILE, METRICS_FILE, INDEX_FILE)
OWN_FOLDERS = (CHECKPOINTS, SCORES, ITEMS, RESUME_DIR, EVALS_DIR, WORK_DIR, TENSORBOARD_DIR)

WORDS_CHECKPOINT = re.compile(r"chck_(\d+)([KM]?)")
_WORD_SCALE = {"": 1, "K": 1_000, "M": 1_000_000}


def phase_checkpoint_name(index: int, phase: Phase) -> str:
    """``phase-<k>-<OBJ>``: ``phase-2-MIX`` for a mixture (the weights are in the record, not the name)."""
    return f"phase-{index}-{phase.objective}"


def words_checkpoint_name(words: int) -> str:
    """``chck_<N>M`` (N million words, the BabyLM name), ``chck_<N>K`` for thousands, else ``chck_<N>``."""
    if words % 1_000_000 == 0:
        return f"chck_{words // 1_000_000}M"
    if words % 1_000 == 0:
        return f"chck_{words // 1_000}K"
    return f"chck_{words}"


def words_of_checkpoint(name: str) -> int | None:
    """The words count a ``chck_<N>[K|M]`` name stands for; None for any other name."""
    match = WORDS_CHECKPOINT.fullmatch(name)
    return int(match.group(1)) * _WORD_SCALE[match.group(2)] if match else None


@dataclass(frozen=True)
class RunLayout:
    """The paths of one run folder (nothing is read or made until asked)."""

    folder: Path

    @property
    def run_file(self) -> Path:
        return self.folder / RUN_FILE

    @property
    def eval_file(self) -> Path:
        return self.folder / EVAL_FILE

    @property
    def metrics_file(self) -> Path:
        return self.folder / METRICS_FILE

    @property
    def checkpoints(self) -> Path:
        return self.folder / CHECKPOINTS

    @property
    def last(self) -> Path:
        return self.folder / LAST

    @property
    def resume_dir(self) -> Path:
        return self.folder / RESUME_DIR

    @property
    def scores(self) -> Path:
        return self.folder / SCORES

    @property
    def evals_dir(self) -> Path:
        return self.folder / EVALS_DIR

    @property
    def work_dir(self) -> Path:
        return self.folder / WORK_DIR

    @property
    def tensorboard_dir(self) -> Path:
        return self.folder / TENSORBOARD_DIR

    def checkpoint(self, name: str) -> Path:
        return self.checkpoints / name

    def phase_checkpoint(self, index: int, phase: Phase) -> Path:
        return self.checkpoint(phase_checkpoint_name(index, phase))

    def saved_checkpoints(self, prefix: str = "") -> list[Path]:
        """The finished checkpoint folders whose names start with ``prefix`` (staging folders left out), by name."""
        if not self.checkpoints.is_dir():
            return []
        return sorted(path for path in self.checkpoints.iterdir()
                      if path.name.startswith(prefix) and not path.name.startswith(".") and path.is_dir())

    def words_checkpoints(self) -> list[tuple[int, Path]]:
        """(words, folder) of every ``chck_<N>`` checkpoint, fewest words first."""
        found = [(words_of_checkpoint(path.name), path) for path in self.saved_checkpoints("chck_")]
        return sorted((words, path) for words, path in found if words is not None)

    def has_run(self) -> bool:
        """Whether the folder holds (or held) a training run: its run file or its checkpoints folder."""
        # anything at run.json's name counts (a FIFO, a link): read_run_file then says what is wrong with it
        return os.path.lexists(self.run_file) or self.checkpoints.is_dir()

    def read_run_file(self) -> RunRecord | None:
        """run.json through its model (runs.run_file), or None where there is none; a one-line error naming the
        file (and the field) when it is damaged, a link (to another run's, say) or anything but a regular file."""
        if not os.path.lexists(self.run_file):
            return None
        return read_run_record(self.run_file)

    def check_entries(self, fix: str) -> None:
        """Refuse, before anything is written, what a command did not make among the names it writes here: a link
        at any of them (``last`` aside, the one link a run makes), a file where a folder belongs, or anything but
        a regular file where a file belongs (eval.json as a folder, a FIFO as run.json). ``fix``: what to do."""
        refuse_planted_links(self.folder, (*OWN_FILES, *OWN_FOLDERS), fix)
        for name in OWN_FOLDERS:
            entry = self.folder / name
            if entry.exists() and not entry.is_dir():
                raise UserError(f"{entry}: a file where antlm-bench keeps its {name} folder; it was left as it is: "
                                f"{fix}")
        for name in OWN_FILES:
            kind = not_regular(self.folder / name)
            if kind is not None:
                raise UserError(f"{self.folder / name}: {kind}, not the regular file antlm-bench writes as {name}; "
                                f"it was left as it is: {fix}")

    def final_checkpoint(self) -> Path | None:
        """The last phase's checkpoint as the run file's schedule names it, if it was saved; None otherwise."""
        record = self.read_run_file()
        if record is None:
            return None
        schedule = record.schedule
        if schedule is None:
            raise UserError(f"{self.run_file}: field schedule missing; the run folder is damaged, train again")
        try:
            phases = parse_schedule(schedule).phases
        except UserError as err:
            raise UserError(f"{self.run_file}: field schedule: {err}") from None
        final = self.phase_checkpoint(len(phases) - 1, phases[-1])
        return final if final.is_dir() else None

    def model_folder(self) -> tuple[Path, str]:
        """The checkpoint that stands for the run where a model is asked for: the final one, else the resume point
        ``last`` (a run stopped early); (folder, why) for the caller to say which one was taken."""
        final = self.final_checkpoint()
        if final is not None:
            return final, f"{self.folder} is a run folder: its final checkpoint {final.relative_to(self.folder)}"
        if self.last.is_dir():
            return self.last, (f"{self.folder} is a run folder that did not finish: its resume point {LAST} "
                               f"({self.last.resolve().name})")
        raise UserError(f"{self.folder}: a run folder without a final checkpoint or a resume point; train it (or "
                        "--resume) first, or pass a checkpoint folder")


def run_folder_of(checkpoint: str | Path) -> Path | None:
    """The run folder a checkpoint belongs to (``RUN/checkpoints/NAME``, ``RUN/last``, ``RUN/.resume/step-N``,
    ``RUN/checkpoints/NAME/chck_1M``), or None for a folder of no run."""
    path = Path(checkpoint).expanduser().absolute()
    for parent in list(path.parents)[:3]:
        if os.path.lexists(RunLayout(parent).run_file):
            return parent
    return None


def model_folder(path: str | Path) -> tuple[Path, str | None]:
    """Where a model is asked for (``eval --model``, ``export CKPT``): (the model folder, why that one). ``path``
    itself when it holds config.json (or is no run: the caller's loader then says what is wrong with it), else the
    checkpoint its run stands for (``RunLayout.model_folder``), with the reason to print."""
    path = Path(path).expanduser()
    if (path / "config.json").is_file() or not path.is_dir():
        return path, None
    layout = RunLayout(path)
    if not layout.has_run():
        return path, None
    return layout.model_folder()
