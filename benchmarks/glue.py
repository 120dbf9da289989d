"""GLUE fine-tuning speed: antlm-bench's loop against a plain transformers ``Trainer``, same hyper-parameters.

For a tiny and a small BabyLlama (the recipe presets, seeded random weights: speed does not depend on what the
weights know) and for RTE and MRPC, one run each of

- ``antlm-bench``: :func:`antlm_bench.adapters.glue.finetune.finetune` as ``antlm-bench eval --tasks glue`` runs it
  on the saved checkpoint (our BabyLlama class), and the same loop on transformers' ``LlamaForCausalLM`` (to
  separate the loop from the model code);
- ``Trainer``: ``LlamaForSequenceClassification`` from the same folder, ``group_by_length``, dynamic padding,
  evaluation on the same dev slice every epoch and ``load_best_model_at_end`` (what gives it the same best-epoch
  selection), then prediction of the reported split.

Both: lr 3e-5, batch 32, max length 512, AdamW (weight decay 0.01), cosine with 6% warm-up down to 10% of lr,
no gradient clipping, eval batch 64, the same training examples and dev slice. Timed: tokenization + training +
per-epoch selection + prediction of the reported split (wall clock). examples/s = training examples x epochs / s.

    python benchmarks/glue.py --threads 1 --repeats 3  # budget: 1000 training examples, 2 epochs
    python benchmarks/glue.py --max-train-examples 0 --epochs 10 --device cuda   # the full BabyLM setting

Prints one table with the ratio Trainer time / antlm-bench time (>= 1.0: we are faster).
"""

from __future__ import annotations

import argparse
import inspect
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from antlm_bench.adapters.glue.data import make_splits
from antlm_bench.adapters.glue.encoding import PairEncoder
from antlm_bench.adapters.glue.finetune import FinetuneSettings, classification_metrics, finetune
from antlm_bench.tasks import resolve_tasks


def build_checkpoint(preset: str, folder: Path, data_dir: Path) -> Path:
    """A BabyLlama of the preset's size with a BPE tokenizer trained on the pre-training sample, saved."""
    from antlm_bench.data.tokenizer import train_tokenizer
    from antlm_bench.models import build_model
    from antlm_bench.recipes import load_recipe

    resolved = load_recipe("babyllama-clm-only").resolve(preset)
    lines = []
    for path in sorted((data_dir / "pretrain_sample" / "train").glob("*.train")):
        words = path.read_text(encoding="utf-8").split()
        lines += [" ".join(words[i:i + 50]) for i in range(0, min(len(words), 60000), 50)]
    tokenizer = train_tokenizer(lines, vocab_size=resolved.spec.vocab_size)
    torch.manual_seed(0)
    model = build_model(resolved, tokenizer)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def member_data(name: str, data_dir: Path, max_train: int | None):
    task = resolve_tasks(f"glue:{name}")[0].adapter()
    data = task.load_member(data_dir, name)
    splits = make_splits(data.train, data.report, 0.1, max_train, f"glue/{name}")
    return task, splits, data.report


def run_ours(model, tokenizer, name, data_dir, settings, max_train) -> dict:
    task, splits, _ = member_data(name, data_dir, max_train)
    settings.selection_metric = task.members[name].score_metric
    started = time.perf_counter()
    outcome = finetune(model, tokenizer, splits, len(task.members[name].labels), settings, seed=42)
    seconds = time.perf_counter() - started
    metrics = classification_metrics(outcome.labels, outcome.predictions)
    return {"seconds": seconds, "n_train": outcome.n_train, "metric": metrics[task.members[name].score_metric]}


def run_trainer(folder: Path, name: str, data_dir: Path, settings: FinetuneSettings, max_train, work: Path) -> dict:
    from transformers import (
        AutoModelForSequenceClassification,
        AutoTokenizer,
        DataCollatorWithPadding,
        Trainer,
        TrainingArguments,
    )

    task, splits, report = member_data(name, data_dir, max_train)
    metric_name = task.members[name].score_metric
    started = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForSequenceClassification.from_pretrained(
        folder, num_labels=len(task.members[name].labels), dtype=torch.float32)
    model.config.pad_token_id = tokenizer.pad_token_id
    encoder = PairEncoder(tokenizer, settings.max_length)  # the same input ids as ours

    class Rows(torch.utils.data.Dataset):
        def __init__(self, examples):
            encoded = encoder.encode(examples)
            self.rows = [{"input_ids": ids, "attention_mask": [1] * len(ids), "labels": int(label)}
                         for ids, label in zip(encoded.input_ids, encoded.labels)]

        def __len__(self):
            return len(self.rows)

        def __getitem__(self, i):
            return self.rows[i]

    def compute_metrics(prediction):
        return classification_metrics(prediction.label_ids, prediction.predictions.argmax(-1))

    accepted = set(inspect.signature(TrainingArguments.__init__).parameters)
    # transformers renamed these across 5.x: take whichever this version has
    version_specific = {"warmup_ratio": settings.warmup} if "warmup_ratio" in accepted else {
        "warmup_steps": settings.warmup}
    if "train_sampling_strategy" in accepted:
        version_specific["train_sampling_strategy"] = "group_by_length"
    else:
        version_specific["group_by_length"] = True
    args = TrainingArguments(
        output_dir=str(work / f"trainer-{name}"), learning_rate=settings.lr,
        per_device_train_batch_size=settings.batch_size, per_device_eval_batch_size=settings.eval_batch_size,
        num_train_epochs=settings.epochs, weight_decay=settings.weight_decay,
        lr_scheduler_type="cosine_with_min_lr", lr_scheduler_kwargs={"min_lr_rate": settings.min_lr_factor},
        max_grad_norm=0.0, eval_strategy="epoch", save_strategy="epoch",
        load_best_model_at_end=True, metric_for_best_model=metric_name, greater_is_better=True, save_total_limit=1,
        logging_strategy="no", report_to=[], disable_tqdm=True, seed=42, dataloader_num_workers=0,
        use_cpu=settings.device == "cpu", bf16=settings.dtype == "bfloat16", **version_specific,
    )
    trainer = Trainer(model=model, args=args, train_dataset=Rows(splits.train), eval_dataset=Rows(splits.dev),
                      data_collator=DataCollatorWithPadding(tokenizer), compute_metrics=compute_metrics)
    trainer.train()
    prediction = trainer.predict(Rows(report))
    seconds = time.perf_counter() - started
    metric = compute_metrics(prediction)[metric_name]
    shutil.rmtree(work / f"trainer-{name}", ignore_errors=True)
    return {"seconds": seconds, "n_train": len(splits.train), "metric": metric}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--presets", default="tiny,small")
    parser.add_argument("--tasks", default="rte,mrpc")
    parser.add_argument("--max-train-examples", type=int, default=1000, help="0: all")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--repeats", type=int, default=1, help="time each side N times, keep the fastest")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    from antlm_bench.data import resolve_data_dir
    from antlm_bench.models import load_model

    data_dir = resolve_data_dir(args.data_dir)
    max_train = args.max_train_examples or None
    import sklearn.metrics  # noqa: F401  (both sides use it; keep its import out of the first timing)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for preset in args.presets.split(","):
            folder = build_checkpoint(preset, work / preset, data_dir)
            from transformers import AutoTokenizer, LlamaForCausalLM

            tokenizer = AutoTokenizer.from_pretrained(folder)
            n_params = sum(p.numel() for p in load_model(folder).parameters())
            # warm-up, untimed: first-call costs (kernels, allocator, lazy imports) paid once for both sides
            warm = FinetuneSettings(epochs=1, device=args.device, dtype=args.dtype)
            run_ours(load_model(folder).to(args.device), tokenizer, "rte", data_dir, warm, 64)
            run_trainer(folder, "rte", data_dir, FinetuneSettings(epochs=1, device=args.device, dtype=args.dtype),
                        64, work)
            for name in args.tasks.split(","):
                runs: dict[str, list[dict]] = {"ours": [], "ours_hf_llama": [], "trainer": []}
                for _ in range(args.repeats):  # interleaved, so that a busy spell hits every side alike
                    def fresh() -> FinetuneSettings:
                        return FinetuneSettings(epochs=args.epochs, device=args.device, dtype=args.dtype)

                    runs["ours"].append(run_ours(load_model(folder).to(args.device), tokenizer, name, data_dir,
                                                 fresh(), max_train))
                    runs["ours_hf_llama"].append(run_ours(LlamaForCausalLM.from_pretrained(folder).to(args.device),
                                                          tokenizer, name, data_dir, fresh(), max_train))
                    runs["trainer"].append(run_trainer(folder, name, data_dir, fresh(), max_train, work))
                best = {side: min(found, key=lambda r: r["seconds"]) for side, found in runs.items()}
                results.append({"preset": preset, "params": n_params, "task": name, "epochs": args.epochs,
                                "repeats": args.repeats, **best})
                print_row(results[-1], flush=True)
    print_table(results, args)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


def _rate(run: dict, epochs: int) -> float:
    return run["n_train"] * epochs / run["seconds"]


def print_row(r: dict, flush: bool = False) -> None:
    e = r["epochs"]
    print(f"{r['preset']}/{r['task']}: ours {r['ours']['seconds']:.1f}s ({_rate(r['ours'], e):.0f} ex/s), "
          f"ours on HF Llama {r['ours_hf_llama']['seconds']:.1f}s, Trainer {r['trainer']['seconds']:.1f}s "
          f"({_rate(r['trainer'], e):.0f} ex/s)", file=sys.stderr, flush=flush)


def print_table(results: list[dict], args) -> None:
    print(f"\nGLUE fine-tuning, {args.epochs} epochs, max_train_examples={args.max_train_examples or 'all'}, "
          f"device={args.device}, threads={torch.get_num_threads()}, torch {torch.__version__}, "
          f"fastest of {args.repeats} interleaved run(s) per side")
    header = (f"{'model':<16}{'task':<6}{'n_train':>8}{'ours s':>9}{'ours ex/s':>10}{'ours(HF) s':>11}"
              f"{'Trainer s':>10}{'Trainer ex/s':>13}{'ratio':>7}{'ours metric':>12}{'Trainer metric':>15}")
    print(header)
    print("-" * len(header))
    for r in results:
        e = r["epochs"]
        model = f"{r['preset']} ({r['params'] / 1e6:.2f}M)"
        ratio = r["trainer"]["seconds"] / r["ours"]["seconds"]
        print(f"{model:<16}{r['task']:<6}{r['ours']['n_train']:>8}{r['ours']['seconds']:>9.1f}"
              f"{_rate(r['ours'], e):>10.0f}{r['ours_hf_llama']['seconds']:>11.1f}{r['trainer']['seconds']:>10.1f}"
              f"{_rate(r['trainer'], e):>13.0f}{ratio:>6.2f}x{r['ours']['metric']:>12.3f}"
              f"{r['trainer']['metric']:>15.3f}")
    ratios = [r["trainer"]["seconds"] / r["ours"]["seconds"] for r in results]
    print(f"geometric mean ratio (Trainer time / ours): {np.exp(np.mean(np.log(ratios))):.2f}x (target >= 1.0x)")


if __name__ == "__main__":
    main()
