"""Forward+backward throughput of the two backends against transformers' own models of the same size.

For each preset (tiny, small) and attention mode (causal, bidirectional) one training step (forward, loss over all
positions, backward) is timed on a batch of the preset's micro-batch x sequence length, and tokens/s are compared:

- BabyLlama vs ``transformers.LlamaForCausalLM`` (same config). Llama has no bidirectional mode, so both of our
  modes are compared with its causal step.
- LTG-BERT vs a transformers BERT with the same hidden size, layers, heads and vocabulary and an FFN of 1.5x the
  width, so that both have the same number of parameters (GEGLU has three FFN matrices, BERT's MLP two):
  ``BertForMaskedLM`` for bidirectional, ``BertLMHeadModel(is_decoder=True)`` for causal. A second bidirectional
  row compares with ``DebertaV2ForMaskedLM`` set up with LTG-BERT's attention (c2p + p2c over 32 log buckets,
  shared key projection, LayerNorm on the relative embedding): transformers' own model of the same attention.

- ``hf-gpt2`` / ``hf-roberta`` (architecture ``hf``) vs the stock ``GPT2LMHeadModel`` / ``RobertaForMaskedLM`` of the
  very same config: the same network, so this row measures only what antlm-bench adds (the hidden-states path,
  the 4-D mask in the non-native mode, the fused head and loss). The stock model keeps its own attention in both
  rows (it is the compute that is compared). Target for these rows: ratio >= 0.95.

Our step is the one the trainer runs (``return_logits=False``): the LM head's output projection fused with the
cross-entropy block by block (models/loss.py), so no [tokens, vocab] logits are built; the peers run their usual
``model(ids, labels=ids).loss``, which builds them.

Target: ratio (ours / transformers) >= 1. One run, same machine, same process; the two steps alternate and the
median step time counts, so both see the same load. On CUDA the step runs under bf16 autocast; on CPU always
float32 (bf16 on CPU is emulated and ~100x slower).

    python benchmarks/models.py [--presets tiny,small] [--seconds 3] [--device cpu|cuda] [--clock wall|cpu]

Recorded 2026-11-30, ``OMP_NUM_THREADS=1 python benchmarks/models.py --presets tiny,small --seconds 4 --clock
cpu`` (2-core AMD EPYC, shared). First two runs as is (glibc's default malloc), then one run with
``MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=8589934592``, where malloc keeps every freed block
(no step pays page faults for fresh memory; that isolates the arithmetic):

    backend    preset mode           peer                       default malloc   malloc keeps memory
    babyllama  tiny   causal / bidi  LlamaForCausalLM           1.36-1.38 / 1.33-1.40   1.05 / 1.05
    ltgbert    tiny   causal         BertLMHeadModel            1.00-1.28        1.00
    ltgbert    tiny   bidirectional  BertForMaskedLM            1.08-1.21        1.00
    ltgbert    tiny   bidirectional  DebertaV2ForMaskedLM       1.11-1.37        1.12
    babyllama  small  causal / bidi  LlamaForCausalLM           1.13-1.14 / 1.12-1.14   0.99 / 1.00
    ltgbert    small  causal         BertLMHeadModel            1.07-1.08        0.96
    ltgbert    small  bidirectional  BertForMaskedLM            1.07-1.08        0.96
    ltgbert    small  bidirectional  DebertaV2ForMaskedLM       1.13-1.15        1.02

Architecture ``hf``, recorded 2026-11-30, ``OMP_NUM_THREADS=1 python benchmarks/models.py --presets tiny,small
--recipes hf-gpt2,hf-roberta --seconds 4 --clock cpu`` (same machine, default malloc; 4 min 28 s), ratio ours /
stock (target >= 0.95):

    recipe      preset  causal  bidirectional  peer
    hf-gpt2     tiny    1.29    1.20           GPT2LMHeadModel (its causal attention in both rows)
    hf-roberta  tiny    1.02    1.02           RobertaForMaskedLM (its bidirectional attention in both rows)
    hf-gpt2     small   1.27    1.17           GPT2LMHeadModel
    hf-roberta  small   1.10    1.15           RobertaForMaskedLM

The network is the stock one; the margin is the fused head + loss (no [tokens, vocab] logits), smaller for
RoBERTa, whose head keeps a dense + LayerNorm before the projection. The 4-D mask of the non-native mode costs
GPT-2 a few percent (SDPA given a mask instead of is_causal).

With the default malloc a step that allocates a tensor above 32 MiB (the peers' logits: 128 MiB at the small
preset) gets it as fresh pages every time, ~130k page faults per step; ours peaks far lower (the fused head's
blocks are 8 MiB). That is most of the margin at the small preset, and the peers' tiny-preset figures swing with
malloc's state (their 16 MiB logits come from fresh pages or not). Without page faults the arithmetic is level
with Llama, and LTG-BERT is 4% behind BERT: it carries work its architecture asks for and BERT lacks (the c2p /
p2c position scores, NormFormer's extra LayerNorms, GEGLU's extra activations). Timed module by module at the
small preset without page faults, its attention layer takes ~15% longer than BERT's and its feed-forward ~4%;
its fused head and loss win back part of that.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from transformers import (
    BertConfig,
    BertForMaskedLM,
    BertLMHeadModel,
    DebertaV2Config,
    DebertaV2ForMaskedLM,
    LlamaForCausalLM,
)

from antlm_bench.models import build_model, hf
from antlm_bench.models.loss import lm_loss_sum
from antlm_bench.recipes import load_recipe

RECIPES = ("babyllama-clm-only", "ltgbert-mlm-only", "hf-gpt2", "hf-roberta")


def compare(ours: Callable[[], torch.Tensor], peer: Callable[[], torch.Tensor], device: str, seconds: float,
            tokens: int, clock: Callable[[], float] = time.perf_counter) -> tuple[float, float]:
    """Tokens per second of two training steps, timed alternately step by step (median of each).

    Alternating makes both see the same machine load, which matters on a shared machine.
    """
    def timed(step: Callable[[], torch.Tensor]) -> float:
        if device == "cuda":
            torch.cuda.synchronize()
        start = clock()
        step()
        if device == "cuda":
            torch.cuda.synchronize()
        return clock() - start

    for _ in range(2):  # warm-up: allocator, kernels, autograd graph caches
        timed(ours), timed(peer)
    ours_times: list[float] = []
    peer_times: list[float] = []
    deadline = time.perf_counter() + 2 * seconds
    while time.perf_counter() < deadline or len(ours_times) < 5:
        ours_times.append(timed(ours))
        peer_times.append(timed(peer))
    return tokens / statistics.median(ours_times), tokens / statistics.median(peer_times)


def make_step(model: torch.nn.Module, ids: torch.Tensor, device: str, **kwargs) -> Callable[[], torch.Tensor]:
    def step() -> torch.Tensor:
        model.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device == "cuda"):
            loss = model(ids, labels=ids, **kwargs).loss
        loss.backward()
        return loss

    return step


def _native(model: torch.nn.Module) -> str:
    masked = any(cls.__name__.endswith("ForMaskedLM") for cls in type(model).__mro__)
    return "bidirectional" if masked else "causal"


def make_hf_step(model: torch.nn.Module, ids: torch.Tensor, device: str, mode: str) -> Callable[[], torch.Tensor]:
    """The trainer's step for an ``hf`` model (objectives.sequence_loss_sum): hidden states in ``mode``, the head
    only through the fused projection + cross-entropy; every position labelled, as the peer's loss."""
    shift = int(mode == "causal")

    def step() -> torch.Tensor:
        model.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device == "cuda"):
            total, count = lm_loss_sum(model, model.hidden_states(ids, None, mode), ids, shift)
            loss = total / count
        loss.backward()
        return loss

    return step


def peers(recipe_name: str, preset_name: str) -> tuple[torch.nn.Module, list[tuple[str, torch.nn.Module]]]:
    """(our model, [(attention mode, transformers model to compare with)]) for one recipe and preset."""
    resolved = load_recipe(recipe_name).resolve(preset_name)
    recipe, preset = resolved.recipe, resolved.spec
    torch.manual_seed(0)
    ours = build_model(resolved)
    if recipe.architecture == "hf":
        torch.manual_seed(0)
        stock = hf.stock_class(ours.config)(ours.config)  # the very same config, the stock class
        return ours, [("causal", stock), ("bidirectional", stock)]
    if recipe.architecture == "babyllama":
        llama = LlamaForCausalLM(ours.config)  # the very same LlamaConfig
        llama.config._attn_implementation = "sdpa"
        return ours, [("causal", llama), ("bidirectional", llama)]
    config = BertConfig(
        vocab_size=preset.vocab_size, hidden_size=preset.hidden_size, num_hidden_layers=preset.n_layers,
        num_attention_heads=preset.n_heads, intermediate_size=preset.intermediate_size * 3 // 2,
        max_position_embeddings=preset.max_position_embeddings, hidden_dropout_prob=preset.dropout,
        attention_probs_dropout_prob=preset.dropout,
    )
    deberta = DebertaV2Config(
        vocab_size=preset.vocab_size, hidden_size=preset.hidden_size, num_hidden_layers=preset.n_layers,
        num_attention_heads=preset.n_heads, intermediate_size=preset.intermediate_size * 3 // 2,
        max_position_embeddings=preset.max_position_embeddings, relative_attention=True,
        position_buckets=preset.position_bucket_size, max_relative_positions=preset.max_position_embeddings,
        pos_att_type=["p2c", "c2p"], norm_rel_ebd="layer_norm", share_att_key=True, position_biased_input=False,
        type_vocab_size=0, hidden_dropout_prob=preset.dropout, attention_probs_dropout_prob=preset.dropout,
    )
    causal_bert = BertLMHeadModel(BertConfig(**config.to_dict() | {"is_decoder": True}))
    return ours, [("causal", causal_bert), ("bidirectional", BertForMaskedLM(config)),
                  ("bidirectional", DebertaV2ForMaskedLM(deberta))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", default="tiny,small")
    parser.add_argument("--recipes", default=",".join(RECIPES), help=f"any of {', '.join(RECIPES)}")
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds per model and measurement (both alternate)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                        help="cpu: this process's CPU time (steadier on a busy shared machine; use with 1 thread)")
    args = parser.parse_args()
    device = args.device
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    print(f"device {device}, torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"{'bf16 autocast' if device == 'cuda' else 'float32'}, {args.clock} clock")
    header = f"{'recipe':18} {'preset':6} {'mode':13} {'params':>8} {'peer params':>11} {'ours tok/s':>11} " \
             f"{'peer tok/s':>11} {'ratio':>6}  peer"
    print(header)
    print("-" * len(header))
    for preset_name in args.presets.split(","):
        for recipe_name in args.recipes.split(","):
            ours, theirs = peers(recipe_name, preset_name)
            preset = load_recipe(recipe_name).resolve(preset_name).spec
            generator = torch.Generator().manual_seed(0)
            ids = torch.randint(5, preset.vocab_size, (preset.micro_batch_size, preset.max_seq_len),
                                generator=generator).to(device)
            tokens = ids.numel()
            ours.to(device).train()
            for mode, peer in theirs:
                peer.to(device).train()
                if isinstance(ours, hf.HfLanguageModel):
                    ours_step = make_hf_step(ours, ids, device, mode)
                else:
                    ours_step = make_step(ours, ids, device, attention_mode=mode, return_logits=False)
                ours_rate, peer_rate = compare(ours_step, make_step(peer, ids, device), device, args.seconds, tokens,
                                               clock)
                n_ours = sum(p.numel() for p in ours.parameters())
                n_peer = sum(p.numel() for p in peer.parameters())
                print(f"{recipe_name:18} {preset_name:6} {mode:13} {n_ours / 1e6:7.2f}M {n_peer / 1e6:10.2f}M "
                      f"{ours_rate:11,.0f} {peer_rate:11,.0f} {ours_rate / peer_rate:6.2f}  {type(peer).__name__}"
                      + (" (its own attention)" if mode != _native(peer) else ""))
                peer.to("cpu")


if __name__ == "__main__":
    main()
