"""The BPE tokenizer both objectives share: byte-level BPE from the ``tokenizers`` library.

Special tokens: ``<pad>`` (0), ``<s>`` (1, BOS), ``</s>`` (2, EOS), ``<unk>`` (3), ``<mask>`` (4). Saved as a
transformers fast tokenizer (``tokenizer.json`` + ``tokenizer_config.json``), so ``AutoTokenizer.from_pretrained``
loads it and ``word_ids()`` works (a word is a pre-token of the GPT-2 split: `` cat``, ``'s``, ``.``).

Conventions the trainer, the scorer and the GLUE fine-tuner share:
- Text is tokenized as given: no prefix space is added, so ``"The cat"`` -> ``The``, `` cat``.
- ``add_special_tokens=True`` (the transformers default) wraps a text as ``<s> text </s>`` (pairs:
  ``<s> a </s> b </s>``). The corpus is packed the same way, one ``<s> line </s>`` after another, so the model sees
  ``<s>`` before every text in training: CLM scoring prepends ``<s>``; PLL scoring uses the template as is and
  never scores the two specials. Pass ``add_special_tokens=False`` for the bare tokens.
- The tokenizer's normaliser repeats the corpus cleaning that applies to single strings (NFKC, ASCII quotes and dashes),
  so evaluation text is normalised the way the training text was.

A folder is written by :func:`save_tokenizer`, which names the class every transformers version knows
(``PreTrainedTokenizerFast``): transformers 5 writes ``TokenizersBackend``, which 4.x cannot load.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from antlm_bench.data.files import atomic_write_bytes
from antlm_bench.data.readers import broken_json_message
from antlm_bench.errors import UserError, one_line

PAD, BOS, EOS, UNK, MASK = "<pad>", "<s>", "</s>", "<unk>", "<mask>"
SPECIAL_TOKENS = [PAD, BOS, EOS, UNK, MASK]  # ids 0..4 in this order

# punctuation that NFKC leaves alone, mapped to ASCII (corpus.clean_line applies the same table): curly quotes and
# primes to straight quotes, hyphen and en-dash variants to "-", em-dash and bar to "--" (Gutenberg's ASCII habit),
# zero-width characters removed
PUNCTUATION_MAP = {
    "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'",
    "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"',
    "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "--", "\u2015": "--",
    "\u200b": "", "\u200c": "", "\u200d": "", "\ufeff": "",
}


def _normalizer(lowercase: bool) -> normalizers.Normalizer:
    steps: list[normalizers.Normalizer] = [normalizers.NFKC()]
    steps += [normalizers.Replace(fancy, plain) for fancy, plain in PUNCTUATION_MAP.items()]
    if lowercase:
        steps.append(normalizers.Lowercase())
    return normalizers.Sequence(steps)


def train_tokenizer(
    texts: Iterable[str],
    vocab_size: int,
    min_frequency: int = 2,
    lowercase: bool = False,
    model_max_length: int = 512,
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on ``texts`` (deterministic: the same texts give the same tokenizer)."""
    if vocab_size <= len(SPECIAL_TOKENS) + 256:
        raise UserError(f"vocab_size {vocab_size} is too small: byte-level BPE needs more than 261 tokens")
    backend = Tokenizer(models.BPE(unk_token=UNK))
    backend.normalizer = _normalizer(lowercase)
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    backend.train_from_iterator(texts, trainer)
    bos, eos = backend.token_to_id(BOS), backend.token_to_id(EOS)
    backend.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A {EOS}", pair=f"{BOS} $A {EOS} $B:1 {EOS}:1", special_tokens=[(BOS, bos), (EOS, eos)]
    )
    return wrap(backend, model_max_length)


def wrap(backend: Tokenizer, model_max_length: int = 512) -> PreTrainedTokenizerFast:
    """A transformers fast tokenizer around a ``tokenizers`` object, with our special tokens named."""
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token=BOS, eos_token=EOS, pad_token=PAD, unk_token=UNK, mask_token=MASK,
        clean_up_tokenization_spaces=False, model_max_length=model_max_length,
    )


# transformers 5 saves its fast tokenizer under the class name TokenizersBackend, which transformers 4.x does not
# know ("Tokenizer class TokenizersBackend does not exist"); PreTrainedTokenizerFast, the name 4.x gave the same
# class, loads in both (5 maps it back to TokenizersBackend): an evaluation set-up pinned to 4.x loads our folders
PORTABLE_TOKENIZER_CLASS = "PreTrainedTokenizerFast"
VERSION_5_ONLY_CLASS = "TokenizersBackend"


def save_tokenizer(tokenizer: PreTrainedTokenizerFast, folder: str | Path) -> None:
    """``tokenizer.save_pretrained(folder)``, its tokenizer_config.json naming a class transformers 4.x and 5 both
    load (see :data:`PORTABLE_TOKENIZER_CLASS`)."""
    tokenizer.save_pretrained(str(folder))
    path = Path(folder) / "tokenizer_config.json"
    settings = json.loads(path.read_text(encoding="utf-8"))
    if settings.get("tokenizer_class") == VERSION_5_ONLY_CLASS:
        settings["tokenizer_class"] = PORTABLE_TOKENIZER_CLASS
        atomic_write_bytes(path, (json.dumps(settings, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
                           .encode("utf-8"))


def load_tokenizer(path: str | Path) -> PreTrainedTokenizerFast:
    """Load a saved tokenizer folder (ours or any transformers fast tokenizer)."""
    path = Path(path)
    if not (path / "tokenizer.json").is_file() and not (path / "tokenizer_config.json").is_file():
        raise UserError(f"{path}: no tokenizer.json; pass a checkpoint or tokenizer folder")
    try:
        return AutoTokenizer.from_pretrained(str(path))
    except (OSError, ValueError) as err:
        broken = broken_json_message(path)  # name the broken file (config.json is read too), not the tokenizer
        if broken is not None:
            raise UserError(broken) from None
        raise UserError(f"{path}: cannot load the tokenizer ({one_line(err, 160)})") from None


def tokenizer_hash(tokenizer: PreTrainedTokenizerFast) -> str:
    """sha256 of the tokenizer's full serialisation (normaliser, vocabulary, merges, template)."""
    return hashlib.sha256(tokenizer.backend_tokenizer.to_str().encode("utf-8")).hexdigest()


__all__ = ["PORTABLE_TOKENIZER_CLASS", "PUNCTUATION_MAP", "SPECIAL_TOKENS", "load_tokenizer", "save_tokenizer",
           "tokenizer_hash", "train_tokenizer", "wrap"]
