"""``antlm-bench eval``: score a model on minimal pairs (and any other task) and write Parquet tables."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from antlm_bench.cli.app import app, console, err_console, flag
from antlm_bench.cli.paths import output_folder, path_text
from antlm_bench.config import DataConfig, EvaluationConfig, MachineConfig, RunConfig
from antlm_bench.registry import add_include_path


class Scoring(str, Enum):
    auto = "auto"
    clm = "clm"
    pll = "pll"
    pll_word_l2r = "pll-word-l2r"
    mntp = "mntp"


class DType(str, Enum):
    float32 = "float32"
    bfloat16 = "bfloat16"


@app.command("eval")
def eval_command(
    model: Path = typer.Option(..., "--model", help="Model folder: an antlm-bench checkpoint or any Hugging Face "
                               "causal / masked LM (config.json, weights, tokenizer), or a training run folder "
                               "(its final checkpoint, else its resume point last; the note names it)."),
    tasks: str = typer.Option("blimp,blimp_supplement,ewok", "--tasks",
                              help="Comma-separated tasks or groups (see `antlm-bench list tasks`); "
                                   "blimp:adjunct_island for one BLiMP paradigm (a supplement file, an EWoK "
                                   "domain likewise), glue:rte,mrpc for GLUE members."),
    scoring: Scoring = typer.Option(
        Scoring.auto, "--scoring",
        help="clm: sum of ln p(t_i | BOS, t_<i); pll: pseudo-log-likelihood, each token masked in turn; "
             "pll-word-l2r: also mask the later tokens of its word; mntp: pll read at position i-1; "
             "auto: the method of the checkpoint's last phase (plain folders: clm for causal, pll for masked LMs).",
    ),
    output: Path | None = typer.Option(None, "--output", callback=output_folder, parser=path_text, metavar="<path>",
                                       help="Write scores.parquet, items.parquet and eval.json (the evaluation's record) here."),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Score only the first N items of each subtask "
                                     "(a quick look; rows record the limit)."),
    log_samples: bool = typer.Option(False, "--log-samples", help="Also write items.parquet: both scores of every "
                                     "pair (EWoK text is left out, as its terms require)."),
    batch_tokens: int = flag(EvaluationConfig, "batch_tokens", min=1),
    device: str = flag(MachineConfig, "device"),
    dtype: DType = typer.Option(DType.float32, "--dtype", help="Model weights dtype for scoring (bfloat16: cuda, "
                                "or a CPU with native bf16; docs/precision.md has its parity with float32); "
                                "log-softmax is float32 either way."),
    convention: str = typer.Option("babylm-2025", "--convention", help="Scoring convention, recorded in every row: "
                                   "babylm-2025 (sentences as given), babylm-2024 (' ' + sentence, the paper's "
                                   "2024 lm-eval tasks) or babylm-2026 (as 2025; entity tracking without its "
                                   "'nothing' targets). Boards and check never compare two conventions."),
    data_dir: Path | None = flag(DataConfig, "data_dir"),
    include_path: list[Path] | None = flag(RunConfig, "include_path"),
    progress: bool = typer.Option(True, "--progress/--no-progress", " /--quiet", " /-q",
                                  help="Show a progress bar on stderr (--quiet: none)."),
    fast: bool = typer.Option(False, "--fast", help="The official BabyLM 2025 fast subsets (BLiMP, supplement, EWoK "
                              "fast files; entity tracking `regular` only; WUG and reading unchanged; GLUE left "
                              "out); rows record eval_set=fast and are never mixed with full ones."),
    skip_export_check: bool = typer.Option(False, "--skip-export-check", help="Score an export's folder (with "
                                           "antlm_export.json) without verifying its files (config, tokenizer, code, "
                                           "weights) against the sha256s recorded there; the output says it was "
                                           "skipped."),
    threads: int | None = flag(MachineConfig, "threads", min=1),
    # GLUE fine-tuning (tasks/glue.yaml); unset flags keep the spec's BabyLM 2025 defaults
    seeds: str | None = typer.Option(None, "--seeds", help="GLUE: fine-tuning seeds, e.g. 42,43,44 (one row set "
                                     "per seed; default 42)."),
    lr: float | None = typer.Option(None, "--lr", help="GLUE: peak learning rate (default 3e-5)."),
    batch_size: int | None = typer.Option(None, "--batch-size", min=1, help="GLUE: training batch size "
                                          "(default 32; 16 for BoolQ and MultiRC)."),
    epochs: int | None = typer.Option(None, "--epochs", min=1, help="GLUE: epochs (default 10; 30 for WSC)."),
    max_length: int | None = typer.Option(None, "--max-length", min=2, help="GLUE: max tokens per input (512)."),
    max_train_examples: int | None = typer.Option(None, "--max-train-examples", min=1,
                                                  help="GLUE: train on at most N examples per task (a budget)."),
    warmup: float | None = typer.Option(None, "--warmup", help="GLUE: warm-up fraction of the steps (0.06)."),
    weight_decay: float | None = typer.Option(None, "--weight-decay", help="GLUE: AdamW weight decay (0.01)."),
    pooling: str | None = typer.Option(None, "--pooling", help="GLUE: auto|first|last|mean (auto: first token "
                                       "for encoders, last real token for decoders)."),
    probe: bool = flag(EvaluationConfig, "probe"),
    protocol: str | None = flag(EvaluationConfig, "glue_protocol"),
    glue_precision: str | None = typer.Option(None, "--glue-precision", help="GLUE: fine-tuning arithmetic, "
                                              "auto (bf16 autocast where the chip has native bf16 and the model "
                                              "is wide enough, the rule training follows), fp32 or bf16."),
) -> None:
    """Score minimal pairs (BLiMP, BLiMP supplement, EWoK) and other tasks; print a summary, write Parquet.

    Accuracy = (wins + ties / 2) / n per subtask; a task's score is the unweighted mean over its subtasks, with a
    95% bootstrap interval.
    """
    from antlm_bench.errors import UserError
    from antlm_bench.runs.layout import model_folder

    parse_seeds(seeds)  # a bad --seeds is answered first, as by every command that takes seeds
    if not model_folder(model)[0].is_dir():  # answered before the scoring engine (torch) is imported
        raise UserError(f"--model {Path(model).expanduser()}: not a folder; give a Hugging Face model folder "
                        "(config.json + weights)")
    from antlm_bench.adapters.glue.options import GlueOptions
    from antlm_bench.evaluate import eval_config, evaluate
    from antlm_bench.options import parse_device, resolve_device

    for folder in include_path or []:
        add_include_path(folder)
    glue_options = GlueOptions.of_flags(
        {"lr": lr, "batch_size": batch_size, "epochs": epochs, "max_length": max_length,
         "max_train_examples": max_train_examples, "warmup": warmup, "weight_decay": weight_decay, "pooling": pooling,
         "probe": probe or None, "protocol": protocol, "precision": glue_precision},
        flags={"precision": "--glue-precision"})
    config = eval_config(
        tasks=tasks, scoring=scoring.value, output_dir=output, limit=limit, log_samples=log_samples,
        batch_tokens=batch_tokens, device=resolve_device(parse_device(device)), dtype=dtype.value, data_dir=data_dir,
        threads=threads, fast=fast, skip_export_check=skip_export_check,
        convention=convention, progress=progress,
        options=glue_options, seeds=parse_seeds(seeds),
    )
    model, chosen = model_folder(model)
    if chosen is not None:
        err_console.print(f"[dim]note:[/dim] --model {escape(chosen)}", soft_wrap=True)
    out = evaluate(model, config)
    # the notes explain the scores (how GLUE's is made, what was left out): kept with the summary on stdout
    # (`eval > log`), while progress goes to stderr
    for note in out.notes:
        console.print(f"[dim]note:[/dim] {escape(note)}", soft_wrap=True)
    console.print(summary_table(out.scores))
    if output is not None:
        written = ", ".join(["scores.parquet", *(["items.parquet"] if log_samples else []), "eval.json"])
        console.print(f"wrote {written} to {output}", soft_wrap=True)


def parse_seeds(text: str | None) -> list[int] | None:
    """GLUE fine-tuning seeds in the one seeds grammar (``antlm_bench.options``); None stays None (seed 42)."""
    from antlm_bench.options import parse_seeds as parse

    return None if text is None else parse(text)


def chance_text(task: str, metric: str, notes: str) -> str:
    """What a guess scores on a task-level row, in the row's shown units: chance (a minimal pair's accuracy: 50.0;
    its margin: 0 nats), GLUE's majority-class floor ("floor 49.6": the training split's most frequent label, on the
    same members and examples), or "" where there is neither (a loss, another package's task)."""
    from antlm_bench.adapters.glue.task import majority_floor
    from antlm_bench.results.leaderboard.definition import chance_level, metric_kind

    kind = metric_kind(metric)
    floor = majority_floor(notes)
    if floor is not None:
        return f"floor {kind.scale * floor:.1f}"
    level = chance_level(task, metric)
    return "" if level is None else f"{kind.scale * level:.{1 if kind.unit == '%' else kind.digits}f}"


def summary_table(scores) -> Table:
    """One line per task and metric: subtask count, score in its unit as the board shows it (accuracy, F1, GLUE's
    score and Spearman x100 in %; margins in nats, held-out loss in nats/token, as stored; other metrics named after
    the task, e.g. ``wug_adj (spearman)``), 95% CI, chance (or GLUE's majority-class floor), unit, n, ties,
    method."""
    from antlm_bench.results.leaderboard.definition import metric_kind

    rows = scores.to_pylist()
    limits = sorted({r["limit"] for r in rows if r["limit"]})
    title = "antlm-bench eval" + (f" (--limit {limits[0]}: a quick look, not a full score)" if limits else "")
    table = Table(title=title, box=box.SIMPLE_HEAD)
    for column, justify in (("task", "left"), ("subtasks", "right"), ("score", "right"), ("95% CI", "right"),
                            ("chance", "right"), ("unit", "left"), ("n", "right"), ("ties", "right"),
                            ("method", "left")):
        table.add_column(column, justify=justify, no_wrap=True)
    for row in rows:
        if row["subtask"] != "":
            continue
        kind = metric_kind(row["metric"])
        value_digits, ci_digits = (2, 1) if kind.unit == "%" else (kind.digits, kind.digits)
        subtasks = sum(1 for r in rows if r["task"] == row["task"] and r["subtask"] != "" and r["metric"] == row["metric"])
        ci = ("" if row["ci_low"] is None else
              f"[{kind.scale * row['ci_low']:.{ci_digits}f}, {kind.scale * row['ci_high']:.{ci_digits}f}]")
        name = row["task"] if row["metric"] in ("accuracy", "score") else f"{row['task']} ({row['metric']})"
        unit = kind.unit + (", lower is better" if kind.lower_is_better else "")
        table.add_row(name, str(subtasks), f"{kind.scale * row['value']:.{value_digits}f}", ci,
                      chance_text(row["task"], row["metric"], row.get("notes") or ""), unit,
                      f"{row['n']:,}", str(row["n_ties"] or 0), row["scoring"])
    return table
