"""One face for every model the scorer sees: ``hidden(ids, mask, mode)`` and ``head(hidden_selected)``.

Scoring needs log-probabilities at a few positions only (PLL: one masked position per copy), so the engines
run the transformer body, pick the hidden states they need, and apply the LM head to those rows alone; the
full ``[batch x length x vocab]`` logits are never built. This module finds body and head:

- antlm-bench models (``config.antlm_architecture``) offer ``hidden_states(ids, mask, attention_mode)`` and
  ``lm_logits(hidden)`` and run in either attention mode;
- a plain Hugging Face causal LM (Llama, GPT-2, ...) runs its ``base_model`` (final norm included) and its
  output-embedding head (``lm_head``), causal only;
- a plain masked LM (BERT, RoBERTa, ...) runs its ``base_model`` and the child module that owns the output
  embedding (``cls`` / ``lm_head``: transform, norm, decoder), bidirectional only. Heads spread over several
  children have an explicit entry in ``heads._SPLIT_HEADS``. Logit soft-capping and scaling that a config declares
  (Gemma 2, Cohere, Granite) are applied after the head.

A Hugging Face model is checked once when wrapped: with the body's output replaced by large random hidden
states, the model's own logits must equal ``head(those states)``. A model whose forward does more than its head
module (logit soft-capping, scaling) fails the check and is scored through its full forward instead, which is
exact but builds full logits (noted in ``notes``).

Causal models may also take prefix-tree rows, ``tree_hidden(ids, position_ids, mask)``: checked once, on first
use, against the plain forward of the tree's sequences (``tree_mask_format``); a model that fails is scored one
sequence per row. An antlm-bench model with ``prefix_hidden_states`` (BabyLlama) may also continue prefixes'
keys and values, ``prefix_hidden(...)``: checked once the same way (``keeps_prefixes``).

Finding and checking a Hugging Face model's head is in ``heads.py``.
"""

from __future__ import annotations

import functools
import inspect
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from antlm_bench.data.readers import broken_json_message
from antlm_bench.errors import UserError, one_line
from antlm_bench.models.precision import cpu_bf16_instructions
from antlm_bench.progress import library_bars_off
from antlm_bench.scoring.heads import find_head, head_self_check, logits_close, with_config_transforms

CAUSAL, BIDIRECTIONAL = "causal", "bidirectional"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _is_antlm(model: nn.Module) -> bool:
    return hasattr(model, "hidden_states") and hasattr(model, "lm_logits")


def _is_masked_class(model: nn.Module) -> bool:
    return any(cls.__name__.endswith("ForMaskedLM") for cls in type(model).__mro__)


@dataclass
class ScoringModel:
    """A model plus tokenizer, seen as a transformer body and an LM head."""

    module: nn.Module
    tokenizer: Any
    kind: str  # "antlm" | "causal" | "masked"
    modes: tuple[str, ...]
    head_fn: Callable[[torch.Tensor], torch.Tensor] | None = None  # None: full-forward fallback
    notes: list[str] = field(default_factory=list)
    source: str = ""  # the checkpoint folder it came from, for errors that must name it

    @property
    def name(self) -> str:
        """The checkpoint, as an error message names it: its folder, else the model's own name or class."""
        return self.source or str(getattr(self.module, "name_or_path", "") or "") or type(self.module).__name__

    @property
    def device(self) -> torch.device:
        return next(self.module.parameters()).device

    @property
    def is_masked_lm(self) -> bool:
        """What ``--scoring auto`` assumes for a folder without a training record."""
        if self.kind == "antlm":
            from antlm_bench.models import masked_by_config  # the backend registry, plug-ins included

            return bool(masked_by_config(self.module.config))
        return self.kind == "masked"

    @property
    def max_length(self) -> int | None:
        config = self.module.config
        for name in ("max_position_embeddings", "n_positions", "max_seq_len", "seq_len"):
            value = getattr(config, name, None)
            if isinstance(value, int) and value > 0:
                return value
        return None

    @property
    def extends_positions(self) -> bool:
        """Whether positions beyond ``max_length`` are computed the same way as those within: rotary (Llama
        style, BabyLlama) or relative (LTG-BERT's log buckets) positions, or ALiBi. A learned absolute table
        (GPT-2, BERT, RoBERTa) has no entry there."""
        config = self.module.config
        if self.kind == "antlm" and getattr(config, "antlm_architecture", "") != "hf":
            return True  # an `hf` model (models/hf.py) has its stock positions: read its config as below
        if getattr(config, "alibi", False) or getattr(config, "model_type", "") in ("bloom", "mpt"):
            return True
        if getattr(config, "position_embedding_type", "absolute") not in ("absolute", None):
            return False  # BERT's relative_key variants index a table of 2 * max_positions - 1 distances
        rope = any(getattr(config, name, None) for name in ("rope_theta", "rope_parameters", "rotary_dim",
                                                              "rotary_pct", "rotary_emb_base"))
        return bool(rope)

    def check_mode(self, mode: str, method: str) -> None:
        if mode not in self.modes:
            what = "a causal LM" if self.kind == "causal" else "a masked LM"
            needs = "bidirectional attention (a masked LM or an antlm-bench checkpoint)" if mode == BIDIRECTIONAL \
                else "causal attention (a causal LM or an antlm-bench checkpoint)"
            raise UserError(
                f"--scoring {method} needs {needs}, but {type(self.module).__name__} is {what}; "
                f"use --scoring {'clm' if self.kind == 'causal' else 'pll'} or auto"
            )

    def hidden(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, mode: str) -> torch.Tensor:
        """Final hidden states [B, T, H] (after the final norm)."""
        if self.kind == "antlm":
            return self.module.hidden_states(input_ids, attention_mask=attention_mask, attention_mode=mode)
        if self.head_fn is None:  # fallback: the "hidden state" is the logits themselves
            return self.module(input_ids=input_ids, attention_mask=attention_mask).logits
        out = self.module.base_model(input_ids=input_ids, attention_mask=attention_mask, **self._body_kwargs)
        return out[0] if isinstance(out, tuple) else out.last_hidden_state

    @functools.cached_property
    def _body_kwargs(self) -> dict[str, Any]:
        """No key/value cache: scoring reads each batch once, and building a cache costs time at every call."""
        accepts = inspect.signature(self.module.base_model.forward).parameters
        return {"use_cache": False} if "use_cache" in accepts else {}

    @functools.cached_property
    def tree_mask_format(self) -> str | None:
        """How prefix-tree rows (position ids and a token-to-token mask) reach this model, or None if they cannot.

        Checked once on a small tree against the plain forward of its sequences: a model that ignores
        ``position_ids`` or a 4-D mask (or rejects them) fails and is scored one sequence per row. A boolean mask
        is tried first (SDPA runs it faster); Hugging Face's eager attention adds the mask, so it needs the
        additive form.
        """
        if CAUSAL not in self.modes or (self.kind != "antlm" and self.head_fn is None):
            return None
        for mask_format in ("bool",) if self.kind == "antlm" else ("bool", "additive"):
            if _tree_check(self, mask_format):
                return mask_format
        return None

    @property
    def shares_prefixes(self) -> bool:
        return self.tree_mask_format is not None

    @functools.cached_property
    def keeps_prefixes(self) -> bool:
        """Whether the model runs a prefix once and continuations against its keys and values
        (``prefix_hidden_states``, BabyLlama): checked once, on first use, against plain forwards."""
        if not (self.kind == "antlm" and CAUSAL in self.modes and hasattr(self.module, "prefix_hidden_states")):
            return False
        return _prefix_check(self)

    def prefix_hidden(self, prefix_ids: torch.Tensor, prefix_rows: torch.Tensor, input_ids: torch.Tensor,
                      position_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Final hidden states of prefixes [N, P] and of rows [B, T] that continue them (row b continues prefix
        ``prefix_rows[b]``; ``mask`` [B, T, P + T] is True where a row token may attend a prefix or row token),
        as one flat row [1, N * P + B * T, H]: the prefixes' positions, then the rows'."""
        prefix, rest = self.module.prefix_hidden_states(prefix_ids, input_ids, position_ids, mask, prefix_rows)
        return torch.cat((prefix.flatten(0, 1), rest.flatten(0, 1)))[None]

    def tree_hidden(self, input_ids: torch.Tensor, position_ids: torch.Tensor, mask: torch.Tensor,
                    mask_format: str | None = None) -> torch.Tensor:
        """Final hidden states of prefix-tree rows; ``mask`` [B, T, T] is True where token i may attend token j."""
        if self.kind == "antlm":
            return self.module.hidden_states(input_ids, attention_mask=mask[:, None], attention_mode=CAUSAL,
                                             position_ids=position_ids)
        mask = mask[:, None]
        if (mask_format or self.tree_mask_format) == "additive":
            dtype = next(self.module.parameters()).dtype
            mask = torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, torch.finfo(dtype).min)
        out = self.module.base_model(input_ids=input_ids, attention_mask=mask, position_ids=position_ids,
                                     **self._body_kwargs)
        return out[0] if isinstance(out, tuple) else out.last_hidden_state

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        """LM-head logits for the given hidden states only ([N, H] -> [N, V])."""
        if self.kind == "antlm":
            return self.module.lm_logits(hidden)
        if self.head_fn is None:
            return hidden
        return self.head_fn(hidden)


def _tree_check(sm: ScoringModel, mask_format: str) -> bool:
    """Two sequences sharing three tokens, as one tree row (plus a padded plain row), against separate forwards."""
    module = sm.module
    vocab = int(getattr(module.config, "vocab_size", 0) or 0)
    if vocab < 2:
        return False
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, vocab, (10,), generator=generator)
    first, second = tokens[:6], torch.cat([tokens[:3], tokens[6:]])  # second: 3 shared + 4 own tokens
    row = torch.stack([tokens, torch.cat([second, tokens[:3]])]).to(sm.device)  # row 1: `second`, 3 padding slots
    positions = torch.tensor([[0, 1, 2, 3, 4, 5, 3, 4, 5, 6], [0, 1, 2, 3, 4, 5, 6, 0, 0, 0]], device=sm.device)
    parents = [-1, 0, 1, 2, 3, 4, 2, 6, 7, 8]
    mask = torch.zeros(2, 10, 10, dtype=torch.bool)
    for i, parent in enumerate(parents):
        if parent >= 0:
            mask[0, i] = mask[0, parent]
        mask[0, i, i] = True
    mask[1] = torch.eye(10, dtype=torch.bool)
    mask[1, :7, :7] = torch.ones(7, 7, dtype=torch.bool).tril()
    dtype = next(module.parameters()).dtype
    try:
        with torch.inference_mode():
            tree = sm.tree_hidden(row, positions, mask.to(sm.device), mask_format).float()
            plain_first = sm.hidden(first[None].to(sm.device), None, CAUSAL).float()[0]
            plain_second = sm.hidden(second[None].to(sm.device), None, CAUSAL).float()[0]
    except Exception:  # noqa: BLE001  (a model that rejects the inputs is scored one sequence per row)
        return False
    return (logits_close(tree[0, :6], plain_first, dtype) and logits_close(tree[0, 6:], plain_second[3:], dtype)
            and logits_close(tree[1, :7], plain_second, dtype))


def _prefix_check(sm: ScoringModel) -> bool:
    """Two prefixes (5 tokens; 3 and padding) continued by three rows, against plain forwards of the whole
    sequences: row 0 continues prefix 0 by two tails, row 1 prefix 1 by one tail and padding, row 2 prefix 0."""
    vocab = int(getattr(sm.module.config, "vocab_size", 0) or 0)
    if vocab < 2:
        return False
    t = torch.randint(0, vocab, (18,), generator=torch.Generator().manual_seed(0))
    prefix = torch.stack([t[:5], torch.cat([t[5:8], t[:2]])])
    rows = torch.stack([t[8:13], torch.cat([t[13:16], t[:2]]), torch.cat([t[16:18], t[:3]])])
    positions = torch.tensor([[5, 6, 7, 5, 6], [3, 4, 5, 0, 0], [5, 6, 0, 0, 0]])
    mask = torch.zeros(3, 5, 10, dtype=torch.bool)
    mask[0, :, :5] = mask[2, :2, :5] = True
    mask[1, :3, :3] = True
    mask[0, :3, 5:8] = mask[1, :3, 5:8] = torch.ones(3, 3, dtype=torch.bool).tril()
    mask[0, 3:, 8:] = mask[2, :2, 5:7] = torch.ones(2, 2, dtype=torch.bool).tril()
    mask[1, 3:, 8:] = torch.eye(2, dtype=torch.bool)
    mask[2, 2:, 7:] = torch.eye(3, dtype=torch.bool)
    wholes = [torch.cat([t[:5], t[8:11]]), torch.cat([t[:5], t[11:13]]), torch.cat([t[5:8], t[13:16]]),
              torch.cat([t[:5], t[16:18]])]
    dtype = next(sm.module.parameters()).dtype
    device = sm.device
    try:
        with torch.inference_mode():
            got = sm.prefix_hidden(prefix.to(device), torch.tensor([0, 1, 0], device=device), rows.to(device),
                                   positions.to(device), mask.to(device))[0].float()
            plain = [sm.hidden(w[None].to(device), None, CAUSAL).float()[0] for w in wholes]
    except Exception:  # noqa: BLE001  (a model that rejects the inputs keeps the prefix-tree rows)
        return False
    return (logits_close(got[:5], plain[0][:5], dtype) and logits_close(got[10:13], plain[0][5:], dtype)
            and logits_close(got[13:15], plain[1][5:], dtype) and logits_close(got[5:8], plain[2][:3], dtype)
            and logits_close(got[15:18], plain[2][3:], dtype) and logits_close(got[20:22], plain[3][5:], dtype))


_WRAPPED: weakref.WeakKeyDictionary[nn.Module, ScoringModel] = weakref.WeakKeyDictionary()


def wrap_model(model: nn.Module, tokenizer: Any) -> ScoringModel:
    """Wrap an already loaded model (ours or a plain Hugging Face LM) for scoring; cached per model object."""
    cached = _WRAPPED.get(model)
    if cached is not None and cached.tokenizer is tokenizer:
        return cached
    if _is_antlm(model):
        sm = ScoringModel(model, tokenizer, "antlm", (CAUSAL, BIDIRECTIONAL), head_fn=None)
    else:
        if getattr(model.config, "is_encoder_decoder", False):
            raise UserError(f"{type(model).__name__} is an encoder-decoder model; give a causal or masked LM")
        masked = _is_masked_class(model)
        sm = ScoringModel(model, tokenizer, "masked" if masked else "causal", (BIDIRECTIONAL,) if masked else (CAUSAL,))
        found = find_head(model)
        sm.head_fn = None if found is None else with_config_transforms(model, found[0])
        if found is None or not head_self_check(sm, found[1]):
            sm.head_fn = None
            sm.notes.append(
                f"{type(model).__name__}: LM head not separable from the forward pass; scored with full logits "
                "(exact, but memory grows with the vocabulary)"
            )
    model.eval()
    _WRAPPED[model] = sm
    return sm


def resolve_device_dtype(device: str, dtype: str) -> tuple[torch.device, torch.dtype]:
    """Check --device and --dtype; on CPU bfloat16 only where the CPU multiplies it natively (elsewhere it is
    emulated, 17x slower on an AVX2-only CPU, docs/precision.md) and float16 never."""
    if dtype not in DTYPES:
        raise UserError(f"--dtype {dtype}: unknown; use one of {', '.join(DTYPES)}")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"--device {device}: no CUDA device is visible here; use --device cpu")
    if not (device == "cpu" or device.startswith("cuda") or device == "mps"):
        raise UserError(f"--device {device}: unknown; use cpu or cuda")
    if device == "cpu" and dtype == "bfloat16" and not cpu_bf16_instructions():
        raise UserError("--dtype bfloat16: this CPU has no native bf16 (avx512_bf16 / amx_bf16), so it would run "
                        "many times slower than float32 (17x measured on an AVX2-only CPU); use --dtype float32 on cpu")
    if device == "cpu" and dtype == "float16":
        raise UserError("--dtype float16 on cpu is far slower than float32; use --dtype float32 (or bfloat16 on a "
                        "CPU with native bf16)")
    return torch.device(device), DTYPES[dtype]


def load_tokenizer_from(path: Path) -> Any:
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(path))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        broken = broken_json_message(path)  # the tokenizer loader reads config.json too: name the file that is broken
        if broken is not None:
            raise UserError(broken) from None
        raise UserError(f"{path}: no usable tokenizer ({one_line(err, 160)}); "
                        "save the tokenizer into the model folder") from None


def load_hf_model(path: Path, device: torch.device, dtype: torch.dtype) -> nn.Module:
    """Our loader when it exists (it knows our architectures), else a transformers Auto class by config."""
    try:
        from antlm_bench.models import load_model  # type: ignore[attr-defined]
    except ImportError:
        load_model = None
    if load_model is not None:
        return load_model(path, device=str(device), dtype=dtype)
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM

    try:
        config = AutoConfig.from_pretrained(str(path))
    except (OSError, ValueError, KeyError) as err:
        raise UserError(f"{path}: not a loadable model config ({one_line(err, 160)})") from None
    architectures = " ".join(getattr(config, "architectures", None) or [])
    auto = AutoModelForMaskedLM if "MaskedLM" in architectures else AutoModelForCausalLM
    try:
        model = auto.from_pretrained(str(path), dtype=dtype)
    except (OSError, ValueError) as err:
        raise UserError(f"{path}: the weights cannot be loaded ({one_line(err, 160)})") from None
    return model.to(device)


def load_scoring_model(path: str | Path, device: str = "cpu", dtype: str = "float32") -> ScoringModel:
    """Load a checkpoint folder (ours or any Hugging Face causal / masked LM) for scoring."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise UserError(f"--model {folder}: not a folder; give a Hugging Face model folder (config.json + weights)")
    if not (folder / "config.json").is_file():
        raise UserError(f"--model {folder}: no config.json; is this a Hugging Face model folder?")
    torch_device, torch_dtype = resolve_device_dtype(device, dtype)
    from antlm_bench.models import load_config

    load_config(folder)  # the tokenizer reads config.json too: a wrong-typed field is named here, not in a traceback
    with library_bars_off():  # a "Loading weights" bar per load would bury our own progress line
        tokenizer = load_tokenizer_from(folder)
        model = load_hf_model(folder, torch_device, torch_dtype)
    from transformers import PreTrainedModel

    embeddings = model.get_input_embeddings() if isinstance(model, PreTrainedModel) else None
    rows = getattr(embeddings, "num_embeddings", None)
    if isinstance(rows, int) and len(tokenizer) > rows:  # an id past the table would be an IndexError mid-scoring
        raise UserError(f"--model {folder}: the tokenizer has {len(tokenizer)} tokens but the model's embedding "
                        f"only {rows} rows, so token ids {rows}..{len(tokenizer) - 1} have no embedding; the "
                        "tokenizer and the weights are of two models: save the matching tokenizer into the folder")
    sm = wrap_model(model, tokenizer)
    sm.source = str(folder)
    return sm
