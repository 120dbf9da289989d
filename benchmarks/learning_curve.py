"""Learning curve on a CPU: full-BLiMP accuracy and held-out loss against CPU-minutes, per model setting.

    OMP_NUM_THREADS=1 python benchmarks/learning_curve.py --output leaderboards/learning-curve/runs \
        --settings ll-h128-b16,ll-h192-b16 --table leaderboards/learning-curve/curve.md

Each setting is a copy of a shipped recipe with one preset changed (width, depth, vocabulary, sequence length,
global batch, learning rate, warm-up), written to ``OUTPUT/recipes/`` and trained with ``antlm-bench train
--include-path`` through ``--words`` words of ``pretrain_1600k`` (one phase of the backbone's own objective, one
torch thread), saving ``checkpoints/chck_<N>`` at every ``--at`` words. Every checkpoint is then scored with
``antlm-bench eval --tasks blimp,heldout`` (all 67 filtered BLiMP paradigms, every item; clm for BabyLlama, pll
for LTG-BERT) and charged the CPU seconds its training process had used when it was written (``process_cpu_s``
in metrics.jsonl: every thread, tokenizer and packing included) plus its own evaluation's CPU seconds.

Choosing a setting reads the held-out loss (the corpus's dev split), never BLiMP: BLiMP is the reported outcome.
The study resumes: a setting whose training finished is not trained again, a scored checkpoint is not scored
again; stop it at any time (Ctrl-C) and run the same command to go on.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq
import yaml

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Setting:
    name: str
    base: str  # shipped recipe
    preset: dict = field(default_factory=dict)  # replaces keys of the base's `small` preset
    lr: float | None = None
    warmup_ratio: float | None = None

    @property
    def objective(self) -> str:
        return "CLM" if "babyllama" in self.base else "MLM"


def _llama(name: str, hidden: int, layers: int, heads: int, vocab: int = 8192, seq: int = 128, batch: int = 16,
           lr: float = 2e-3, warmup: float = 0.02) -> Setting:
    return Setting(name, "antlm-babyllama",
                   {"n_layers": layers, "n_heads": heads, "hidden_size": hidden,
                    "intermediate_size": 8 * hidden // 3 // 8 * 8, "vocab_size": vocab, "max_seq_len": seq,
                    "global_batch_size": batch, "micro_batch_size": batch, "max_words": None}, lr, warmup)


def _ltg(name: str, hidden: int, layers: int, heads: int, vocab: int = 8192, seq: int = 128, batch: int = 16,
         lr: float = 2e-3, warmup: float = 0.02) -> Setting:
    return Setting(name, "antlm-ltgbert",
                   {"n_layers": layers, "n_heads": heads, "hidden_size": hidden,
                    "intermediate_size": 8 * hidden // 3 // 8 * 8, "vocab_size": vocab, "max_seq_len": seq,
                    "global_batch_size": batch, "micro_batch_size": batch, "max_words": None, "dropout": 0.1},
                   lr, warmup)


SETTINGS = {s.name: s for s in [
    # the shipped small preset as it is (global batch 64, lr 7e-4): the control
    Setting("ll-small", "antlm-babyllama", {"max_words": None}),
    _llama("ll-h128-b16", 128, 4, 4),
    _llama("ll-h192-b16", 192, 4, 4),
    _llama("ll-h256-b16", 256, 4, 4),
    _llama("ll-h128-b16-lr1e-3", 128, 4, 4, lr=1e-3),
    _llama("ll-h128-b16-lr4e-3", 128, 4, 4, lr=4e-3),
    _llama("ll-h128-b8", 128, 4, 4, batch=8),
    _llama("ll-h128-b32", 128, 4, 4, batch=32),
    _llama("ll-h128-L6", 128, 6, 4),
    _llama("ll-h128-v4k", 128, 4, 4, vocab=4096),
    _llama("ll-h128-s64", 128, 4, 4, seq=64, batch=32),
    _ltg("ltg-h128-b16", 128, 4, 4),
    _ltg("ltg-h192-b16", 192, 4, 4),
]}


def _words(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1_000, "M": 1_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("KM")) * scale)


def _recipe(setting: Setting, folder: Path) -> str:
    document = yaml.safe_load((ROOT / "trainers" / f"{setting.base}.yaml").read_text(encoding="utf-8"))
    name = f"lc-{setting.name}"
    preset = {**document["presets"]["small"], **setting.preset}
    preset = {k: v for k, v in preset.items() if v is not None}
    document.update(name=name, presets={"lc": preset})
    if setting.lr is not None:
        document["optimizer"] = {**document["optimizer"], "lr": setting.lr}
    if setting.warmup_ratio is not None:
        document["lr_schedules"] = {objective: {**spec, "warmup_ratio": setting.warmup_ratio}
                                    for objective, spec in document["lr_schedules"].items()}
    if setting.objective == "MLM":  # one phase, one restart-free cosine: the curve, not the paper's restarts
        document["lr_schedules"]["MLM"] = {"kind": "cosine", "warmup_ratio": setting.warmup_ratio or 0.016}
    else:
        document["lr_schedules"]["CLM"] = {"kind": "cosine", "warmup_ratio": setting.warmup_ratio or 0.01}
    folder.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(document, sort_keys=False)
    path = folder / f"{name}.yaml"
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    return name


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(command: list[str], log: Path) -> float:
    """Run ``command``, appending its output to ``log``; the CPU seconds it used."""
    before = _child_cpu()
    with log.open("ab") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(command)}; see {log}")
    return _child_cpu() - before


def _epochs(words_total: int, corpus_words: int) -> int:
    return max(1, -(-words_total // corpus_words))


def run_name(setting: Setting, words: str, seed: int) -> str:
    """A run's folder name: the setting, its word budget (as given, e.g. ``3.2M``) and its seed."""
    return f"{setting.name}-{words.strip().upper()}-s{seed}"


def train(setting: Setting, out: Path, corpus: Path, words: str, at: list[int], seed: int) -> Path:
    words_total = _words(words)
    run = out / "runs" / run_name(setting, words, seed)
    finished = (run / "run.json").is_file() and \
        json.loads((run / "run.json").read_text(encoding="utf-8")).get("status") == "finished"
    if finished or (out / "scores" / run.name / "final" / "row.json").is_file():
        return run  # trained (or trained and scored in an earlier sitting whose run folders are gone)
    name = _recipe(setting, out / "recipes")
    # the words `train` counts in each corpus (its corpus line); epochs = ceil(--words / these)
    corpus_words = {"pretrain_1600k": 1_637_780, "pretrain_sample": 535_000}.get(corpus.name)
    if corpus_words is None:
        sys.exit(f"--corpus {corpus}: give pretrain_1600k or pretrain_sample (their word counts are known here)")
    epochs = _epochs(words_total, corpus_words)
    command = ["antlm-bench", "train", "--include-path", str(out / "recipes"), "--model", name, "--preset", "lc",
               "--schedule", f"{epochs}_{setting.objective}", "--corpus", str(corpus), "--output", str(run),
               "--seed", str(seed), "--threads", "1", "--no-progress", "--save-every-minutes", "10",
               *(["--save-at-words", ",".join(str(w) for w in at)] if at else [])]
    if (run / "last").exists():
        command.append("--resume")
    elif run.exists():
        command.append("--overwrite")
    print(f"train {setting.name} seed {seed}: {epochs} epoch(s) of {corpus.name}", flush=True)
    _run(command, out / "logs" / f"{run.name}.log")
    return run


def _cpu_at(run: Path) -> dict[int, float]:
    """step -> process CPU seconds of the training process, from metrics.jsonl (the last segment of a resume)."""
    cpu: dict[int, float] = {}
    for line in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if "process_cpu_s" in record:
            cpu[int(record["step"])] = float(record["process_cpu_s"])
    return cpu


def score(setting: Setting, seed: int, run: Path, out: Path, checkpoint: Path, data_dir: Path,
          name: str | None = None) -> dict:
    """Score ``checkpoint`` (a checkpoint folder, or the run folder: its final checkpoint) once; its row."""
    name = name or checkpoint.name
    result_dir = out / "scores" / run.name / name
    done_file = result_dir / "row.json"
    if done_file.is_file():
        return json.loads(done_file.read_text(encoding="utf-8"))
    scoring = "clm" if setting.objective == "CLM" else "pll"
    if result_dir.exists():  # an evaluation stopped before its row: score it again from the start
        shutil.rmtree(result_dir)
    eval_cpu = _run(["antlm-bench", "eval", "--model", str(checkpoint), "--tasks", "blimp,heldout",
                     "--data-dir", str(data_dir),
                     "--scoring", scoring, "--output", str(result_dir)],
                    out / "logs" / f"{run.name}.eval.log")
    table = pq.read_table(result_dir / "scores.parquet").to_pylist()
    blimp = next(r for r in table if r["task"] == "blimp" and r["subtask"] == "")
    heldout = next(r for r in table if r["task"] == "heldout" and r["subtask"] == "")
    step = int(blimp_step(result_dir))
    cpu = _cpu_at(run)
    train_cpu = cpu.get(step, max(cpu.values()) if cpu else 0.0)
    # the precision the training ran in (run.json; `auto` chose it from this CPU): fp32 and bf16 rows are
    # different instruments until shown equal, so the table keeps them apart
    precision = json.loads((run / "run.json").read_text(encoding="utf-8")).get("precision") or "fp32"
    row = {"setting": setting.name, "seed": seed, "checkpoint": name, "precision": precision,
           "step": step, "tokens_seen": int(blimp["tokens_seen"] or 0), "words_seen": blimp["words_seen"],
           "blimp": round(100 * blimp["value"], 2), "blimp_ci": [round(100 * blimp["ci_low"], 2),
                                                                 round(100 * blimp["ci_high"], 2)],
           "heldout_nats": round(heldout["value"], 4), "scoring": scoring,
           "train_cpu_min": round(train_cpu / 60, 1), "eval_cpu_min": round(eval_cpu / 60, 1)}
    done_file.write_text(json.dumps(row) + "\n", encoding="utf-8")
    return row


def blimp_step(result_dir: Path) -> int:
    """The optimizer step of the checkpoint an evaluation scored (its eval.json's record of the checkpoint)."""
    record = json.loads((result_dir / "eval.json").read_text(encoding="utf-8"))
    scored = Path((record.get("checkpoint") or {}).get("checkpoint") or "")
    state = scored / "antlm_state.json"
    return int(json.loads(state.read_text(encoding="utf-8")).get("step", 0)) if state.is_file() else 0


def all_rows(out: Path) -> list[dict]:
    """Every scored checkpoint under ``out/scores``, by setting, word budget, seed and words seen."""
    rows = []
    for path in (out / "scores").glob("*/*/row.json"):
        row = json.loads(path.read_text(encoding="utf-8"))
        run = path.parent.parent.name  # <setting>-<budget>-s<seed>
        row["budget"] = run[len(row["setting"]) + 1:run.rfind("-s")]
        rows.append(row)
    return sorted(rows, key=lambda r: (r["setting"], _words(r["budget"]), r["seed"], r["words_seen"] or 0))


def table(rows: list[dict]) -> str:
    lines = ["| setting | words budget | seed | precision | checkpoint | words seen | steps "
             "| BLiMP % (95% bootstrap CI) | held-out nats/token | train CPU-min | eval CPU-min |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['setting']} | {r.get('budget', '')} | {r['seed']} | {r.get('precision', 'fp32')} "
                     f"| {r['checkpoint']} "
                     f"| {r['words_seen'] or 0:,} | {r['step']} "
                     f"| {r['blimp']:.1f} [{r['blimp_ci'][0]:.1f}, {r['blimp_ci'][1]:.1f}] | {r['heldout_nats']:.3f} "
                     f"| {r['train_cpu_min']} | {r['eval_cpu_min']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--settings", default="ll-h128-b16", help=f"comma-separated; known: {', '.join(SETTINGS)}")
    parser.add_argument("--words", default="3.2M", help="words of training per setting (repeats counted)")
    parser.add_argument("--at", default="250K,500K,1M,2M,3M", help="checkpoints at these words seen, or none")
    parser.add_argument("--seeds", default="1")
    parser.add_argument("--corpus", type=Path,
                        default=Path(os.environ.get("ANTLM_BENCH_DATA", ROOT.parent / "shared" / "data"))
                        / "pretrain_1600k")
    parser.add_argument("--table", type=Path, help="also write the table (markdown) here")
    args = parser.parse_args()
    out = args.output.resolve()
    (out / "logs").mkdir(parents=True, exist_ok=True)
    # "none": the final checkpoint only (each scored checkpoint costs a whole evaluation: ~18 CPU-minutes of pll)
    at = [] if args.at.strip().lower() == "none" else [_words(w) for w in args.at.split(",")]
    rows = []
    for name in args.settings.split(","):
        if name not in SETTINGS:
            sys.exit(f"--settings: unknown {name!r}; known: {', '.join(SETTINGS)}")
        for seed in [int(s) for s in args.seeds.split(",")]:
            run = train(SETTINGS[name], out, args.corpus, args.words, at, seed)
            scored = out / "scores" / run.name
            names = {p.name for p in (run / "checkpoints").glob("chck_*")} | \
                {p.name for p in scored.glob("chck_*") if (p / "row.json").is_file()}
            names_by_words = sorted(names, key=lambda n: _words(n.removeprefix("chck_")))
            for checkpoint, label in [*((run / "checkpoints" / n, n) for n in names_by_words), (run, "final")]:
                row = score(SETTINGS[name], seed, run, out, checkpoint, args.corpus.parent, label)
                rows.append(row)
                print(table([row]).splitlines()[-1], flush=True)
    print(table(rows))
    text = table(all_rows(out))  # every setting scored so far, not only this sitting's

    if args.table:
        args.table.parent.mkdir(parents=True, exist_ok=True)
        args.table.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
