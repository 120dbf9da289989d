"""Scoring throughput against the named peers, same machine, same tiny models, same 1000 real BLiMP pairs, one run.

    python benchmarks/scoring.py [--pairs 1000] [--threads 1] [--batch-tokens 4096] [--peer-batch 64]
                                 [--methods clm,pll] [--skip-rss]

Peers, all run in this process on the very same model objects:
- clm: lm-eval 0.4.13 ``HFLM.loglikelihood`` (requests ``("", sentence)``, the blimp convention without the
  leading space) and minicons 0.3.39 ``IncrementalLMScorer.sequence_score`` (summed);
- pll / pll-word-l2r: minicons ``MaskedLMScorer.sequence_score`` (PLL_metric original / within_word_l2r, summed).
Each contender gets one untimed warm-up call on 16 pairs, then the best of ``--repeats`` timed calls. The table prints pairs/s for us and the
peer, the ratio, and the largest score difference (the peers compute the same numbers; that is the point).

Then the peak resident memory of scoring one 300-token sentence with PLL, each in a fresh subprocess: ours at
two token budgets (memory follows the budget, not the sentence) and minicons (all copies' full logits at once).

Targets (issue #2): clm >= 5x lm-eval in-process and >= 3x minicons; pll >= 4x minicons.

Recorded 2026-11-30 (2-core AMD EPYC shared with other jobs, 1 thread, process CPU time, best of 3; after the
prefix-tree rows for clm):

    clm           lm-eval 0.4.13 HFLM, batch_size 1 (default)     4290 vs  663 pairs/s   6.5x
    clm           lm-eval 0.4.13 HFLM, batch_size 64              4290 vs 2153 pairs/s   2.0x
    clm           minicons 0.3.39 IncrementalLMScorer              4290 vs 1229 pairs/s   3.5x
    pll           minicons 0.3.39 MaskedLMScorer (original)         568 vs  100 pairs/s   5.7x
    pll-word-l2r  minicons 0.3.39 MaskedLMScorer (within_word_l2r)  589 vs  103 pairs/s   5.7x
    max |score difference| to the peers <= 4.8e-05 (nats, summed)
    PLL of a 302-token sentence, memory above the loaded model: ours 6.2 / 23.9 / 72.6 MiB at --batch-tokens
    1024 / 4096 / 16384; minicons 969 MiB.

clm at hidden size 64 is bound by arithmetic both sides share: the head's logits and log-softmax over the whole
vocabulary at every scored token, and the transformer body. Ours runs the head once per distinct (prefix, token)
cell, and the body over prefix-tree rows in which sentences that begin alike (a pair's members, neighbours in
sorted order) share their beginning (before the trees: 3462 pairs/s, 2.9x minicons). lm-eval's default one-request batches and minicons'
unsorted, padded batches of full logits are what the ratios measure; a well-batched lm-eval (64) is within 2x.
Models: 2 layers, hidden 64, vocab 2000 (tests/tiny_models.py). ``--threads`` is applied to every contender;
one thread is the default because the machine these figures come from has 2 shared cores.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import numpy as np
import torch
from tiny_models import build_tiny_bert, build_tiny_llama, build_tiny_tokenizer

from antlm_bench.data import resolve_data_dir
from antlm_bench.scoring import score_pairs, wrap_model


def load_pairs(n: int) -> tuple[list[str], list[str]]:
    """The first pairs of every BLiMP paradigm, round-robin, until n (all 67 paradigms represented)."""
    fallback = ROOT.parent / "shared" / "data"  # the checkout's sibling, as tests/conftest.py looks for it
    folder = resolve_data_dir(None if os.environ.get("ANTLM_BENCH_DATA") or not fallback.is_dir() else fallback)
    folder = folder / "blimp_filtered"
    per_file = []
    for path in sorted(folder.glob("*.jsonl.xz")):
        with lzma.open(path, "rt", encoding="utf-8") as handle:
            per_file.append([json.loads(line) for line, _ in zip(handle, range(n // 67 + 2))])
    pairs = [p for row in zip(*per_file) for p in row][:n]
    return [p["sentence_good"] for p in pairs], [p["sentence_bad"] for p in pairs]


CLOCK = time.perf_counter  # main() switches to process CPU time for single-threaded runs
REPEATS = 3


def timed(fn, warm_args, args) -> tuple[float, object]:
    """Best of REPEATS timings (after one warm-up call), the same for every contender."""
    fn(*warm_args)
    best, result = float("inf"), None
    for _ in range(REPEATS):
        start = CLOCK()
        result = fn(*args)
        best = min(best, CLOCK() - start)
    return best, result


def chunked(fn, texts: list[str], size: int) -> np.ndarray:
    out: list[float] = []
    for start in range(0, len(texts), size):
        out.extend(fn(texts[start:start + size]))
    return np.asarray(out, dtype=np.float64)


def bench_clm(good, bad, args) -> list[tuple]:
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM
    from minicons import scorer

    model, tok = build_tiny_llama(), build_tiny_tokenizer("bpe")
    sm = wrap_model(model, tok)
    n = len(good)

    def ours(g, b):
        return score_pairs(sm, g, b, "clm", batch_tokens=args.batch_tokens)

    seconds, (og, ob) = timed(ours, (good[:16], bad[:16]), (good, bad))
    ours_rate = n / seconds

    rows = []
    for batch_size in (1, args.peer_batch):  # 1 is lm-eval's default --batch_size
        lm = HFLM(pretrained=model, tokenizer=tok, batch_size=batch_size)

        def lm_eval_scores(g, b, lm=lm):
            requests = [Instance(request_type="loglikelihood", doc={}, arguments=("", s), idx=0) for s in [*g, *b]]
            scores = np.array([r[0] for r in lm.loglikelihood(requests, disable_tqdm=True)])
            return scores[: len(g)], scores[len(g):]

        seconds, (lg, lb) = timed(lm_eval_scores, (good[:16], bad[:16]), (good, bad))
        label = f"lm-eval 0.4.13 HFLM, batch_size {batch_size}" + (" (default)" if batch_size == 1 else "")
        rows.append(("clm", label, ours_rate, n / seconds, max(np.abs(og - lg).max(), np.abs(ob - lb).max())))

    incremental = scorer.IncrementalLMScorer(model, "cpu", tokenizer=tok)

    def minicons_scores(g, b):
        score = lambda texts: incremental.sequence_score(texts, reduction=lambda x: x.sum().item())
        return chunked(score, g, args.peer_batch), chunked(score, b, args.peer_batch)

    seconds, (mg, mb) = timed(minicons_scores, (good[:16], bad[:16]), (good, bad))
    rows.append(("clm", "minicons 0.3.39 IncrementalLMScorer", ours_rate, n / seconds,
                 max(np.abs(og - mg).max(), np.abs(ob - mb).max())))
    return rows


def bench_pll(good, bad, args) -> list[tuple]:
    from minicons import scorer

    model, tok = build_tiny_bert(), build_tiny_tokenizer("bert")
    sm = wrap_model(model, tok)
    tok.batch_encode_plus = lambda *a, **k: tok(*a, **k)  # minicons needs it; transformers 5 removed it
    masked = scorer.MaskedLMScorer(model, "cpu", tokenizer=tok)
    n = len(good)
    rows = []
    for method, metric in (("pll", "original"), ("pll-word-l2r", "within_word_l2r")):
        seconds, (og, ob) = timed(lambda g, b, method=method: score_pairs(sm, g, b, method, batch_tokens=args.batch_tokens),
                                  (good[:16], bad[:16]), (good, bad))
        ours_rate = n / seconds

        def minicons_scores(g, b, metric=metric):
            score = lambda texts: masked.sequence_score(
                texts, reduction=lambda x: x.sum().item(), PLL_metric=metric)
            return chunked(score, g, args.peer_batch), chunked(score, b, args.peer_batch)

        seconds, (mg, mb) = timed(minicons_scores, (good[:16], bad[:16]), (good, bad))
        rows.append((method, f"minicons 0.3.39 MaskedLMScorer ({metric})", ours_rate, n / seconds,
                     max(np.abs(og - mg).max(), np.abs(ob - mb).max())))
    return rows


LONG = " ".join(["the children were reading new books about animals in the old city library"] * 30)

_RSS_SCRIPT = r"""
import resource, sys, json, torch
sys.path.insert(0, {tests!r})
torch.set_num_threads({threads})
from tiny_models import build_tiny_bert, build_tiny_tokenizer
tok, model = build_tiny_tokenizer("bert"), build_tiny_bert()
text = {text!r}
ids = tok(text)["input_ids"][:302]
text = tok.decode(ids[1:-1])
n_tokens = len(tok(text)["input_ids"])
def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20
def reset_peak():  # Linux: writing 5 to clear_refs resets the peak (VmHWM), so building the models is not counted
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False
def peak_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
before = rss_mb()
if {who!r} == "ours":
    from antlm_bench.scoring import score_texts, wrap_model
    sm = wrap_model(model, tok)
    reset_peak()
    before = rss_mb()
    score = float(score_texts(sm, [text], "pll", batch_tokens={budget})[0])
else:
    from minicons import scorer
    tok.batch_encode_plus = lambda *a, **k: tok(*a, **k)
    masked = scorer.MaskedLMScorer(model, "cpu", tokenizer=tok)
    reset_peak()
    before = rss_mb()
    score = masked.sequence_score([text], reduction=lambda x: x.sum().item())[0]
peak = peak_mb()
print(json.dumps({{"tokens": n_tokens, "before_mb": before, "peak_mb": peak, "score": score}}))
"""


def peak_rss(who: str, budget: int, threads: int) -> dict:
    code = _RSS_SCRIPT.format(tests=str(ROOT / "tests"), threads=threads, text=LONG, who=who, budget=budget)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch-tokens", type=int, default=4096, help="our token budget")
    parser.add_argument("--peer-batch", type=int, default=64, help="lm-eval batch_size / minicons sentences per call")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per contender; the best counts")
    parser.add_argument("--methods", default="clm,pll", help="clm and/or pll (pll includes pll-word-l2r)")
    parser.add_argument("--skip-rss", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    global CLOCK, REPEATS
    REPEATS = args.repeats
    if args.threads == 1:  # CPU seconds of this process: robust to other jobs on a shared machine
        CLOCK = time.process_time
    good, bad = load_pairs(args.pairs)

    methods = set(args.methods.split(","))
    if not methods <= {"clm", "pll"}:
        parser.error(f"--methods {args.methods}: use clm, pll or clm,pll")
    rows = (bench_clm(good, bad, args) if "clm" in methods else []) + (bench_pll(good, bad, args) if "pll" in methods
                                                                        else [])
    print(f"\n{len(good)} BLiMP pairs, tiny models (2 layers, hidden 64, vocab 2000), {args.threads} thread(s), "
          f"our budget {args.batch_tokens} tokens, peer batch {args.peer_batch}, best of {REPEATS}, "
          f"torch {torch.__version__}, "
          f"clock: {'process CPU time' if CLOCK is time.process_time else 'wall time'}\n")
    header = f"{'method':<13} {'peer':<50} {'ours pairs/s':>12} {'peer pairs/s':>12} {'ratio':>7} {'max |diff|':>11}"
    print(header)
    print("-" * len(header))
    for method, peer, ours, theirs, diff in rows:
        print(f"{method:<13} {peer:<50} {ours:>12.1f} {theirs:>12.1f} {ours / theirs:>6.1f}x {diff:>11.2e}")

    if not args.skip_rss:
        print("\npeak RSS, PLL of one 300-token sentence (fresh process each; 'extra' = peak - RSS before scoring)")
        for who, budget in (("ours", 1024), ("ours", 4096), ("ours", 16384), ("minicons", 0)):
            result = peak_rss(who, budget, args.threads)
            label = f"ours, --batch-tokens {budget}" if who == "ours" else "minicons MaskedLMScorer"
            print(f"  {label:<30} {result['tokens']} tokens: peak {result['peak_mb']:7.1f} MiB, "
                  f"extra {result['peak_mb'] - result['before_mb']:7.1f} MiB, score {result['score']:.4f}")


if __name__ == "__main__":
    main()
