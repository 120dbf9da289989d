"""Training throughput: antlm-bench's trainer step vs a plain loop over transformers' LlamaForCausalLM.

    python benchmarks/training.py                       # CPU: tiny and small presets
    python benchmarks/training.py --presets paper --device cuda --steps 10 --mfu     # what benchmarks/gpu.sh runs

For each preset and objective, both contenders train the same model size on the same batches (same global batch,
same micro-batches, AdamW, gradient clipping; bf16 autocast on CUDA only), timed in alternating rounds in one
process; the table shows the median tokens/s of the rounds and the ratio ours / peer.

- ours: ``Trainer._train_step`` + the optimizer step of the real trainer (BabyLlama; the LM head runs only at
  positions that carry a loss, so MLM saves most of the head).
- peer: ``LlamaForCausalLM(config)`` of the same config, ``model(input_ids, labels=labels).loss.backward()`` per
  micro-batch: logits for every position, the loss over the labelled ones (the usual transformers MLM loop).
  For MLM the peer keeps its causal attention (it is the compute, not the objective, that is compared).

Batches (corruption and masks) are built before the timed region for both; the trainer prefetches them in a
background thread, and the ``build ms`` column shows what one costs. Targets: CLM >= 1.0x, MLM >= 1.2x.

Recorded 2026-11-30, ``OMP_NUM_THREADS=1 python benchmarks/training.py`` (2-core AMD EPYC, shared; 3 min 27 s):
tiny CLM 1.41x, MLM 2.54x; small CLM 1.11x, MLM 1.63x (BabyLlama vs LlamaForCausalLM).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from antlm_bench.config import TrainConfig
from antlm_bench.data.tokenizer import train_tokenizer
from antlm_bench.recipes import load_recipe
from antlm_bench.training.trainer import Trainer, TrainJob

TARGETS = {"CLM": 1.0, "MLM": 1.2}
PEAK_BF16 = 989e12  # H100 / H200 SXM dense bf16 peak (the H200 has the H100's tensor cores)


def synthetic_corpus(n_sequences: int, seq_len: int, vocab: int, seed: int = 0) -> SimpleNamespace:
    """Random token blocks (throughput does not depend on the text) in the PackedCorpus shape."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, vocab, size=(n_sequences, seq_len), dtype=np.int32)
    ids[:, 0] = 1
    return SimpleNamespace(input_ids=ids, word_starts=rng.random((n_sequences, seq_len)) < 0.7, data_hash="synthetic",
                           tokenizer_hash="synthetic", n_words=int(ids.size * 0.75))


def small_tokenizer(vocab: int):
    rng = np.random.default_rng(0)
    words = ["".join(rng.choice(list("abcdefghij"), size=rng.integers(2, 7))) for _ in range(3000)]
    lines = [" ".join(rng.choice(words, size=12)) for _ in range(4000)]
    return train_tokenizer(lines, vocab_size=min(vocab, 4000))


class Ours:
    def __init__(self, recipe: str, preset: str, objective: str, device: str, micro: int | None, tmp: Path,
                 n_sequences: int) -> None:
        spec = load_recipe(recipe).resolve(preset).spec
        corpus = synthetic_corpus(n_sequences, spec.max_seq_len, spec.vocab_size)
        config = TrainConfig(model=recipe, preset=preset, output=tmp / f"{recipe}-{preset}-{objective}",
                             schedule=f"1000_{objective}", device=device, progress=False, save_every_minutes=None,
                             micro_batch_size=micro)
        self.trainer = Trainer(TrainJob.of(config), tokenizer=small_tokenizer(spec.vocab_size), corpus=corpus)
        self.model = self.trainer.model
        self.n_parameters = sum(p.numel() for p in self.model.parameters())

    def batches(self, count: int, start: int) -> tuple[list, float]:
        clock = time.perf_counter()
        built = [self.trainer.steps.build(start + i) for i in range(count)]
        return built, (time.perf_counter() - clock) / count

    def step(self, batch) -> None:
        self.trainer.runner.gradients(batch)
        self.trainer.optimizer.step()
        self.trainer.optimizer.zero_grad(set_to_none=True)


class PeerLlama:
    """The plain transformers loop, on the same config, micro-batches and optimizer settings."""

    def __init__(self, ours: Ours) -> None:
        from transformers import LlamaConfig, LlamaForCausalLM

        trainer = ours.trainer
        config = LlamaConfig.from_dict(trainer.model.config.to_dict())
        config._attn_implementation = "sdpa"
        torch.manual_seed(0)
        self.model = LlamaForCausalLM(config).to(trainer.device).train()
        self.n_parameters = sum(p.numel() for p in self.model.parameters())
        spec = trainer.recipe.optimizer
        extra = {"fused": True} if trainer.device.type == "cuda" else {}
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=spec.lr, betas=spec.betas, eps=spec.eps,
                                           weight_decay=spec.weight_decay, **extra)
        self.trainer = trainer
        self.clip = spec.grad_clip

    def step(self, batch) -> None:
        t = self.trainer
        chunks = [c for c in np.array_split(np.arange(len(batch)), math.ceil(len(batch) / t.micro_batch)) if len(c)]
        for rows in chunks:
            x = torch.from_numpy(batch.input_ids[rows]).to(t.device, non_blocking=True)
            labels = batch.labels[rows]
            if batch.shift == 0:  # transformers shifts causal-LM labels itself: undo it so position i scores token i
                labels = np.concatenate([np.full((len(rows), 1), -100), labels[:, :-1]], axis=1)
            y = torch.from_numpy(labels).to(t.device, non_blocking=True)
            with t.autocast:
                loss = self.model(input_ids=x, labels=y).loss
            (loss / len(chunks)).backward()
        if self.clip:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


def _timed(step, batches: list, device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    clock = time.perf_counter()
    for batch in batches:
        step(batch)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - clock


def flops_per_token(model_config, n_parameters: int, seq_len: int, head_fraction: float) -> tuple[float, float]:
    """(6N, 6N with the head only at `head_fraction` of the positions plus attention 12*L*H*T), per token."""
    hidden, layers, vocab = model_config.hidden_size, model_config.num_hidden_layers, model_config.vocab_size
    head = vocab * hidden
    exact = 6 * (n_parameters - head) + 6 * head * head_fraction + 12 * layers * hidden * seq_len
    return 6.0 * n_parameters, float(exact)


def run(args: argparse.Namespace) -> int:
    if args.threads:
        torch.set_num_threads(args.threads)  # a script's choice; the library never sets it
    tmp = Path(tempfile.mkdtemp(prefix="antlm-bench-training-"))
    rows = []
    for preset in args.presets.split(","):
        for architecture in args.architectures.split(","):
            recipe = {"babyllama": "antlm-babyllama", "ltgbert": "antlm-ltgbert"}[architecture]
            for objective in args.objectives.split(","):
                spec = load_recipe(recipe).resolve(preset).spec
                ours = Ours(recipe, preset, objective, args.device, args.micro_batch_size, tmp,
                            n_sequences=spec.global_batch_size * (args.steps * args.rounds + args.warmup + 1))
                device = ours.trainer.device
                peer = PeerLlama(ours) if architecture == "babyllama" and not args.no_peer else None
                warm, build_ms = ours.batches(args.warmup, 0)
                for batch in warm:
                    ours.step(batch)
                    if peer is not None:
                        peer.step(batch)
                ours_speed, peer_speed = [], []
                start = args.warmup
                for _ in range(args.rounds):
                    batches, per_batch = ours.batches(args.steps, start)
                    start += args.steps
                    tokens = sum(len(b) for b in batches) * spec.max_seq_len
                    ours_speed.append(tokens / _timed(ours.step, batches, device))
                    if peer is not None:
                        peer_speed.append(tokens / _timed(peer.step, batches, device))
                    build_ms = per_batch * 1e3
                labelled = statistics.mean(b.n_targets / b.input_ids.size for b in batches)
                ours_tps = statistics.median(ours_speed)
                peer_tps = statistics.median(peer_speed) if peer_speed else None
                six_n, exact = flops_per_token(ours.model.config if architecture == "babyllama" else
                                               SimpleNamespace(hidden_size=spec.hidden_size,
                                                               num_hidden_layers=spec.n_layers,
                                                               vocab_size=spec.vocab_size),
                                               ours.n_parameters, spec.max_seq_len, labelled)
                rows.append(dict(
                    preset=preset, model=architecture, objective=objective, params=ours.n_parameters,
                    peer_params=peer.n_parameters if peer else None, ours=ours_tps, peer=peer_tps,
                    ratio=ours_tps / peer_tps if peer_tps else None, build_ms=build_ms,
                    mfu_6n=ours_tps * six_n / PEAK_BF16, mfu_exact=ours_tps * exact / PEAK_BF16,
                    peer_mfu_6n=(peer_tps * six_n / PEAK_BF16) if peer_tps else None,
                ))
                del ours, peer
                if device.type == "cuda":
                    torch.cuda.empty_cache()
    _print(rows, args)
    failed = [r for r in rows if r["ratio"] is not None and r["ratio"] < TARGETS[r["objective"]]]
    return 1 if failed and args.strict else 0


def _print(rows: list[dict], args: argparse.Namespace) -> None:
    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    name = torch.cuda.get_device_name() if device.startswith("cuda") else "cpu"
    print(f"\ntraining throughput on {name}, torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"{args.rounds} rounds x {args.steps} steps (median), bf16 autocast: {device.startswith('cuda')}")
    header = f"{'preset':7} {'model':10} {'obj':4} {'params':>9} {'ours tok/s':>12} {'peer tok/s':>12} " \
             f"{'ratio':>6} {'target':>6} {'build ms':>8}"
    if args.mfu:
        header += f" {'MFU 6N':>7} {'MFU exact':>9} {'peer MFU':>8}"
    print(header)
    for r in rows:
        peer = f"{r['peer']:12,.0f}" if r["peer"] else f"{'-':>12}"
        ratio = f"{r['ratio']:6.2f}" if r["ratio"] else f"{'-':>6}"
        target = f"{TARGETS[r['objective']]:5.1f}x" if r["ratio"] else f"{'-':>6}"
        line = (f"{r['preset']:7} {r['model']:10} {r['objective']:4} {r['params'] / 1e6:8.2f}M {r['ours']:12,.0f} "
                f"{peer} {ratio} {target} {r['build_ms']:8.1f}")
        if args.mfu:
            peer_mfu = f"{r['peer_mfu_6n'] * 100:7.1f}%" if r["peer_mfu_6n"] else f"{'-':>8}"
            line += f" {r['mfu_6n'] * 100:6.1f}% {r['mfu_exact'] * 100:8.1f}% {peer_mfu}"
        print(line)
    if args.mfu:
        print(f"MFU = FLOPs per token x tokens/s / {PEAK_BF16:.0e} (H100/H200 dense bf16 peak). 6N: the usual "
              "6 x parameters; exact: the head only where a loss is read, plus attention 12*L*H*T.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presets", default="tiny,small")
    parser.add_argument("--architectures", default="babyllama,ltgbert")
    parser.add_argument("--objectives", default="CLM,MLM")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, default=3, help="optimizer steps per timed round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--micro-batch-size", type=int, default=None)
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (0: torch's default)")
    parser.add_argument("--mfu", action="store_true", help="print model FLOP utilisation (CUDA)")
    parser.add_argument("--no-peer", action="store_true")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a ratio misses its target")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
