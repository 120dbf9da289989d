"""The run folder, its checkpoints and resuming from them.

Checkpoints: ``checkpoints/phase-<k>-<OBJ>`` at every phase end (``epoch-<e>`` with ``--save-every-epoch`` or
``--eval-every epoch``), ``chck_<N>M`` (or ``chck_<N>K``) at the first step where the words seen reach each
``--save-at-words`` count, the resume point ``last`` every ``--save-every-steps`` / ``--save-every-minutes``, at
every phase end, where ``--max-steps`` stops and on SIGINT / SIGTERM. Resume: weights, optimizer, scheduler
position and every process's RNG state come back from ``last`` (or an older resume point when it is damaged); the
data order and the masks are functions of (seed, step), so a resumed run computes exactly what the uninterrupted
run computed. Words seen = tokens seen x the corpus's words / its tokens per epoch (floor; repeats count, an
epoch is the corpus's words), a function of the step, so a resume neither skips nor repeats a words checkpoint:
the ones due at a step are written before that step's resume point. A folder is read before anything is deleted, and a resume deletes nothing of the run.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import shutil
import time
from pathlib import Path
from typing import Any

import torch

from antlm_bench import __version__
from antlm_bench.errors import UserError
from antlm_bench.training.checkpoint import (
    LAST,
    RESUME_DIR,
    describe_last,
    load_weights,
    read_trainer_state,
    resume_points,
    write_checkpoint,
    write_resume_point,
)
from antlm_bench.training.plan import PhasePlan, words_checkpoint_name
from antlm_bench.runs.schedule import format_number

RUN_FILE = "run.json"
METRICS_FILE = "metrics.jsonl"
CHECKPOINTS = "checkpoints"
SCORES = "scores.parquet"
_RUN_ITEMS = (RUN_FILE, METRICS_FILE, CHECKPOINTS, SCORES, LAST, RESUME_DIR, "index.jsonl", "tensorboard")
# what a run folder holds that a restart must never delete: finished checkpoints and the scores of checkpoints
_KEEP_ITEMS = (CHECKPOINTS, SCORES, "index.jsonl")


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")



def _first_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return (text[:200] + "...") if len(text) > 200 else text or type(err).__name__



def _kept_items(out: Path) -> list[str]:
    """What a run folder holds that only --overwrite may delete: finished checkpoints, scores."""
    kept = []
    folder = out / CHECKPOINTS
    if folder.is_dir():
        kept += [f"{CHECKPOINTS}/{p.name}" for p in sorted(folder.iterdir()) if not p.name.startswith(".")]
    kept += [name for name in _KEEP_ITEMS if name != CHECKPOINTS and (out / name).exists()]
    return kept



class RunFolder:
    """The run folder: what a start may do with it (fresh, restart or resume), making it this run's, and loading a
    resume point (mixed into ``Trainer`` through ``CheckpointAndResume``). Reads before it deletes anything."""

    config: Any
    output: Path
    dist: Any
    recipe: Any
    schedule: Any
    corpus: Any
    tokenizer: Any
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    device: torch.device
    plans: list[PhasePlan]
    step: int
    tokens_seen: int
    elapsed_before: float
    global_batch: int
    seq_len: int
    steps_per_epoch: int
    total_steps: int
    n_sequences: int
    _start_time: float
    _last_save_time: float
    n_words: int
    _tokens_before: int

    def _inspect_output(self) -> tuple[str, list[Path]]:
        """Decide, reading only, what to do with the folder: ("fresh", []), ("restart", []) when it holds nothing
        worth keeping, or ("resume", the resume points to try, best first). Refuses a folder that holds another
        run, and a --resume that could only go on by deleting finished checkpoints."""
        config, out = self.config, self.output
        present = [name for name in _RUN_ITEMS if (out / name).exists() or (out / name).is_symlink()]
        if config.resume:
            points = resume_points(out)
            if points:
                self._check_same_run(out)
                return "resume", points
            kept = _kept_items(out)
            if kept:
                shown = ", ".join(kept[:3]) + (f" and {len(kept) - 3} more" if len(kept) > 3 else "")
                raise UserError(f"--resume {out}: no resume point ({describe_last(out)}, and no other "
                                f"{RESUME_DIR}/step-* folder), but the run holds {shown}; nothing was deleted; "
                                "pass --overwrite to train it again from the start, or train into a new --output")
            if present:  # a run that never reached its first checkpoint: nothing to keep
                self._say(f"--resume: {out} has no resume checkpoint yet; starting from the beginning")
                return "restart", []
            return "fresh", []
        if present:
            if not config.overwrite:
                raise UserError(f"{out} already holds a training run ({', '.join(present)}); pass --resume to "
                                "continue it or --overwrite to start again")
            return "restart", []
        return "fresh", []

    def _claim_output(self, resuming: bool) -> None:
        """Make the run folder ours: a restart clears the old run's items, every start clears killed writers'
        staging folders. A resume deletes nothing of the run."""
        out = self.output
        self.dist.barrier()
        if self.dist.main:
            if not resuming:
                for name in _RUN_ITEMS:
                    path = out / name
                    if path.is_symlink() or path.is_file():
                        path.unlink()
                    elif path.exists():
                        shutil.rmtree(path)
            out.mkdir(parents=True, exist_ok=True)
            for leftover in list(out.glob(f"{CHECKPOINTS}/.*.tmp-*")) + list(out.glob(f"{RESUME_DIR}/.*.tmp-*")):
                shutil.rmtree(leftover, ignore_errors=True)  # staging folders of a killed writer
        self.dist.barrier()

    def _resume(self, points: list[Path]) -> Path:
        """Load the first resume point that holds up (see ``_load_resume_point``), saying so when it is not
        ``last``; refuse with one line when none does. Nothing is deleted either way."""
        problems: list[str] = []
        for path in points:
            try:
                self._load_resume_point(path)
            except UserError as err:
                problems.append(str(err))
                continue
            if problems:
                self._say(f"--resume: {problems[0]}; resuming from {path} instead")
            return path
        more = f" (and {len(problems) - 1} other resume point(s) unusable too)" if len(problems) > 1 else ""
        raise UserError(f"{problems[0]}{more}; nothing was deleted; pass --overwrite to train the run again from "
                        "the start, or train into a new --output")

    def _check_same_run(self, out: Path) -> None:
        path = out / RUN_FILE
        if not path.is_file():
            return
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            return
        mine = {"recipe": self.recipe.name, "preset": self.config.preset, "schedule": self.schedule.canonical,
                "seed": self.config.seed}
        for key, value in mine.items():
            if key in record and record[key] != value:
                raise UserError(f"--resume {out}: the run was started with {key}={record[key]!r}, now {value!r}; "
                                "resume with the same settings or train into a new --output")

    def _load_resume_point(self, path: Path) -> None:
        """Check a resume point against this run and load it: the records parse, the step agrees across them and
        with the schedule, the weights load and fit the model. Everything is checked before anything is set."""
        state, trainer_state = read_trainer_state(path)
        if state.get("data_hash") and state["data_hash"] != self.corpus.data_hash:
            raise UserError(f"--resume {path}: the training data changed since the checkpoint (data hash "
                            f"{state['data_hash'][:12]} vs {self.corpus.data_hash[:12]}); use the same corpus")
        if state.get("global_batch_size") not in (None, self.global_batch):
            raise UserError(f"--resume {path}: global batch {state['global_batch_size']} then, {self.global_batch} now")
        self._check_step(path, state, trainer_state)
        weights = load_weights(path, self.device)
        tied = set(getattr(self.model, "_tied_weights_keys", None) or [])
        try:
            missing, unexpected = self.model.load_state_dict(weights, strict=False)
        except RuntimeError as err:  # a tensor of another shape
            raise UserError(f"--resume {path}: the weights do not fit the model ({_first_line(err)}); resume with "
                            "the same recipe and preset") from None
        if unexpected or any(key not in tied for key in missing):
            raise UserError(f"--resume {path}: the weights do not fit the model (missing {missing[:3]}, unexpected "
                            f"{unexpected[:3]}); resume with the same recipe and preset")
        try:
            self.optimizer.load_state_dict(trainer_state["optimizer"])
        except (ValueError, KeyError, TypeError, RuntimeError) as err:
            raise UserError(f"{path / 'trainer_state.pt'}: the optimizer state does not fit the model "
                            f"({_first_line(err)}); resume from another checkpoint") from None
        for param, moments in self.optimizer.state.items():
            for name in ("exp_avg", "exp_avg_sq"):
                if name in moments and moments[name].shape != param.shape:
                    raise UserError(f"{path / 'trainer_state.pt'}: optimizer {name} of shape "
                                    f"{tuple(moments[name].shape)} for a parameter of shape {tuple(param.shape)}; "
                                    "resume from another checkpoint")
        self.step = int(trainer_state["step"])
        self.tokens_seen = int(trainer_state["tokens_seen"])
        self.elapsed_before = float(trainer_state.get("elapsed_s", 0.0))
        self._restore_rng(path, trainer_state.get("rng", {}))
        self._say(f"resumed from {path.resolve()} at step {self.step} (epoch {self.step / self.steps_per_epoch:.2f})")

    def _restore_rng(self, path: Path, rng: Any) -> None:
        """Every process's random-number state as saved; with another number of processes, dropout noise is
        reseeded from (seed, step, rank) instead (the data order and masks do not depend on it)."""
        cpu_states = rng.get("torch", []) if isinstance(rng, dict) else []
        try:
            if len(cpu_states) == self.dist.world:
                torch.set_rng_state(cpu_states[self.dist.rank])
                cuda_states = rng.get("cuda", [])
                if self.device.type == "cuda" and len(cuda_states) == self.dist.world and cuda_states[self.dist.rank] is not None:
                    torch.cuda.set_rng_state(cuda_states[self.dist.rank], self.device)
            else:
                self._say(f"--resume: the run had {len(cpu_states)} processes, now {self.dist.world}; dropout noise "
                          "is reseeded (the data order and masks are unchanged)")
                torch.manual_seed(self.config.seed + 104729 * (self.step + 1) + 7919 * self.dist.rank)
        except (RuntimeError, TypeError) as err:
            raise UserError(f"{path / 'trainer_state.pt'}: unusable random-number state ({_first_line(err)}); "
                            "resume from another checkpoint") from None

    def _check_step(self, path: Path, state: dict[str, Any], trainer_state: dict[str, Any]) -> None:
        """The resume point's step: the same in both records and the folder name, inside this schedule, in the
        phase the record names. A step edited in one place would otherwise resume somewhere else, or past the end
        and report a final checkpoint that was never written."""
        step = trainer_state["step"]
        where = path / "trainer_state.pt"
        if state.get("step") != step:
            raise UserError(f"{where}: field step is {step} but {path / 'antlm_state.json'} says "
                            f"{state.get('step')!r}; the checkpoint was altered, resume from another one")
        if not 0 < step <= self.total_steps:
            raise UserError(f"{where}: field step is {step}, outside this schedule's steps 1..{self.total_steps} "
                            f"({self.schedule.canonical}); resume from another checkpoint")
        named = re.fullmatch(r"step-(\d+)", path.resolve().name)
        if named and int(named.group(1)) != step:
            raise UserError(f"{where}: field step is {step} in a folder named {path.resolve().name}; the checkpoint "
                            "was altered, resume from another one")
        for key, mine in (("schedule", self.schedule.canonical), ("steps_per_epoch", self.steps_per_epoch),
                          ("phase_index", self._plan_at(step - 1).index)):
            if key in state and state[key] != mine:
                raise UserError(f"{path / 'antlm_state.json'}: field {key} is {state[key]!r}, this run has {mine!r} "
                                f"at step {step}; resume with the same settings or from another checkpoint")
        most = step * self.global_batch * self.seq_len
        if not 0 < trainer_state["tokens_seen"] <= most:
            raise UserError(f"{where}: field tokens_seen is {trainer_state['tokens_seen']}, impossible after {step} "
                            f"steps (at most {most}); resume from another checkpoint")


class CheckpointAndResume(RunFolder):
    """Checkpoints and resume points, written after the steps that call for them, and the words seen (mixed into
    ``Trainer``; the folder and resuming from it are ``RunFolder``'s)."""

    def words_seen(self, tokens_seen: int | None = None) -> int:
        """Words seen after ``tokens_seen`` tokens (default: now), repeats counted: each epoch's tokens carry the
        corpus's ``n_words`` words, spread evenly (floor, exact integers)."""
        tokens = self.tokens_seen if tokens_seen is None else tokens_seen
        return tokens * self.n_words // (self.n_sequences * self.seq_len) if self.n_words else 0

    def _words_due(self) -> list[int]:
        """The --save-at-words counts the step just done reached (words before it < count <= words after it)."""
        before, after = self.words_seen(self._tokens_before), self.words_seen()
        return [w for w in self.config.save_at_words if before < w <= after]

    def _record(self, plan: PhasePlan, complete: bool) -> dict[str, Any]:
        from antlm_bench.results.tables import current_git_commit

        return {
            "schedule": self.schedule.canonical,
            "phases": [{"index": p.index, "objective": p.phase.label, "epochs": p.phase.epochs,
                        "attention": p.phase.attention_mode, "start_step": p.start_step, "steps": p.n_steps}
                       for p in self.plans],
            "phase_index": plan.index, "phase_objective": plan.phase.label, "phase_complete": complete,
            "phase_step": self.step - plan.start_step, "phase_steps": plan.n_steps,
            "epoch": self.step / self.steps_per_epoch, "step": self.step, "tokens_seen": self.tokens_seen,
            "words_seen": self.words_seen(), "n_words": self.n_words or None,
            "recipe": self.recipe.name, "preset": self.config.preset, "architecture": self.recipe.architecture,
            "seed": self.config.seed, "data_hash": self.corpus.data_hash, "tokenizer_hash": self.corpus.tokenizer_hash,
            "package_version": __version__, "git_commit": current_git_commit(),
            "steps_per_epoch": self.steps_per_epoch, "global_batch_size": self.global_batch, "seq_len": self.seq_len,
            "n_sequences": self.n_sequences, "world_size": self.dist.world, "created_at": _now(),
        }

    def _trainer_state(self, elapsed: float) -> dict[str, Any]:
        cpu = self.dist.gather(torch.get_rng_state())
        cuda = self.dist.gather(torch.cuda.get_rng_state(self.device) if self.device.type == "cuda" else None)
        return {
            "optimizer": self.optimizer.state_dict(), "step": self.step, "tokens_seen": self.tokens_seen,
            "scheduler": {"phase_index": self._plan_at(max(self.step - 1, 0)).index,
                          "last_lr": [g["lr"] for g in self.optimizer.param_groups]},
            "rng": {"torch": cpu, "cuda": cuda}, "world_size": self.dist.world, "elapsed_s": elapsed,
        }

    def _save_last(self, plan: PhasePlan, complete: bool, elapsed: float) -> None:
        trainer_state = self._trainer_state(elapsed)  # a collective: every process takes part
        if self.dist.main:
            write_resume_point(self.output, self.model, self.tokenizer, self._record(plan, complete), trainer_state)
        self.dist.barrier()

    def _save_named(self, name: str, plan: PhasePlan, complete: bool) -> Path:
        folder = self.output / CHECKPOINTS / name
        if self.dist.main:
            write_checkpoint(folder, self.model, self.tokenizer, self._record(plan, complete))
            self._say(f"saved {folder} (step {self.step}, epoch {format_number(round(self.step / self.steps_per_epoch, 4))})")
        self.dist.barrier()
        return folder

    def _checkpoint_after_step(self, plan: PhasePlan, by_time: bool, stop_at: int) -> bool:
        """The checkpoints due after the step just done (phase end, epoch end, every N steps / minutes, where
        --max-steps stops), scoring them where --eval-every says; whether the resume point was written."""
        config, now = self.config, time.perf_counter()
        saved = False
        phase_end = self.step == plan.end_step
        epoch_end = self.step % self.steps_per_epoch == 0
        for words in self._words_due():  # first: a resume point written after them never skips one
            folder = self._save_named(words_checkpoint_name(words), plan, phase_end)
            if config.eval_every == "words":
                self._evaluate(folder)  # type: ignore[attr-defined]
        if epoch_end and (config.save_every_epoch or config.eval_every == "epoch"):
            folder = self._save_named(f"epoch-{self.step // self.steps_per_epoch}", plan, phase_end)
            if config.eval_every == "epoch":
                self._evaluate(folder)  # type: ignore[attr-defined]
        if phase_end:
            folder = self._save_named(plan.folder_name, plan, True)
            self._save_last(plan, True, self.elapsed_before + now - self._start_time)
            self._last_save_time, saved = time.perf_counter(), True
            if config.eval_every == "phase" or (config.eval_every == "epoch" and not epoch_end):
                self._evaluate(folder)  # type: ignore[attr-defined]
        else:
            by_steps = bool(config.save_every_steps) and self.step % config.save_every_steps == 0
            if by_steps or by_time or self.step == stop_at:
                self._save_last(plan, False, self.elapsed_before + now - self._start_time)
                self._last_save_time, saved = time.perf_counter(), True
        return saved
