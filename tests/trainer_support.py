"""Shared by the trainer tests: a small synthetic BabyLM-style corpus and a fast tiny-run configuration."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

from antlm_bench.config import TrainConfig

# one thread: bit-identical results need the same kernels in the same order in every process
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
# a training process that kills itself (kill -9: no cleanup, no flush) after step argv[2] of config argv[1]
KILLER = """
import os, signal, sys
from antlm_bench.config import TrainConfig
from antlm_bench.training.trainer import TrainJob, Trainer
config = TrainConfig.model_validate_json(sys.argv[1])
kill_at = int(sys.argv[2])
def kill(info):
    if info.step == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)  # no cleanup, no flush: what kill -9 does
Trainer(TrainJob.of(config), callbacks=[kill]).run()
"""

_SYLLABLES = ["ka", "lo", "mi", "ter", "sun", "pa", "dri", "vel", "on", "ba", "chi", "rum", "es", "tor", "ni"]
_FUNCTION = ["the", "a", "and", "of", "to", "in", "that", "with", "is", "was", "on", "for", "it", "he", "she"]


def write_corpus(folder: Path, n_words: int = 6000, seed: int = 0) -> Path:
    """Sentences of function words and invented multi-syllable words (so BPE splits words into several tokens),
    in two sources, deterministic."""
    rng = random.Random(seed)
    content = ["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(400)]
    folder.mkdir(parents=True, exist_ok=True)
    for source, share in (("stories", 0.6), ("talk", 0.4)):
        lines, words = [], 0
        while words < n_words * share:
            length = rng.randint(4, 14)
            sentence = [rng.choice(_FUNCTION) if rng.random() < 0.4 else rng.choice(content) for _ in range(length)]
            lines.append(" ".join(sentence).capitalize() + rng.choice([" .", " ?", " !"]))
            words += length
        (folder / f"{source}.train").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def tiny_config(tmp: Path, output: Path, **overrides: Any) -> TrainConfig:
    corpus = tmp / "corpus"
    if not corpus.is_dir():
        write_corpus(corpus)
    values: dict[str, Any] = dict(
        model="antlm-babyllama", preset="tiny", output=output, schedule="1_CLM+1_MLM", corpus=corpus,
        cache_dir=tmp / "cache", seed=3, progress=False, save_every_minutes=None, device="cpu",
    )
    values.update(overrides)
    return TrainConfig(**values)


def cli_args(config: TrainConfig) -> list[str]:
    """The same run as ``antlm-bench train`` arguments."""
    args = ["train", "--model", config.model, "--preset", config.preset, "--output", str(config.output),
            "--schedule", config.schedule or "", "--corpus", str(config.corpus), "--cache-dir", str(config.cache_dir),
            "--seed", str(config.seed), "--device", config.device, "--no-progress"]
    if config.save_every_steps:
        args += ["--save-every-steps", str(config.save_every_steps)]
    if config.micro_batch_size:
        args += ["--micro-batch-size", str(config.micro_batch_size)]
    if config.deterministic:
        args.append("--deterministic")
    if config.resume:
        args.append("--resume")
    return args


def train_by_cli(config: TrainConfig) -> subprocess.CompletedProcess:
    """The run of ``config`` through ``python -m antlm_bench train`` in its own process, which must succeed."""
    out = subprocess.run([sys.executable, "-m", "antlm_bench", *cli_args(config)], env=ENV, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return out
