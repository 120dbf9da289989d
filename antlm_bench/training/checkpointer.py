"""The run folder's checkpoints: what a start may do with the folder, the records every checkpoint carries, saving
checkpoints and resume points, and resuming from them.

Checkpoints: ``checkpoints/phase-<k>-<OBJ>`` at every phase end (``epoch-<e>`` with ``--save-every-epoch`` or
``--eval-every epoch``), ``chck_<N>M`` (or ``chck_<N>K``) at the first step where the words seen reach each
``--save-at-words`` count, the resume point ``last`` every ``--save-every-steps`` / ``--save-every-minutes``, at
every phase end, where ``--max-steps`` stops, with every words checkpoint and on SIGINT / SIGTERM (names:
``antlm_bench.runs.layout``). Resume: weights, optimizer, scheduler position and every process's RNG state come
back from ``last`` (or an older resume point when it is damaged); the data order and the masks are functions of
(seed, step), so a resumed run computes exactly what the uninterrupted run computed. A folder is read before
anything is deleted, and a resume deletes nothing of the run.

Identities (in every record and in run.json; defined in ``runs.identity``): ``weights_digest``, the network a
checkpoint is, computed from its weights files when they are written; ``config_fingerprint``, the configuration
a seed trains (recipe content, preset, schedule, precision, corpus and tokenizer hashes, package version). ``training_fingerprint`` hashes the recipe content, preset, schedule and precision (as it always did), the
initial weights and the first global batch of every phase: only a resume checks it (a code change that re-draws the start is refused); it decides nothing else.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from antlm_bench import __version__
from antlm_bench.clock import utc_stamp
from antlm_bench.data.files import not_regular, remove_stale, removed_note
from antlm_bench.errors import UserError, one_line
from antlm_bench.models.precision import Precision
from antlm_bench.recipes import ResolvedPreset
from antlm_bench.runs.identity import RunIdentity, configuration_digest
from antlm_bench.runs.layout import KEPT_ITEMS, LAST, RUN_ITEMS, RunLayout, words_checkpoint_name
from antlm_bench.runs.record import STATE_FILE, CheckpointRecord
from antlm_bench.runs.schedule import Schedule, format_number
from antlm_bench.training.checkpoint import (
    TRAINER_STATE_FILE,
    describe_last,
    load_weights,
    read_trainer_state,
    resume_points,
    write_checkpoint,
    write_resume_point,
)
from antlm_bench.training.objectives import Batch, MixedBatch
from antlm_bench.training.plan import PhasePlan, StepPlan
from antlm_bench.training.step import Dist

# TrainConfig fields that override a recipe's values (Recipe.overridden); a resume must give the same
RECIPE_KNOBS = ("lr", "global_batch_size", "warmup_ratio")


# a preset's prose (what it was measured to do): never part of what a run trains, so never of its fingerprints
DOCUMENTATION = {"measured"}


def config_fingerprint(preset: ResolvedPreset, schedule: Schedule, precision: str, data_hash: str,
                       tokenizer_hash: str) -> str:
    """The configuration a seed trains (``runs.identity.configuration_digest``): the recipe's content (sizes of
    ``preset`` only), the preset, the schedule, the precision, the corpus and tokenizer as trained on, and the
    package version."""
    content = preset.recipe.model_dump(mode="json", exclude={"source", "description", "presets"})
    sizes = preset.spec.model_dump(mode="json", exclude=DOCUMENTATION)
    return configuration_digest(content, preset.name, sizes, schedule.canonical, precision, data_hash,
                                tokenizer_hash, __version__)


def start_fingerprint_config(preset: ResolvedPreset, schedule: Schedule, precision: str) -> str:
    """What ``training_fingerprint`` hashes of the configuration, as it always has (the recipe's content, the
    preset, the schedule, the precision but fp32), so that a resume of a run started by an earlier version is not
    refused for a change of definition; an identity of nothing (``runs.identity`` defines those)."""
    content = preset.recipe.model_dump(mode="json", exclude={"source", "description", "presets"})
    content["preset"] = {"name": preset.name, **preset.spec.model_dump(mode="json", exclude=DOCUMENTATION)}
    content["schedule"] = schedule.canonical
    if precision != "fp32":
        content["precision"] = precision
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]


def training_fingerprint(model: torch.nn.Module, steps: StepPlan, config: str) -> str:
    """How the run started (a resume check, not an identity): its configuration, its initial weights and the first
    global batch of each phase (rows and masks). A resume refuses a run whose start the code now computes
    otherwise. Which network a run trained is its weights digest (``runs.identity``), nothing less."""
    digest = hashlib.sha256(config.encode())
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
    for plan in steps.plans:
        batch = steps.build(plan.start_step)
        for part in batch.parts if isinstance(batch, MixedBatch) else [batch]:
            assert isinstance(part, Batch)
            digest.update(np.ascontiguousarray(part.input_ids).tobytes())
            digest.update(np.ascontiguousarray(part.labels).tobytes())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class RunFacts:
    """What every record of this run says about it, whatever the step."""

    identity: RunIdentity  # which run: its seed as given (what pairs runs across schedules), its label
    preset: ResolvedPreset  # the recipe at its preset, with the run's own knobs over both
    plans: list[PhasePlan]
    steps_per_epoch: int
    global_batch: int
    seq_len: int
    n_sequences: int
    n_words: int  # the corpus's words: words seen = tokens seen x n_words / tokens per epoch
    data_hash: str
    tokenizer_hash: str
    world_size: int
    training_fingerprint: str
    config_fingerprint: str
    precision: Precision  # what the steps compute in (models.precision), and why
    # the run's own knobs over the recipe file's (train --lr / --global-batch-size / --warmup-ratio), as given
    overrides: dict[str, float | int] = field(default_factory=dict)

    def words_seen(self, tokens_seen: int) -> int:
        """Words seen after ``tokens_seen`` tokens, repeats counted: each epoch's tokens carry the corpus's
        ``n_words`` words, spread evenly (floor, exact integers)."""
        return tokens_seen * self.n_words // (self.n_sequences * self.seq_len) if self.n_words else 0

    def record(self, plan: PhasePlan, step: int, tokens_seen: int, complete: bool) -> CheckpointRecord:
        from antlm_bench.results.tables import current_git_commit

        identity, recipe = self.identity, self.preset.recipe
        return CheckpointRecord(
            schedule=identity.schedule, phase_index=plan.index, phase_objective=plan.phase.label, step=step,
            phases=tuple({"index": p.index, "objective": p.phase.label, "epochs": p.phase.epochs,
                          "attention": p.phase.attention_mode, "start_step": p.start_step, "steps": p.n_steps}
                         for p in self.plans),
            phase_complete=complete, phase_step=step - plan.start_step, phase_steps=plan.n_steps,
            epoch=step / self.steps_per_epoch, tokens_seen=tokens_seen, words_seen=self.words_seen(tokens_seen),
            n_words=self.n_words or None, recipe=identity.recipe, preset=identity.preset,
            architecture=recipe.architecture, seed=identity.seed, label=identity.label, data_hash=self.data_hash,
            tokenizer_hash=self.tokenizer_hash, training_fingerprint=self.training_fingerprint,
            config_fingerprint=self.config_fingerprint, masking=recipe.masking.strategy,
            optimizer_at_phase=recipe.optimizer_at_phase, package_version=__version__,
            git_commit=current_git_commit(), steps_per_epoch=self.steps_per_epoch,
            global_batch_size=self.global_batch, seq_len=self.seq_len, n_sequences=self.n_sequences,
            world_size=self.world_size, created_at=utc_stamp(),
        )


def kept_items(layout: RunLayout) -> list[str]:
    """What a run folder holds that only --overwrite may delete: finished checkpoints, scores."""
    kept = [f"{layout.checkpoints.name}/{p.name}" for p in layout.saved_checkpoints()]
    kept += [name for name in KEPT_ITEMS if name != layout.checkpoints.name and (layout.folder / name).exists()]
    return kept


def check_run_folder(layout: RunLayout, resume: bool) -> None:
    """Refuse, before the folder is locked, tidied, read or deleted from, what training did not make where it
    writes: a link planted at a name the run writes, a FIFO or folder at a file's name, anything but the link it
    makes at ``last`` (renamed over: a plain file, a FIFO, a device); and a resume from a run file that does not
    read as one (damaged, a link to another run's)."""
    if not layout.folder.is_dir():
        return
    layout.check_entries("nothing was deleted; remove it, or train into a new --output")
    if resume:
        layout.read_run_file()
    last = layout.last
    if os.path.lexists(last) and not last.is_symlink() and not last.is_dir():  # a copied run's is a folder
        kind = not_regular(last) or "a plain file"
        raise UserError(f"{'--resume' if resume else '--output'} {layout.folder}: {last} is {kind}, not the link to a "
                        "resume point that antlm-bench writes; nothing was deleted; move it away and run the same "
                        "command again")


def inspect_run_folder(layout: RunLayout, resume: bool, overwrite: bool,
                       say: Callable[[str], None]) -> tuple[str, list[Path]]:
    """Decide, reading only, what a start does with the folder: ("fresh", []), ("restart", []) when it holds
    nothing worth keeping, or ("resume", the resume points to try, best first). Refuses a folder that holds another
    run, and a --resume that could only go on by deleting finished checkpoints."""
    out = layout.folder
    check_run_folder(layout, resume)
    present = [name for name in RUN_ITEMS if (out / name).exists() or (out / name).is_symlink()]
    if resume:
        points = resume_points(out)
        if points:
            return "resume", points
        kept = kept_items(layout)
        if kept:
            shown = ", ".join(kept[:3]) + (f" and {len(kept) - 3} more" if len(kept) > 3 else "")
            raise UserError(f"--resume {out}: no resume point ({describe_last(out)}, and no other "
                            f"{layout.resume_dir.name}/step-* folder), but the run holds {shown}; nothing was "
                            "deleted; pass --overwrite to train it again from the start, or train into a new --output")
        if present:  # a run that never reached its first checkpoint: nothing to keep
            say(f"--resume: {out} has no resume checkpoint yet; starting from the beginning")
            return "restart", []
        return "fresh", []
    if present:
        if not overwrite:
            raise UserError(f"{out} already holds a training run ({', '.join(present)}); pass --resume to continue it "
                            "or --overwrite to start again")
        return "restart", []
    return "fresh", []


def claim_run_folder(layout: RunLayout, dist: Dist, resuming: bool,
                     say: Callable[[str], None] | None = None) -> None:
    """Make the run folder ours: a restart clears the old run's items, every start clears killed writers' staging
    folders and ``last`` links half made (``.last.link-<pid>`` of a process no longer running), and says so. A
    resume deletes nothing of the run."""
    out = layout.folder
    dist.barrier()
    if dist.main:
        if not resuming:
            for name in RUN_ITEMS:
                path = out / name
                if path.is_symlink() or path.is_file():
                    path.unlink()
                elif path.exists():
                    shutil.rmtree(path)
        out.mkdir(parents=True, exist_ok=True)
        removed = [*remove_stale(out, f".{LAST}.link-*"), *remove_stale(layout.checkpoints, ".*.tmp-*"),
                   *remove_stale(layout.resume_dir, ".*.tmp-*")]  # what a killed writer left half made
        note = removed_note(removed)
        if note is not None and say is not None:
            say(note)
    dist.barrier()


@dataclass
class Resumed:
    """Where a resume point left the run."""

    path: Path
    step: int
    tokens_seen: int
    elapsed_s: float


@dataclass(frozen=True)
class SavePolicy:
    """Which checkpoints a run writes and which of them are scored (``train``'s ``--save-*`` and ``--eval-every``);
    the checkpointer applies it after every step (:meth:`Checkpointer.after_step`)."""

    save_at_words: tuple[int, ...] = ()  # chck_<N> at the first step whose words seen reach each count
    save_every_epoch: bool = False
    save_every_steps: int | None = None  # a resume point every N steps
    eval_every: str = "phase"  # none | phase | epoch | words: which checkpoints the scorer sees


class Checkpointer:
    """Saves this run's checkpoints and resume points as its :class:`SavePolicy` says, and loads a resume point
    back into the model and optimizer."""

    def __init__(self, layout: RunLayout, facts: RunFacts, steps: StepPlan, model: torch.nn.Module,
                 optimizer: torch.optim.Optimizer, tokenizer: Any, device: torch.device, dist: Dist,
                 say: Callable[[str], None], policy: SavePolicy) -> None:
        self.policy = policy
        self.layout = layout
        self.facts = facts
        self.steps = steps
        self.model = model
        self.optimizer = optimizer
        self.tokenizer = tokenizer
        self.device = device
        self.dist = dist
        self.say = say

    # -- saving ------------------------------------------------------------------------------------------------

    def after_step(self, plan: PhasePlan, step: int, tokens_before: int, tokens: int, by_time: bool, stop_at: int,
                   elapsed: float, score: Callable[[Path], None]) -> bool:
        """The checkpoints due after ``step`` (words counts reached, epoch end, phase end, every N steps or minutes
        (``by_time``), where ``--max-steps`` stops), each handed to ``score`` where the policy's ``eval_every``
        says; whether a resume point was written."""
        policy, facts = self.policy, self.facts
        phase_end = step == plan.end_step
        epoch_end = step % facts.steps_per_epoch == 0
        before, after = facts.words_seen(tokens_before), facts.words_seen(tokens)
        words_due = [w for w in policy.save_at_words if before < w <= after]
        for words in words_due:  # first: the resume point written after them never skips one
            folder = self.save_named(words_checkpoint_name(words), plan, step, tokens, phase_end)
            if policy.eval_every == "words":
                score(folder)
        if epoch_end and (policy.save_every_epoch or policy.eval_every == "epoch"):
            folder = self.save_named(f"epoch-{step // facts.steps_per_epoch}", plan, step, tokens, phase_end)
            if policy.eval_every == "epoch":
                score(folder)
        by_steps = bool(policy.save_every_steps) and step % policy.save_every_steps == 0  # type: ignore[operator]
        resume_point = phase_end or bool(words_due) or by_steps or by_time or step == stop_at
        if phase_end:
            folder = self.save_named(plan.folder_name, plan, step, tokens, True)
            self.save_resume_point(plan, step, tokens, True, elapsed)
            if policy.eval_every == "phase" or (policy.eval_every == "epoch" and not epoch_end):
                score(folder)
        elif resume_point:
            # a words checkpoint brings a resume point with it: a run killed between them resumes, never restarts
            self.save_resume_point(plan, step, tokens, False, elapsed)
        return resume_point

    def save_named(self, name: str, plan: PhasePlan, step: int, tokens_seen: int, complete: bool) -> Path:
        folder = self.layout.checkpoint(name)
        if self.dist.main:
            write_checkpoint(folder, self.model, self.tokenizer, self.facts.record(plan, step, tokens_seen, complete))
            epoch = format_number(round(step / self.facts.steps_per_epoch, 4))
            self.say(f"saved {folder} (step {step}, epoch {epoch})")
        self.dist.barrier()
        return folder

    def save_resume_point(self, plan: PhasePlan, step: int, tokens_seen: int, complete: bool,
                          elapsed_s: float) -> None:
        trainer_state = self._trainer_state(step, tokens_seen, elapsed_s)  # a collective: every process takes part
        if self.dist.main:
            write_resume_point(self.layout.folder, self.model, self.tokenizer,
                               self.facts.record(plan, step, tokens_seen, complete), trainer_state)
        self.dist.barrier()

    def _trainer_state(self, step: int, tokens_seen: int, elapsed_s: float) -> dict[str, Any]:
        cpu = self.dist.gather(torch.get_rng_state())
        cuda = self.dist.gather(torch.cuda.get_rng_state(self.device) if self.device.type == "cuda" else None)
        return {
            "optimizer": self.optimizer.state_dict(), "step": step, "tokens_seen": tokens_seen,
            "scheduler": {"phase_index": self.steps.plan_at(max(step - 1, 0)).index,
                          "last_lr": [g["lr"] for g in self.optimizer.param_groups]},
            "rng": {"torch": cpu, "cuda": cuda}, "world_size": self.dist.world, "elapsed_s": elapsed_s,
        }

    # -- resuming ----------------------------------------------------------------------------------------------

    def check_same_run(self) -> None:
        """A --resume continues the run the folder holds: the same run (``RunIdentity.difference``: recipe, preset,
        schedule, seed, label), in the precision it started with (where its record says) and with its own knobs."""
        record = self.layout.read_run_file()  # a damaged one was refused before anything (inspect_run_folder)
        if record is None:
            return
        difference = self.facts.identity.difference(record)
        if difference is None and record.precision not in (None, self.facts.precision.name):
            difference = f"precision={record.precision!r}, now {self.facts.precision.name!r}"
        if difference is not None:
            raise UserError(f"--resume {self.layout.folder}: the run was started with {difference}; resume with the "
                            "same settings or train into a new --output")
        for knob in RECIPE_KNOBS:  # the run's own knobs over the recipe's
            then, now_value = getattr(record.config, knob), self.facts.overrides.get(knob)
            if then != now_value:
                def said(value: object) -> str:
                    return "the recipe's" if value is None else str(value)

                raise UserError(f"--resume {self.layout.folder}: the run was started with --{knob.replace('_', '-')} "
                                f"{said(then)}, now {said(now_value)}; resume with the same settings or train into "
                                "a new --output")

    def resume(self, points: list[Path]) -> Resumed:
        """Load the first resume point that holds up (see ``_load``), saying so when it is not ``last``; refuse with
        one line when none does. Nothing is deleted either way."""
        problems: list[str] = []
        for path in points:
            try:
                resumed = self._load(path)
            except UserError as err:
                problems.append(str(err))
                continue
            if problems:
                self.say(f"--resume: {problems[0]}; resuming from {path} instead")
            return resumed
        more = f" (and {len(problems) - 1} other resume point(s) unusable too)" if len(problems) > 1 else ""
        raise UserError(f"{problems[0]}{more}; nothing was deleted; pass --overwrite to train the run again from "
                        "the start, or train into a new --output")

    def _load(self, path: Path) -> Resumed:
        """Check a resume point against this run and load it: the records parse, the step agrees across them and
        with the schedule, the weights load and fit the model. Everything is checked before anything is set."""
        record, trainer_state = read_trainer_state(path)
        facts = self.facts
        if record.data_hash and record.data_hash != facts.data_hash:
            raise UserError(f"--resume {path}: the training data changed since the checkpoint (data hash "
                            f"{record.data_hash[:12]} vs {facts.data_hash[:12]}); use the same corpus")
        if record.global_batch_size not in (None, facts.global_batch):
            raise UserError(f"--resume {path}: global batch {record.global_batch_size} then, {facts.global_batch} "
                            "now")
        if record.training_fingerprint not in (None, facts.training_fingerprint):
            raise UserError(f"--resume {path}: the run started from other initial weights, data order or masks "
                            f"(training fingerprint {record.training_fingerprint} then, {facts.training_fingerprint} "
                            "now: the training code changed them); finish it with the code that started it, or "
                            "--overwrite to train it again")
        self._check_step(path, record, trainer_state)
        weights = load_weights(path, self.device)
        tied = set(getattr(self.model, "_tied_weights_keys", None) or [])  # transformers' attribute, absent on some
        try:
            missing, unexpected = self.model.load_state_dict(weights, strict=False)
        except RuntimeError as err:  # a tensor of another shape
            raise UserError(f"--resume {path}: the weights do not fit the model ({one_line(err, 200)}); resume with "
                            "the same recipe and preset") from None
        if unexpected or any(key not in tied for key in missing):
            raise UserError(f"--resume {path}: the weights do not fit the model (missing {missing[:3]}, unexpected "
                            f"{unexpected[:3]}); resume with the same recipe and preset")
        try:
            self.optimizer.load_state_dict(trainer_state["optimizer"])
        except (ValueError, KeyError, TypeError, RuntimeError) as err:
            raise UserError(f"{path / TRAINER_STATE_FILE}: the optimizer state does not fit the model "
                            f"({one_line(err, 200)}); resume from another checkpoint") from None
        for param, moments in self.optimizer.state.items():
            for name in ("exp_avg", "exp_avg_sq"):
                if name in moments and moments[name].shape != param.shape:
                    raise UserError(f"{path / TRAINER_STATE_FILE}: optimizer {name} of shape "
                                    f"{tuple(moments[name].shape)} for a parameter of shape {tuple(param.shape)}; "
                                    "resume from another checkpoint")
        step = int(trainer_state["step"])
        self._restore_rng(path, trainer_state.get("rng", {}), step)
        self.say(f"resumed from {path.resolve()} at step {step} (epoch {step / facts.steps_per_epoch:.2f})")
        return Resumed(path, step, int(trainer_state["tokens_seen"]), float(trainer_state.get("elapsed_s", 0.0)))

    def _restore_rng(self, path: Path, rng: Any, step: int) -> None:
        """Every process's random-number state as saved; with another number of processes, dropout noise is
        reseeded from (seed, step, rank) instead (the data order and masks do not depend on it)."""
        cpu_states = rng.get("torch", []) if isinstance(rng, dict) else []
        try:
            if len(cpu_states) == self.dist.world:
                torch.set_rng_state(cpu_states[self.dist.rank])
                cuda_states = rng.get("cuda", [])
                if self.device.type == "cuda" and len(cuda_states) == self.dist.world \
                        and cuda_states[self.dist.rank] is not None:
                    torch.cuda.set_rng_state(cuda_states[self.dist.rank], self.device)
            else:
                self.say(f"--resume: the run had {len(cpu_states)} processes, now {self.dist.world}; dropout noise "
                         "is reseeded (the data order and masks are unchanged)")
                torch.manual_seed(self.facts.identity.random_seed + 104729 * (step + 1) + 7919 * self.dist.rank)
        except (RuntimeError, TypeError) as err:
            raise UserError(f"{path / TRAINER_STATE_FILE}: unusable random-number state ({one_line(err, 200)}); "
                            "resume from another checkpoint") from None

    def _check_step(self, path: Path, record: CheckpointRecord, trainer_state: dict[str, Any]) -> None:
        """The resume point's step: the same in both records and the folder name, inside this schedule, in the
        phase the record names. A step edited in one place would otherwise resume somewhere else, or past the end
        and report a final checkpoint that was never written."""
        step = trainer_state["step"]
        where = path / TRAINER_STATE_FILE
        if record.step != step:
            raise UserError(f"{where}: field step is {step} but {path / STATE_FILE} says {record.step!r}; the "
                            "checkpoint was altered, resume from another one")
        total = self.steps.total_steps
        if not 0 < step <= total:
            raise UserError(f"{where}: field step is {step}, outside this schedule's steps 1..{total} "
                            f"({self.facts.identity.schedule}); resume from another checkpoint")
        named = re.fullmatch(r"step-(\d+)", path.resolve().name)
        if named and int(named.group(1)) != step:
            raise UserError(f"{where}: field step is {step} in a folder named {path.resolve().name}; the checkpoint "
                            "was altered, resume from another one")
        for key, theirs, mine in (("schedule", record.schedule, self.facts.identity.schedule),
                                  ("steps_per_epoch", record.steps_per_epoch, self.facts.steps_per_epoch),
                                  ("phase_index", record.phase_index, self.steps.plan_at(step - 1).index)):
            if theirs is not None and theirs != mine:
                raise UserError(f"{path / STATE_FILE}: field {key} is {theirs!r}, this run has {mine!r} at "
                                f"step {step}; resume with the same settings or from another checkpoint")
        most = step * self.facts.global_batch * self.facts.seq_len
        if not 0 < trainer_state["tokens_seen"] <= most:
            raise UserError(f"{where}: field tokens_seen is {trainer_state['tokens_seen']}, impossible after {step} "
                            f"steps (at most {most}); resume from another checkpoint")
