"""The batched scoring loop shared by every method.

Every method reduces to the same computation: rows of token ids go through the transformer body; at chosen
(row, position) cells the hidden state is gathered; the LM head runs on those rows only; a float32
log-softmax gives the log-probability of the target token, which is summed into its sequence's score.

- ``clm``: each sequence without its last token, causal attention; position j-1 predicts token j. Sequences
  that share a beginning (minimal pairs do) share one row when the model allows it: the row holds the prefix
  tree of several sequences, each token once, with position ids = depth and a mask that lets a token see its
  own ancestors only (:func:`clm_tree_batches`), so the common prefix goes through the body once. Groups known
  to share a long beginning (``groups``: entity tracking's options) get one row each (:func:`clm_group_batches`);
  a model that continues a prefix's keys and values (BabyLlama) runs the beginnings that groups share once per
  batch and the groups' rows against them (``scoring/shared_bases.py``).
- ``pll``: one row per scored token, that token replaced by the mask token, bidirectional attention; the
  masked position predicts its own token. ``pll-word-l2r`` also masks the later tokens of the same word;
  ``mntp`` reads the prediction for token i at position i-1.

Rows are sorted by length (longest first, so a too-large budget fails at once) and packed so that
``rows x padded length <= batch_tokens``; the masked copies of many sentences share a batch, and the copies of
one long sentence are split over as many batches as the budget needs. Peak activation memory is therefore
bounded by the budget whatever a sentence's length (a single row longer than the budget forms its own batch).

This module runs the batches (:func:`run_batches`, sharded over a torch.distributed group) and picks the row
builders (:func:`score_seqs`); they live in ``rows`` (ScoringBatch, Ragged), ``clm_rows`` (plain and group rows, shared
head cells), ``prefix_tree``, ``shared_bases`` and ``masked_rows``, and their names stay importable from here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import chain

import numpy as np
import torch

from antlm_bench.errors import UserError
from antlm_bench.scoring.clm_rows import clm_batches, clm_group_batches, prefix_cells
from antlm_bench.scoring.encode import Seq
from antlm_bench.scoring.masked_rows import masked_batches
from antlm_bench.scoring.model import BIDIRECTIONAL, CAUSAL, ScoringModel
from antlm_bench.scoring.prefix_tree import (
    TREE_FOREST_CELLS,
    TREE_MAX_LENGTH,
    TREE_ROW_TOKENS,
    PrefixForest,
    clm_tree_batches,
)
from antlm_bench.scoring.rows import Ragged, ScoringBatch

ProgressFn = Callable[[float], None]  # called with the number of sequences (fractional) finished by a batch

# float32 logits the head produces at once: a block that stays in cache is about 2x faster than one big block
# on CPU, and it keeps a big vocabulary's footprint bounded
_HEAD_CHUNK_BYTES = 1 << 21
_HEAD_CHUNK_ROWS = (128, 4096)


def _pad_id(sm: ScoringModel) -> int:
    tok = sm.tokenizer
    for candidate in (tok.pad_token_id, tok.eos_token_id, 0):
        if candidate is not None:
            return int(candidate)
    return 0


def longest_input(seqs: list[Seq], method: str) -> int:
    """The most positions any of ``seqs`` puts through the model (clm drops the last token)."""
    drop = 1 if method == "clm" else 0
    return max((len(seq.ids) - drop for seq in seqs if len(seq.scored)), default=0)


def _check_lengths(sm: ScoringModel, seqs: list[Seq], drop_last: bool) -> None:
    """Refuse inputs beyond the configured positions only where the model cannot represent them: rotary and
    relative positions (BabyLlama, LTG-BERT, Llama-style models) compute any position, so such inputs are
    scored whole, as the official BabyLM pipeline does; a learned table (GPT-2, BERT, RoBERTa) ends."""
    limit = sm.max_length
    if limit is None or sm.extends_positions:
        return
    for seq in seqs:
        length = len(seq.ids) - (1 if drop_last else 0)
        if length > limit:
            text = sm.tokenizer.decode(seq.ids[:12].tolist())
            raise UserError(
                f"{sm.name}: a sequence of {length} tokens ({text!r}...) exceeds the model's {limit} learned "
                "positions (absolute position embeddings cannot go beyond them); use a model with more positions "
                "or with rotary / relative positions"
            )



def shard() -> tuple[int, int]:
    """(rank, world size) of the torch.distributed group scoring is sharded over; (0, 1) without one."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _sum_over_ranks(values: torch.Tensor, world: int) -> torch.Tensor:
    """Every rank's values added up: each value was computed by one rank and is 0.0 on the others, so the sum
    is that value exactly (x + 0.0 == x), and every rank ends with the numbers one process computes."""
    if world > 1:
        import torch.distributed as dist

        dist.all_reduce(values)
    return values


class _Reads:
    """Every batch's read values (on the device) and owning sequences, appended into buffers that double when full.

    A list of one small tensor and array per batch kept thousands of small live allocations interleaved with each
    batch's large temporaries on the C heap, which then could not give those back: PLL evaluation's resident memory
    grew by ~0.7 MB a batch on CPU (a tiny model over BLiMP: 1.8 GB at 100 items per paradigm, more with every
    item). A few buffers that grow by doubling leave the heap to the temporaries (benchmarks/eval_memory.py)."""

    def __init__(self, device: str | torch.device) -> None:
        self.values = torch.empty(0, dtype=torch.float64, device=device)
        self.owners = np.empty(0, dtype=np.int64)
        self.n = 0

    def add(self, values: torch.Tensor, owners: np.ndarray) -> None:
        end = self.n + len(owners)
        if end > len(self.owners):
            capacity = max(end, 2 * len(self.owners), 1024)
            grown = torch.empty(capacity, dtype=torch.float64, device=self.values.device)
            grown[:self.n] = self.values[:self.n]
            self.values = grown
            self.owners = np.concatenate([self.owners[:self.n], np.empty(capacity - self.n, dtype=np.int64)])
        self.values[self.n:end] = values
        self.owners[self.n:end] = owners
        self.n = end


def run_batches(sm: ScoringModel, batches: Iterator[ScoringBatch], n_seqs: int, mode: str,
                progress: ProgressFn | None = None, n_keys: int = 0) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Target log-probabilities of every batch: summed per sequence (float64), or, with ``n_keys`` (batches that
    carry shared-cell keys), one value per key, each computed at its first occurrence only.

    Sharded over a torch.distributed group (``torchrun``), every rank builds the same batches in the same order
    and runs those whose index is its rank modulo the world size; a shared cell is computed in the batch of its
    first occurrence, as in one process, and each sequence's sum is taken in batch order after the values are
    gathered. So every batch, and every number, is the one a single process computes.
    """
    device = sm.device
    rank, world = shard()
    key_values = np.zeros(n_keys, dtype=np.float64)
    known = np.zeros(n_keys, dtype=bool)
    reads_of = _Reads(device)  # per batch (no keys): its reads' log-probabilities, zeros if not ours, and owners
    vocab = int(getattr(sm.module.config, "vocab_size", 0) or 32768)
    chunk = min(max(_HEAD_CHUNK_BYTES // (4 * vocab), _HEAD_CHUNK_ROWS[0]), _HEAD_CHUNK_ROWS[1])
    with torch.inference_mode():
        for index, batch in enumerate(batches):
            mine = index % world == rank
            reads = slice(None)
            if batch.keys is not None:  # only cells no earlier read has computed, each once
                fresh = np.flatnonzero(~known[batch.keys])
                new_keys, first = np.unique(batch.keys[fresh], return_index=True)
                reads = fresh[first]
                if not len(reads) or not mine:  # known already, or another rank's: no forward pass here
                    known[new_keys] = True
                    if progress is not None:
                        progress(batch.progress)
                    continue
            elif not mine:
                reads_of.add(torch.zeros(len(batch.owners), dtype=torch.float64, device=device), batch.owners)
                if progress is not None:
                    progress(batch.progress)
                continue
            ids = torch.from_numpy(batch.input_ids).to(device, non_blocking=True)
            if batch.prefix_ids is not None:
                hidden = sm.prefix_hidden(torch.from_numpy(batch.prefix_ids).to(device),
                                          torch.from_numpy(batch.prefix_rows).to(device), ids,
                                          torch.from_numpy(batch.position_ids).to(device),
                                          torch.from_numpy(batch.tree_mask).to(device))
            elif batch.tree_mask is not None:
                hidden = sm.tree_hidden(ids, torch.from_numpy(batch.position_ids).to(device),
                                        torch.from_numpy(batch.tree_mask).to(device))
            else:
                mask = None if batch.attention_mask is None else torch.from_numpy(batch.attention_mask).to(device).long()
                hidden = sm.hidden(ids, mask, mode)
            rows = torch.from_numpy(batch.read_rows[reads]).to(device)
            cols = torch.from_numpy(batch.read_cols[reads]).to(device)
            targets = torch.from_numpy(batch.targets[reads]).to(device)
            selected = hidden[rows, cols]
            del hidden
            pieces = []
            for lo in range(0, selected.shape[0], chunk):
                logits = sm.head(selected[lo:lo + chunk])
                # float32 whatever the model's dtype, at least: a float64 model (the parity tests) keeps float64
                logits = logits if logits.dtype == torch.float64 else logits.float()
                logprobs = torch.log_softmax(logits, dim=-1)  # one fused kernel: faster here than logsumexp
                pieces.append(logprobs.gather(1, targets[lo:lo + chunk, None]).squeeze(1))
            target_logprobs = torch.cat(pieces) if len(pieces) > 1 else pieces[0]
            if batch.keys is not None:
                key_values[new_keys] = target_logprobs.double().cpu().numpy()
                known[new_keys] = True
            else:
                reads_of.add(target_logprobs.double(), batch.owners)
            if progress is not None:
                progress(batch.progress)
    if n_keys:
        gathered = _sum_over_ranks(torch.from_numpy(key_values).to(device), world)
        return gathered.cpu().numpy().astype(np.float64)
    if not reads_of.n:
        return np.zeros(n_seqs, dtype=np.float64)
    values = _sum_over_ranks(reads_of.values[:reads_of.n].contiguous(), world).cpu().numpy()
    # one ordered float64 sum per sequence (reads in batch order): the same with any number of ranks
    return np.bincount(reads_of.owners[:reads_of.n], weights=values, minlength=n_seqs)


def score_seqs(sm: ScoringModel, seqs: list[Seq], method: str, batch_tokens: int = 4096,
               progress: ProgressFn | None = None, groups: list[np.ndarray] | None = None) -> np.ndarray:
    """Summed natural-log scores of unique sequences under ``method``.

    ``groups`` (clm): sets of sequence indices known to share a long beginning (entity tracking: an item's five
    options after a ~300-token prefix); each group becomes one row, its common prefix computed once
    (:func:`clm_group_batches`). Other sequences go into the general prefix-tree rows."""
    if batch_tokens < 1:
        raise UserError(f"--batch-tokens {batch_tokens}: must be a positive number of tokens")
    mode = CAUSAL if method == "clm" else BIDIRECTIONAL
    sm.check_mode(mode, method)
    scores = np.zeros(len(seqs), dtype=np.float64)
    live = np.asarray([i for i, seq in enumerate(seqs) if len(seq.scored)], dtype=np.int64)
    if progress is not None and len(live) < len(seqs):
        progress(float(len(seqs) - len(live)))  # nothing to score in those: done at once
    if not len(live):
        return scores
    _check_lengths(sm, [seqs[i] for i in live], drop_last=method == "clm")
    lengths = np.asarray([len(seqs[i].ids) for i in live])
    order = live[np.argsort(-lengths, kind="stable")]
    pad = _pad_id(sm)
    if method == "clm":
        rag = Ragged.of(seqs)
        cells, n_cells = prefix_cells(rag)
        if sm.shares_prefixes:
            is_live = np.zeros(len(seqs), dtype=bool)
            is_live[live] = True
            grouped = [g[is_live[g]] for g in (np.asarray(g, dtype=np.int64) for g in groups or [])]
            grouped = [g for g in grouped if len(g)]
            rest = order[~np.isin(order, np.concatenate(grouped))] if grouped else order
            long = rag.lengths[rest] > TREE_MAX_LENGTH
            keep = bool(grouped) and sm.keeps_prefixes  # checked on first use only
            batches = chain(clm_group_batches(rag, grouped, batch_tokens, pad, cells, keep),
                            clm_batches(rag, rest[long], batch_tokens, pad, cells),
                            clm_tree_batches(rag, rest[~long], batch_tokens, pad, cells,
                                             forest_cells=TREE_FOREST_CELLS))
        else:
            batches = clm_batches(rag, order, batch_tokens, pad, cells)
        values = run_batches(sm, batches, len(seqs), mode, progress, n_keys=n_cells)
        owners = np.repeat(np.arange(len(seqs)), rag.n_scored)
        return _finite(sm, np.bincount(owners, weights=values[cells], minlength=len(seqs)), method)
    if method in ("pll", "pll-word-l2r", "mntp"):
        batches = masked_batches(seqs, order, batch_tokens, pad, int(sm.tokenizer.mask_token_id), method)
    else:
        raise UserError(f"--scoring {method}: unknown; use clm, pll, pll-word-l2r or mntp")
    return _finite(sm, run_batches(sm, batches, len(seqs), mode, progress), method)



def _finite(sm: ScoringModel, scores: np.ndarray, method: str) -> np.ndarray:
    """The summed scores, if every one is a number. One NaN or infinite log-probability makes its sum non-finite,
    so one vectorised test of the sums covers every token; a NaN compared with anything is False, and would be
    counted as a loss and end in a table as a plausible-looking accuracy."""
    bad = ~np.isfinite(scores)
    if bad.any():
        kind = "NaN" if np.isnan(scores[bad]).any() else "infinite"
        raise UserError(f"{sm.name}: {kind} log-probabilities ({int(bad.sum())} of {len(scores)} sequences scored "
                        f"with {method}); the weights are broken (a diverged or damaged checkpoint); score another "
                        "checkpoint")
    return scores


__all__ = [  # the row builders live in their own modules; their names stay importable from here
    "TREE_FOREST_CELLS", "TREE_MAX_LENGTH", "TREE_ROW_TOKENS", "ScoringBatch", "PrefixForest", "Ragged", "clm_batches",
    "clm_group_batches", "clm_tree_batches", "longest_input", "masked_batches", "prefix_cells", "run_batches",
    "score_seqs", "shard",
]
