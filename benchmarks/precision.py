"""bfloat16 against float32 on this CPU: matmul ceilings, training tokens/s with MFU, scoring pairs/s.

    OMP_NUM_THREADS=1 python benchmarks/precision.py                    # all of it (about 6 minutes, 2 cores)
    python benchmarks/precision.py --parts train --presets small --rounds 5
    python benchmarks/precision.py --parts options --options-preset cpu  # compile, fused AdamW, micro-batch

One process, one thread (as `train` runs a model of this size), each comparison timed in alternating rounds so
that both sides see the same machine; tables show the median of the rounds. Throughput is per CPU-second of this
process (``time.process_time``), which other jobs on a shared machine disturb far less than wall time; the wall
ratio is printed beside it.

- ceilings: GFLOP/s of a float32 and a bf16 matmul at three sizes (the largest is each dtype's ceiling for MFU).
- train: ``StepRunner.gradients`` + the optimizer step of the real trainer, fp32 against ``--precision bf16``
  (autocast, float32 master weights), per recipe, preset and objective. MFU = the step's matmul FLOPs per token x
  tokens/s over the dtype's measured ceiling, where FLOPs per token = 6 x (parameters in matmuls) with the output
  projection counted at the positions it runs on: every position under CLM, the 15% labelled ones under MLM (the
  head runs only there, models/loss.py); the input embedding (a lookup) and attention's own FLOPs (scores and
  mixing, small at sequence 128) are left out, as in the PaLM/nanoGPT estimate.
- score: pairs/s of ``score_texts`` (clm and pll) on BLiMP-like sentence pairs, weights in float32 against
  weights in bfloat16 (``eval --dtype bfloat16``); the parity of the two on the real tasks is docs/precision.md.
- options: at the small preset in bf16, torch.compile of the model, AdamW foreach against fused, and the
  micro-batch size.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from training import small_tokenizer, synthetic_corpus  # noqa: E402

from antlm_bench.config import TrainConfig  # noqa: E402
from antlm_bench.models.precision import cpu_bf16_instructions, resolve_precision  # noqa: E402
from antlm_bench.recipes import load_recipe  # noqa: E402
from antlm_bench.training.trainer import Trainer, TrainJob  # noqa: E402

SIZES = [(2048, 256, 256), (2048, 256, 1024), (4096, 512, 2048)]


def clocks() -> tuple[float, float]:
    return time.process_time(), time.perf_counter()


def matmul_rate(m: int, k: int, n: int, dtype: torch.dtype, seconds: float = 0.5) -> float:
    a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
    for _ in range(3):
        a @ b
    runs, (cpu0, _) = 0, clocks()
    while (spent := time.process_time() - cpu0) < seconds:
        a @ b
        runs += 1
    return 2 * m * k * n * runs / spent


def ceilings() -> dict[str, float]:
    print(f"CPU bf16 instructions: {', '.join(cpu_bf16_instructions()) or 'none'}; torch {torch.__version__}, "
          f"{torch.get_num_threads()} thread(s)")
    print(f"\n{'matmul m x k x n':<22}{'fp32 GFLOP/s':>14}{'bf16 GFLOP/s':>14}{'ratio':>8}")
    best = {"fp32": 0.0, "bf16": 0.0}
    for m, k, n in SIZES:
        fp32, bf16 = matmul_rate(m, k, n, torch.float32), matmul_rate(m, k, n, torch.bfloat16)
        best["fp32"], best["bf16"] = max(best["fp32"], fp32), max(best["bf16"], bf16)
        print(f"{f'{m} x {k} x {n}':<22}{fp32 / 1e9:>14.1f}{bf16 / 1e9:>14.1f}{bf16 / fp32:>7.1f}x")
    return best


class Side:
    """One trainer (recipe, preset, objective, precision) and a fixed list of batches to step through."""

    def __init__(self, recipe: str, preset: str, objective: str, precision: str, tmp: Path, *, micro: int | None = None,
                 fused: bool = False, compiled: bool = False) -> None:
        spec = load_recipe(recipe).resolve(preset).spec
        corpus = synthetic_corpus(spec.global_batch_size * 8, spec.max_seq_len, spec.vocab_size)
        name = f"{recipe}-{preset}-{objective}-{precision}-{micro}-{fused}-{compiled}"
        config = TrainConfig(model=recipe, preset=preset, output=tmp / name, schedule=f"1000_{objective}",
                             device="cpu", progress=False, save_every_minutes=None, precision=precision,
                             micro_batch_size=micro)
        self.trainer = Trainer(TrainJob.of(config), tokenizer=small_tokenizer(spec.vocab_size), corpus=corpus)
        if fused:
            groups = self.trainer.optimizer.param_groups
            self.trainer.optimizer = torch.optim.AdamW(
                [{"params": g["params"], "weight_decay": g["weight_decay"]} for g in groups],
                lr=groups[0]["lr"], betas=groups[0]["betas"], eps=groups[0]["eps"], fused=True)
            self.trainer.runner.optimizer = self.trainer.optimizer
        if compiled:
            self.trainer.runner.loss_module = torch.compile(self.trainer.runner.loss_module)
        self.batches = [self.trainer.steps.build(i) for i in range(8)]
        self.tokens = spec.global_batch_size * spec.max_seq_len
        self.parameters = sum(p.numel() for p in self.trainer.model.parameters())
        self.flops_per_token = matmul_flops_per_token(self.trainer.model, objective)
        self.step_index = 0
        self.round(2)  # warm-up (and compilation)

    def round(self, steps: int) -> tuple[float, float]:
        """(tokens per CPU-second, tokens per wall-second) over ``steps`` optimizer steps."""
        cpu0, wall0 = clocks()
        for _ in range(steps):
            self.trainer.runner.gradients(self.batches[self.step_index % len(self.batches)])
            self.trainer.optimizer.step()
            self.trainer.optimizer.zero_grad(set_to_none=True)
            self.step_index += 1
        cpu1, wall1 = clocks()
        return steps * self.tokens / (cpu1 - cpu0), steps * self.tokens / (wall1 - wall0)


def matmul_flops_per_token(model: torch.nn.Module, objective: str, mask_fraction: float = 0.15) -> float:
    """Training FLOPs per token of the model's matmuls: 6 x the parameters that multiply every token, plus 6 x the
    output projection's at the fraction of positions the loss runs it on (all under CLM, the masked under MLM)."""
    head = model.get_output_embeddings().weight
    lookup = model.get_input_embeddings().weight
    others = sum(p.numel() for p in model.parameters() if p is not head and p is not lookup)
    return 6 * others + 6 * head.numel() * (1.0 if objective == "CLM" else mask_fraction)


def race(sides: dict[str, Side], rounds: int, steps: int) -> dict[str, tuple[float, float]]:
    """Median (CPU, wall) tokens/s of each side over alternating rounds."""
    seen: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
    for _ in range(rounds):
        for name, side in sides.items():
            seen[name].append(side.round(steps))
    return {name: (statistics.median(c for c, _ in v), statistics.median(w for _, w in v)) for name, v in seen.items()}


def train_part(presets: list[str], rounds: int, ceiling: dict[str, float], tmp: Path) -> None:
    print(f"\n{'recipe':<17}{'preset':<7}{'obj':<5}{'params':>8}{'fp32 tok/s':>12}{'bf16 tok/s':>12}"
          f"{'bf16/fp32':>10}{'(wall)':>8}{'MFU fp32':>10}{'MFU bf16':>10}")
    for recipe in ("antlm-babyllama", "antlm-ltgbert"):
        for preset in presets:
            steps = 1 if preset != "tiny" else 8
            for objective in ("CLM", "MLM"):
                sides = {p: Side(recipe, preset, objective, p, tmp) for p in ("fp32", "bf16")}
                result = race(sides, rounds, steps)
                n, flops = sides["fp32"].parameters, sides["fp32"].flops_per_token
                mfu = {p: flops * result[p][0] / ceiling[p] for p in result}
                print(f"{recipe:<17}{preset:<7}{objective:<5}{n / 1e6:>7.2f}M{result['fp32'][0]:>12,.0f}"
                      f"{result['bf16'][0]:>12,.0f}{result['bf16'][0] / result['fp32'][0]:>9.2f}x"
                      f"{result['bf16'][1] / result['fp32'][1]:>7.2f}x{mfu['fp32']:>10.1%}{mfu['bf16']:>10.1%}",
                      flush=True)


def options_part(rounds: int, tmp: Path, preset: str) -> None:
    # in the precision `train` picks on this CPU: bf16 where it is native, float32 where bf16 is emulated
    spec = load_recipe("antlm-babyllama").resolve(preset).spec
    chosen = resolve_precision("auto", torch.device("cpu"), spec.hidden_size)
    precision = chosen.name
    micro = spec.micro_batch_size
    print(f"\noptions at antlm-babyllama {preset}, CLM, {precision} ({chosen.reason}); tokens per CPU-second, "
          "median of rounds:")
    baseline = f"baseline (foreach AdamW, micro {micro})"
    sides = {
        baseline: Side("antlm-babyllama", preset, "CLM", precision, tmp),
        "fused AdamW": Side("antlm-babyllama", preset, "CLM", precision, tmp, fused=True),
    }
    for other in sorted({max(1, micro // 2), micro * 2} - {micro}):
        if other <= spec.global_batch_size:  # a micro-batch above the global batch is the global batch
            sides[f"micro-batch {other}"] = Side("antlm-babyllama", preset, "CLM", precision, tmp, micro=other)
    try:
        sides["torch.compile"] = Side("antlm-babyllama", preset, "CLM", precision, tmp, compiled=True)
    except Exception as err:  # noqa: BLE001 - a compiler missing on this machine is a result, not a crash
        print(f"  torch.compile: not measured ({type(err).__name__}: {str(err).splitlines()[0][:120]})")
    result = race(sides, rounds, 1)
    base = result[baseline][0]
    for name, (cpu, wall) in result.items():
        print(f"  {name:<36}{cpu:>10,.0f} tok/s  {cpu / base:>5.2f}x  (wall {wall:,.0f} tok/s)")


def score_part(rounds: int) -> None:
    from antlm_bench.models import build_model
    from antlm_bench.scoring import score_texts, wrap_model

    print(f"\n{'recipe':<17}{'method':<7}{'fp32 pairs/s':>14}{'bf16 pairs/s':>14}{'bf16/fp32':>11}")
    words = "the cat dog sees a big small red house tree near runs walks quickly boy girl with of".split()
    g = torch.Generator().manual_seed(0)
    sentences = [" ".join(words[i] for i in torch.randint(0, len(words), (int(n),), generator=g))
                 for n in torch.randint(5, 14, (400,), generator=g)]
    for recipe, method in (("antlm-babyllama", "clm"), ("antlm-ltgbert", "pll")):
        small = load_recipe(recipe).resolve("small")
        tokenizer = small_tokenizer(small.spec.vocab_size)
        torch.manual_seed(0)
        base = build_model(small, tokenizer).eval()
        models = {"fp32": wrap_model(base, tokenizer),
                  "bf16": wrap_model(build_model(small, tokenizer).eval().to(torch.bfloat16), tokenizer)}
        texts = sentences[:400] if method == "clm" else sentences[:100]
        seen: dict[str, list[float]] = {k: [] for k in models}
        for _ in range(rounds):
            for name, model in models.items():
                cpu0, _ = clocks()
                score_texts(model, texts, method)
                seen[name].append(len(texts) / 2 / (time.process_time() - cpu0))
        fp32, bf16 = statistics.median(seen["fp32"]), statistics.median(seen["bf16"])
        print(f"{recipe:<17}{method:<7}{fp32:>14,.1f}{bf16:>14,.1f}{bf16 / fp32:>10.2f}x", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", default="ceilings,train,score,options")
    parser.add_argument("--presets", default="tiny,small")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--options-preset", default="small", help="the antlm-babyllama preset the options part "
                        "measures (cpu: the one that learns on a CPU)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    parts = args.parts.split(",")
    ceiling = ceilings() if {"ceilings", "train"} & set(parts) else {}
    with tempfile.TemporaryDirectory() as tmp:
        if "train" in parts:
            train_part(args.presets.split(","), args.rounds, ceiling, Path(tmp))
        if "score" in parts:
            score_part(args.rounds)
        if "options" in parts:
            options_part(args.rounds, Path(tmp), args.options_preset)


if __name__ == "__main__":
    main()
