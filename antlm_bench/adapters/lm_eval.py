"""lm-eval plug-in: the model type ``antlm`` runs lm-eval's loglikelihood tasks through antlm-bench's scorer.

    antlm-lm-eval --model antlm --model_args pretrained=CKPT,scoring=auto --tasks blimp_adjunct_island
    python -m antlm_bench.adapters.lm_eval --model antlm ...          (the same command)

Why a wrapper command and not ``lm_eval`` itself: lm-eval 0.4.13 resolves ``--model`` against its own
registry before any user code runs; it reads no entry-point group for models, and ``--include_path`` only
indexes task YAML files (their ``!function`` hooks are imported after the model is built). The wrapper imports
this module, which registers ``antlm``, and then hands the command line, unchanged, to lm-eval's own CLI; every
lm-eval option works. From Python, ``import antlm_bench.adapters.lm_eval`` and pass ``model="antlm"`` to
``lm_eval.simple_evaluate``.

What the model computes (the numbers are antlm-bench's scorer's, ``antlm_bench.scoring``):

- ``loglikelihood((context, continuation))``: lm-eval's split (trailing spaces of the context move to the
  continuation; ``context + continuation`` is tokenized whole and the first ``len(tokenize(context))`` tokens
  are context), then
  * ``clm``: sum of ln p(continuation token | everything before it), the sequence prefixed with BOS (else EOS)
    as lm-eval's ``hf`` model does with an empty context, or with ``add_bos_token=True`` otherwise;
  * ``pll`` / ``pll-word-l2r`` / ``mntp`` (masked models, which lm-eval's ``hf`` model refuses): the
    pseudo-log-likelihood of the continuation tokens inside ``context + continuation`` (special tokens present,
    context tokens unmasked and unscored);
  ``is_greedy``: every scored token is the argmax at its position (a second pass, argmax only).
- ``loglikelihood_rolling(text)``: ``clm``: lm-eval's disjoint rolling windows, BOS first; PLL family: the
  PLL of the whole text (it must fit the model's positions).
- ``generate_until``: not supported (these are scoring models).

``scoring=auto`` picks the method of the checkpoint's last training phase (``antlm_state.json``), else ``clm``
for causal and ``pll`` for masked models. Other model arguments: ``device`` (cpu, cuda), ``dtype`` (float32,
bfloat16 on cuda), ``batch_tokens`` (token budget per forward pass, default 4096).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

# lm-eval fills its registry of built-in models lazily, and only while the registry is empty: import it first,
# or registering "antlm" would hide "hf" and the others
import lm_eval.models  # noqa: F401  isort: skip
from lm_eval.api.model import LM
from lm_eval.api.registry import model_registry

from antlm_bench.errors import EnvironmentFailure, UserError
from antlm_bench.runs.record import read_record, scoring_method
from antlm_bench.scoring import check_method, load_scoring_model
from antlm_bench.scoring.encode import Seq, dedupe, encode, prefix_token_id
from antlm_bench.scoring.engine import score_seqs
from antlm_bench.scoring.model import BIDIRECTIONAL, CAUSAL, ScoringModel

logger = logging.getLogger(__name__)
MODEL_NAME = "antlm"
_DEFAULT_MAX_LENGTH = 2048
_ARGMAX_CHUNK_ROWS = 1024


class AntLMEvalModel(LM):
    """lm-eval model backed by antlm-bench's scoring engine (clm, pll, pll-word-l2r, mntp)."""

    def __init__(
        self,
        pretrained: str,
        scoring: str = "auto",
        device: str | None = "cpu",
        dtype: str = "float32",
        batch_tokens: int = 4096,
        batch_size: Any = None,  # lm-eval passes these; the token budget is what bounds memory here
        max_batch_size: Any = None,
        **unused: Any,
    ) -> None:
        super().__init__()
        if unused:
            logger.warning("antlm: ignoring model_args %s", ", ".join(sorted(unused)))
        try:  # checked before the model loads: lm-eval passes model_args as text ("abc" -> a ValueError deep in)
            budget = int(str(batch_tokens))
        except ValueError:
            budget = 0
        if budget < 1:
            raise UserError(f"--batch-tokens {batch_tokens}: must be a positive number of tokens (--model_args "
                            f"batch_tokens={batch_tokens}; e.g. batch_tokens=4096)")
        device = str(device or "cpu")
        if device.startswith("cuda") and not torch.cuda.is_available():
            # lm-eval's command line defaults to cuda:0; like its hf model, run on the CPU when there is no GPU
            logger.warning("antlm: %s requested but no CUDA device is visible; using cpu", device)
            device = "cpu"
        self.sm: ScoringModel = load_scoring_model(str(pretrained), device=device, dtype=str(dtype))
        if scoring == "auto":
            self.method, why = scoring_method(read_record(pretrained), self.sm.is_masked_lm)
            logger.info("antlm: %s", why)
        else:
            self.method = check_method(str(scoring))
        self.batch_tokens = budget
        self.pretrained = str(pretrained)
        # fail now, not after lm-eval has built every request, when the method does not fit the model
        self.sm.check_mode(self._mode, self.method)

    @property
    def _mode(self) -> str:
        return attention_mode(self.method)

    @property
    def tokenizer_name(self) -> str:
        return getattr(self.sm.tokenizer, "name_or_path", "antlm").replace("/", "__")

    def get_model_info(self) -> dict:
        return {"antlm_pretrained": self.pretrained, "antlm_scoring": self.method}

    # -- encoding -------------------------------------------------------------------------------------------

    @property
    def max_length(self) -> int:
        return self.sm.max_length or _DEFAULT_MAX_LENGTH

    def _encode_pair(self, context: str, continuation: str) -> Seq:
        """lm-eval's split of a request, on the scorer's encoding of ``context + continuation``."""
        n_spaces = len(context) - len(context.rstrip())
        if n_spaces:
            context, continuation = context[:-n_spaces], context[-n_spaces:] + continuation
        whole = context + continuation
        (seq,) = encode(self.sm.tokenizer, [(None, whole)], self.method)
        if not context:
            return seq
        tokenizer = self.sm.tokenizer
        n_context = len(tokenizer(context, add_special_tokens=False)["input_ids"])
        if self.method == "clm":
            # scored positions index the prefixed sequence: shift by the prefix the encoder added (0 or 1)
            n_plain = len(tokenizer(whole, add_special_tokens=False)["input_ids"])
            seq.scored = seq.scored[seq.scored >= n_context + len(seq.ids) - n_plain]
            return self._truncate_left(seq)
        seq.scored = seq.scored[n_context:]  # the k-th non-special token of the whole text
        return seq

    def _truncate_left(self, seq: Seq) -> Seq:
        """As lm-eval: a clm input longer than the model keeps its last ``max_length + 1`` tokens."""
        excess = len(seq.ids) - 1 - self.max_length
        if excess <= 0:
            return seq
        if len(seq.scored) and seq.scored[0] - excess < 1:
            raise UserError(f"a continuation of {len(seq.scored)} tokens does not fit the model's "
                            f"{self.max_length} positions")
        return Seq(seq.ids[excess:], seq.scored - excess)

    # -- lm-eval's interface --------------------------------------------------------------------------------

    def loglikelihood(self, requests: Sequence[Any], disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        seqs = [self._encode_pair(*request.args) for request in requests]
        unique, index = dedupe(seqs)
        scores = score_seqs(self.sm, unique, self.method, self.batch_tokens)
        greedy = self._greedy(unique)
        results = [(float(scores[i]), bool(greedy[i])) for i in index]
        for request, result in zip(requests, results):
            self.cache_hook.add_partial("loglikelihood", request.args, result)
        return results

    def loglikelihood_rolling(self, requests: Sequence[Any], disable_tqdm: bool = False) -> list[float]:
        from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

        seqs: list[Seq] = []
        owners: list[int] = []
        for r, request in enumerate(requests):
            (text,) = request.args[:1]
            if self.method == "clm":
                tokens = self.sm.tokenizer(text, add_special_tokens=False)["input_ids"]
                windows = get_rolling_token_windows(tokens, prefix_token_id(self.sm.tokenizer), self.max_length, 1)
                for context, continuation in map(make_disjoint_window, windows):
                    ids = np.asarray([*context, *continuation], dtype=np.int64)
                    seqs.append(Seq(ids, np.arange(len(context), len(ids), dtype=np.int64)))
                    owners.append(r)
            else:
                (seq,) = encode(self.sm.tokenizer, [(None, text)], self.method)
                seqs.append(seq)
                owners.append(r)
        unique, index = dedupe(seqs)
        per_window = score_seqs(self.sm, unique, self.method, self.batch_tokens)[index]
        totals = np.zeros(len(requests))
        np.add.at(totals, np.asarray(owners, dtype=np.int64), per_window)
        results = [float(t) for t in totals]
        for request, result in zip(requests, results):
            self.cache_hook.add_partial("loglikelihood_rolling", request.args, result)
        return results

    def generate_until(self, requests: Sequence[Any], disable_tqdm: bool = False) -> list[str]:
        raise NotImplementedError(
            "antlm scores text (loglikelihood, loglikelihood_rolling); it does not generate. Choose lm-eval tasks "
            "with output_type multiple_choice, loglikelihood or loglikelihood_rolling, or use --model hf to generate."
        )

    # -- is_greedy --------------------------------------------------------------------------------------------

    def _greedy(self, seqs: list[Seq]) -> np.ndarray:
        """Whether every scored token is the model's argmax where the method reads it (:func:`greedy_flags`)."""
        return greedy_flags(self.sm, seqs, self.method, self.batch_tokens)


def attention_mode(method: str) -> str:
    """The attention a scoring method runs the model with: causal for clm, bidirectional for the PLL family."""
    return CAUSAL if method == "clm" else BIDIRECTIONAL


def greedy_flags(sm: ScoringModel, seqs: list[Seq], method: str, batch_tokens: int) -> np.ndarray:
    """Whether every scored token is the model's argmax where the method reads it (argmax only, no softmax).

    The rows are those the scorer builds (docs/design.md): clm reads token j at position j-1 of the unmasked
    sequence; pll masks token j (pll-word-l2r also the later tokens of its word) and reads it at j; mntp
    masks it and reads it at j-1.
    """
    tokenizer = sm.tokenizer
    mode = attention_mode(method)
    rows: list[np.ndarray] = []
    reads: list[tuple[int, int, int, int]] = []  # (row, column, target, sequence)
    for owner, seq in enumerate(seqs):
        if method == "clm":
            if len(seq.scored):
                rows.append(seq.ids[:-1])
                reads.extend((len(rows) - 1, int(j) - 1, int(seq.ids[j]), owner) for j in seq.scored)
            continue
        for k, j in enumerate(seq.scored):
            ids = seq.ids.copy()
            ids[j] = tokenizer.mask_token_id
            if method == "pll-word-l2r" and seq.word_ids is not None and seq.word_ids[j] >= 0:
                later = seq.scored[k + 1:]
                ids[later[seq.word_ids[later] == seq.word_ids[j]]] = tokenizer.mask_token_id
            rows.append(ids)
            reads.append((len(rows) - 1, int(j) - (1 if method == "mntp" else 0), int(seq.ids[j]), owner))
    greedy = np.ones(len(seqs), dtype=bool)
    if not rows:
        return greedy
    read_array = np.asarray(reads, dtype=np.int64)
    pad = next((int(t) for t in (tokenizer.pad_token_id, tokenizer.eos_token_id) if t is not None), 0)
    order = np.argsort([-len(r) for r in rows], kind="stable")
    # reads were appended row by row: those of row r are read_array[first[r]:first[r + 1]]
    first = np.searchsorted(read_array[:, 0], np.arange(len(rows) + 1))
    hits = np.zeros(len(reads), dtype=bool)
    start = 0
    with torch.inference_mode():
        while start < len(order):
            width = len(rows[order[start]])
            members = order[start:start + max(1, batch_tokens // width)]
            start += len(members)
            ids = np.full((len(members), width), pad, dtype=np.int64)
            mask = np.zeros((len(members), width), dtype=np.int64)
            for r, m in enumerate(members):
                ids[r, :len(rows[m])], mask[r, :len(rows[m])] = rows[m], 1
            hidden = sm.hidden(torch.from_numpy(ids).to(sm.device),
                               None if mask.all() else torch.from_numpy(mask).to(sm.device), mode)
            which = np.concatenate([np.arange(first[m], first[m + 1]) for m in members])
            counts = first[members + 1] - first[members]
            batch_rows = torch.from_numpy(np.repeat(np.arange(len(members)), counts)).to(sm.device)
            selected = hidden[batch_rows, torch.from_numpy(read_array[which, 1]).to(sm.device)]
            predicted = torch.cat([sm.head(selected[lo:lo + _ARGMAX_CHUNK_ROWS]).argmax(-1)
                                   for lo in range(0, selected.shape[0], _ARGMAX_CHUNK_ROWS)])
            hits[which] = predicted.cpu().numpy() == read_array[which, 2]
    np.logical_and.at(greedy, read_array[:, 3], hits)
    return greedy


def register() -> None:
    """Register ``antlm`` with lm-eval's model registry (idempotent)."""
    if MODEL_NAME not in model_registry:
        model_registry.register(MODEL_NAME)(AntLMEvalModel)


register()


def cli_evaluate(argv: Sequence[str] | None = None) -> None:
    """``antlm-lm-eval``: lm-eval's own command line, with ``--model antlm`` available."""
    from lm_eval.__main__ import cli_evaluate as lm_eval_cli

    if argv is not None:
        sys.argv = [sys.argv[0], *argv]
    try:
        lm_eval_cli()
    except (UserError, EnvironmentFailure) as err:  # ours: one line, as every antlm-bench command says it
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(err.exit_code) from None


if __name__ == "__main__":
    from antlm_bench.adapters.lm_eval import (
        cli_evaluate as _cli,  # the registered module, not this __main__ copy
    )

    _cli()
