"""Both backends: attention modes, losses, save/load, Llama equivalence, LTG-BERT math, parameter counts."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from antlm_bench.models import (
    babyllama,
    build_model,
    count_parameters,
    is_masked_lm,
    load_model,
    ltgbert,
)
from antlm_bench.models.ltgbert import make_log_bucket_position, relative_position_indices
from antlm_bench.recipes import load_recipe

VOCAB = 61
SPECIALS = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0, "mask_token_id": 4}


def tiny(architecture: str, tie: bool = True, n_heads: int = 4, seed: int = 0, dropout: float = 0.0):
    torch.manual_seed(seed)
    shape = dict(vocab_size=VOCAB, hidden_size=32, n_layers=2, n_heads=n_heads, intermediate_size=48,
                 max_position_embeddings=64, tie_word_embeddings=tie, dropout=dropout, **SPECIALS)
    if architecture == "babyllama":
        model = babyllama.BabyLlamaForCausalLM(babyllama.make_config(**shape))
    else:
        model = ltgbert.LtgBertForMaskedLM(ltgbert.make_config(position_bucket_size=8, **shape))
    return model.eval()


def batch(seed: int = 1, size: tuple[int, int] = (3, 12)) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(5, VOCAB, size, generator=generator)


ARCHS = ["babyllama", "ltgbert"]


@pytest.mark.parametrize("architecture", ARCHS)
@pytest.mark.parametrize("padded", [False, True])
def test_causal_mode_does_not_see_the_future_and_bidirectional_does(architecture, padded):
    model = tiny(architecture)
    ids = batch()
    mask = None
    if padded:
        mask = torch.ones_like(ids)
        mask[0, 10:] = 0  # right padding in row 0
    j = 6
    changed = ids.clone()
    changed[:, j] = (changed[:, j] + 7 - 5) % (VOCAB - 5) + 5
    with torch.no_grad():
        causal_a = model.hidden_states(ids, mask, "causal")
        causal_b = model.hidden_states(changed, mask, "causal")
        bidi_a = model.hidden_states(ids, mask, "bidirectional")
        bidi_b = model.hidden_states(changed, mask, "bidirectional")
    assert torch.equal(causal_a[:, :j], causal_b[:, :j]), "a causal position saw a later token"
    assert (causal_a[:, j:] - causal_b[:, j:]).abs().amax() > 1e-4  # position j and later do see it
    assert (bidi_a[:, :j] - bidi_b[:, :j]).abs().amax(dim=-1).min() > 1e-6  # every earlier position sees it


@pytest.mark.parametrize("architecture", ARCHS)
def test_padding_keys_are_invisible(architecture):
    model = tiny(architecture)
    ids = batch(size=(2, 10))
    mask = torch.ones_like(ids)
    mask[:, 7:] = 0
    other = ids.clone()
    other[:, 7:] = 9  # different padding content
    for mode in ("causal", "bidirectional"):
        with torch.no_grad():
            a = model.hidden_states(ids, mask, mode)[:, :7]
            b = model.hidden_states(other, mask, mode)[:, :7]
            short = model.hidden_states(ids[:, :7], None, mode)
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(a, short, atol=1e-5, rtol=1e-5)
    assert torch.isfinite(model.hidden_states(ids.flip(1), mask.flip(1), "causal")).all()  # left padding


@pytest.mark.parametrize("architecture", ARCHS)
def test_losses_shift_in_causal_mode_only_and_use_labelled_positions(architecture):
    model = tiny(architecture)
    ids = batch()
    labels = ids.clone()
    labels[:, ::3] = -100
    with torch.no_grad():
        logits_causal = model.lm_logits(model.hidden_states(ids, None, "causal"))
        out = model(ids, attention_mode="causal", labels=labels)
        expected = F.cross_entropy(logits_causal[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1))
        torch.testing.assert_close(out.loss, expected)
        torch.testing.assert_close(out.logits, logits_causal)
        lean = model(ids, attention_mode="causal", labels=labels, return_logits=False)
        assert lean.logits is None
        torch.testing.assert_close(lean.loss, expected)

        logits_bidi = model.lm_logits(model.hidden_states(ids, None, "bidirectional"))
        out = model(ids, attention_mode="bidirectional", labels=labels)
        torch.testing.assert_close(out.loss, F.cross_entropy(logits_bidi.reshape(-1, VOCAB), labels.reshape(-1)))
        mntp = model(ids, attention_mode="bidirectional", labels=labels, label_shift=1)
        expected = F.cross_entropy(logits_bidi[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1))
        torch.testing.assert_close(mntp.loss, expected)
    with pytest.raises(ValueError, match="attention_mode"):
        model(ids, attention_mode="sideways")


@pytest.mark.parametrize("architecture", ARCHS)
@pytest.mark.parametrize("mode", ["causal", "bidirectional"])
def test_packed_rows_with_position_ids_and_a_4d_mask_equal_separate_sequences(architecture, mode):
    """Two sequences in one row, positions restarting at the second, each seeing only itself (block mask)."""
    model = tiny(architecture)
    first, second = batch(2, (1, 7))[0], batch(3, (1, 5))[0]
    row = torch.cat([first, second])[None]
    positions = torch.cat([torch.arange(7), torch.arange(5)])[None]
    mask = torch.zeros(12, 12, dtype=torch.bool)
    mask[:7, :7] = mask[7:, 7:] = True
    if mode == "causal":
        mask &= positions[0][:, None] >= positions[0][None, :]
    with torch.no_grad():
        packed = model.hidden_states(row, mask[None, None], mode, position_ids=positions)[0]
        torch.testing.assert_close(packed[:7], model.hidden_states(first[None], None, mode)[0], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(packed[7:], model.hidden_states(second[None], None, mode)[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("architecture", ARCHS)
def test_a_causal_prefix_tree_row_equals_its_branches(architecture):
    """[shared 3 tokens, 4 of the first branch, 4 of the second]: the second branch sits at slots 7-10 but
    continues the shared tokens at positions 3-6; only the position ids make it equal its own sequence."""
    model = tiny(architecture)
    shared, one, two = batch(2, (1, 3))[0], batch(3, (1, 4))[0], batch(4, (1, 4))[0]
    row = torch.cat([shared, one, two])[None]
    positions = torch.tensor([[0, 1, 2, 3, 4, 5, 6, 3, 4, 5, 6]])
    parents = [-1, 0, 1, 2, 3, 4, 5, 2, 7, 8, 9]
    mask = torch.zeros(11, 11, dtype=torch.bool)
    for node, parent in enumerate(parents):  # each token sees its ancestors and itself
        if parent >= 0:
            mask[node] = mask[parent]
        mask[node, node] = True
    with torch.no_grad():
        tree = model.hidden_states(row, mask[None, None], "causal", position_ids=positions)[0]
        alone_one = model.hidden_states(torch.cat([shared, one])[None], None, "causal")[0]
        alone_two = model.hidden_states(torch.cat([shared, two])[None], None, "causal")[0]
        slots_as_positions = model.hidden_states(row, mask[None, None], "causal")[0]
    torch.testing.assert_close(tree[:7], alone_one, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(tree[7:], alone_two[3:], atol=1e-5, rtol=1e-5)
    assert not torch.allclose(slots_as_positions[7:], alone_two[3:], atol=1e-3)


@pytest.mark.parametrize("architecture", ARCHS)
@pytest.mark.parametrize("return_logits", [True, False])
def test_loss_gradients_equal_torch_cross_entropy(architecture, return_logits):
    """The loss's own backward (softmax - one-hot, in the saved log-softmax's memory) against PyTorch's."""
    model = tiny(architecture)
    model.eval()  # no dropout: both passes see the same network
    ids = batch()
    labels = ids.clone()
    labels[:, ::3] = -100
    out = model(ids, attention_mode="causal", labels=labels, return_logits=return_logits)
    ours = torch.autograd.grad(out.loss * 3.0, list(model.parameters()))
    logits = model.lm_logits(model.hidden_states(ids, None, "causal"))
    expected = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1))
    reference = torch.autograd.grad(expected * 3.0, list(model.parameters()))
    torch.testing.assert_close(out.loss, expected)
    for mine, theirs in zip(ours, reference):
        torch.testing.assert_close(mine, theirs, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("architecture", ARCHS)
def test_lm_logits_are_the_output_projection_of_lm_features(architecture):
    # the fused training loss relies on this split of the head
    model = tiny(architecture)
    model.eval()
    with torch.no_grad():
        hidden = model.hidden_states(batch(), None, "bidirectional")
        torch.testing.assert_close(model.lm_logits(hidden), model.get_output_embeddings()(model.lm_features(hidden)))


@pytest.mark.parametrize("architecture", ARCHS)
def test_save_load_round_trip(tmp_path, architecture):
    model = tiny(architecture)
    ids = batch()
    model.save_pretrained(tmp_path)
    loaded = load_model(tmp_path)
    assert type(loaded) is type(model)
    assert loaded.config.antlm_architecture == architecture
    assert is_masked_lm(tmp_path) == (architecture == "ltgbert")
    assert loaded.get_input_embeddings().weight.data_ptr() == loaded.get_output_embeddings().weight.data_ptr()
    with torch.no_grad():
        for mode in ("causal", "bidirectional"):
            torch.testing.assert_close(loaded(ids, attention_mode=mode).logits, model(ids, attention_mode=mode).logits,
                                       atol=0, rtol=0)


@pytest.mark.parametrize("tie", [True, False])
def test_babyllama_checkpoint_is_a_plain_llama(tmp_path, tie):
    from transformers import AutoModelForCausalLM, LlamaForCausalLM

    model = tiny("babyllama", tie=tie)
    model.save_pretrained(tmp_path)
    llama, info = LlamaForCausalLM.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    assert isinstance(AutoModelForCausalLM.from_pretrained(tmp_path), LlamaForCausalLM)
    llama.eval()
    ids = batch()
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0  # right padding
    mask[2, :3] = 0  # left padding
    with torch.no_grad():
        ours = model(ids, attention_mask=mask, attention_mode="causal").logits
        theirs = llama(ids, attention_mask=mask).logits
    real = mask.bool()
    torch.testing.assert_close(ours[real], theirs[real], atol=1e-5, rtol=1e-5)


def test_babyllama_sdpa_matches_eager_math():
    model = tiny("babyllama")
    eager = tiny("babyllama")
    for layer in eager.model.layers:
        layer.self_attn.kernel = babyllama.eager_attention
    ids = batch()
    mask = torch.ones_like(ids)
    mask[0, 8:] = 0
    with torch.no_grad():
        for mode in ("causal", "bidirectional"):
            torch.testing.assert_close(model.hidden_states(ids, mask, mode)[mask.bool()],
                                       eager.hidden_states(ids, mask, mode)[mask.bool()], atol=1e-5, rtol=1e-5)


def test_ltgbert_bucket_function_hand_computed():
    # bucket 32, max 512: exact within +-16; beyond, 16 + ceil(15 * ln(d/16) / ln(511/16)), at most 31
    distances = torch.tensor([0, 1, 5, -5, 15, 16, -16, 17, 20, 21, 100, -100, 511, 1000])
    expected = torch.tensor([0, 1, 5, -5, 15, 16, -16, 17, 17, 18, 24, -24, 31, 31])
    assert torch.equal(make_log_bucket_position(distances, 32, 512), expected)
    for d, b in [(21, 18), (100, 24)]:  # the same numbers from the formula written out
        assert 16 + math.ceil(15 * math.log(d / 16) / math.log(511 / 16)) == b
    indices = relative_position_indices(600, 32, 512)
    assert indices.min() == 0 and indices.max() == 62  # rows of the [2*32-1, H] relative embedding
    assert indices[5, 5] == 31 and indices[7, 5] == 33 and indices[5, 7] == 29  # query - key distance


def _reference_ltgbert_attention(attn, x, mask, relative_embedding, indices):
    """The published attention written out: q.k + q.k_pos[bucket] + k.q_pos[bucket], masked softmax."""
    batch_size, length, hidden = x.shape
    heads, size = attn.n_heads, attn.head_size
    h = attn.pre_layer_norm(x)
    q, k = attn.in_proj_qk(h).chunk(2, dim=-1)
    v = attn.in_proj_v(h)
    q, k, v = (t.view(batch_size, length, heads, size).transpose(1, 2) for t in (q, k, v))
    pos = attn.in_proj_qk(relative_embedding).view(-1, heads, 2 * size)
    q_pos, k_pos = pos[..., :size], pos[..., size:]
    scores = torch.zeros(batch_size, heads, length, length)
    for i in range(length):
        for j in range(length):
            r = indices[i, j]
            scores[:, :, i, j] = ((q[:, :, i] * k[:, :, j]).sum(-1) + (q[:, :, i] * k_pos[r]).sum(-1)
                                  + (k[:, :, j] * q_pos[r]).sum(-1)) * attn.scale
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    context = scores.softmax(-1) @ v
    out = attn.out_proj(context.transpose(1, 2).reshape(batch_size, length, hidden))
    return attn.post_layer_norm(out)


@pytest.mark.parametrize("mode", ["causal", "bidirectional"])
def test_ltgbert_attention_matches_the_published_math(mode):
    from antlm_bench.models.masks import full_mask

    model = tiny("ltgbert")
    attn = model.transformer.layers[0].attention
    torch.manual_seed(3)
    x = torch.randn(2, 11, 32)
    padding = torch.ones(2, 11, dtype=torch.long)
    padding[1, 8:] = 0
    relative = model.embedding.relative_layer_norm(model.embedding.relative_embedding)
    indices = relative_position_indices(11, 8, 64)
    mask = full_mask(padding, mode, 11, x.device)
    with torch.no_grad():
        ours = attn(x, ~mask, relative, indices)
        reference = _reference_ltgbert_attention(attn, x, mask, relative, indices)
    torch.testing.assert_close(ours, reference, atol=1e-5, rtol=1e-5)


def test_ltgbert_attention_gradients_match_the_published_math():
    # the attention fills its scores in place; autograd must still see the published computation's gradients
    from antlm_bench.models.masks import full_mask

    model = tiny("ltgbert")
    attn = model.transformer.layers[0].attention
    torch.manual_seed(5)
    x = torch.randn(2, 9, 32, requires_grad=True)
    padding = torch.ones(2, 9, dtype=torch.long)
    padding[0, 6:] = 0
    relative = model.embedding.relative_layer_norm(model.embedding.relative_embedding)
    indices = relative_position_indices(9, 8, 64)
    weights = torch.randn(2, 9, 32)
    inputs = [x, *attn.parameters(), model.embedding.relative_embedding]
    for mode in ("causal", "bidirectional"):
        mask = full_mask(padding, mode, 9, x.device)
        ours = torch.autograd.grad((attn(x, ~mask, relative, indices) * weights).sum(), inputs, retain_graph=True)
        reference = _reference_ltgbert_attention(attn, x, mask, relative, indices)
        expected = torch.autograd.grad((reference * weights).sum(), inputs, retain_graph=True)
        for mine, theirs in zip(ours, expected, strict=True):
            torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=1e-4)


def test_ltgbert_bucket_window_changes_nothing():
    # encode() hands the layers only the relative-embedding rows a sequence reaches (widened to a multiple of 8);
    # the same layers given the whole table and the unshifted indices must agree
    model = tiny("ltgbert")  # bucket 8: 15 rows
    ids = batch(size=(2, 3))  # distances -2..2: rows 5..9, window of 8
    indices = relative_position_indices(3, 8, 64)
    window = ltgbert.used_buckets(indices, 15)
    assert window.stop - window.start == 8 and window.start <= 5 and window.stop >= 10
    for mode in ("causal", "bidirectional"):
        blocked = None if mode == "bidirectional" else ~torch.ones(3, 3, dtype=torch.bool).tril()[None, None]
        with torch.no_grad():
            x, relative = model.embedding(ids)
            for layer in model.transformer.layers:
                x = layer(x, blocked, relative, indices)
            torch.testing.assert_close(model.hidden_states(ids, None, mode), x, atol=1e-6, rtol=1e-5)


def test_ltgbert_feed_forward_equals_the_published_sequential():
    model = tiny("ltgbert")
    torch.manual_seed(4)
    x = torch.randn(2, 7, 32)
    for layer in model.transformer.layers:
        with torch.no_grad():
            torch.testing.assert_close(layer.mlp(x), layer.mlp.mlp(x), atol=1e-6, rtol=1e-5)


def test_ltgbert_registers_with_the_auto_classes(tmp_path):
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM

    model = tiny("ltgbert")
    model.save_pretrained(tmp_path)
    assert AutoConfig.from_pretrained(tmp_path).model_type == "ltgbert"
    masked = AutoModelForMaskedLM.from_pretrained(tmp_path).eval()
    causal = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert isinstance(masked, ltgbert.LtgBertForMaskedLM) and isinstance(causal, ltgbert.LtgBertForCausalLM)
    ids = batch()
    with torch.no_grad():
        torch.testing.assert_close(causal(ids).logits, model(ids, attention_mode="causal").logits)
        torch.testing.assert_close(masked(ids).logits, model(ids, attention_mode="bidirectional").logits)


@pytest.mark.parametrize("architecture", ARCHS)
def test_sequence_classifier_loads_the_lm_encoder_and_pools_the_right_token(tmp_path, architecture):
    model = tiny(architecture)
    model.save_pretrained(tmp_path)
    classifier = load_model(tmp_path, task="classification", num_labels=3)
    encoder = classifier.model if architecture == "babyllama" else classifier
    source = model.model if architecture == "babyllama" else model
    for name, tensor in encoder.state_dict().items():
        if name in source.state_dict():
            assert torch.equal(tensor, source.state_dict()[name]), name
    ids = batch(size=(2, 9))
    mask = torch.ones_like(ids)
    mask[:, 6:] = 0
    with torch.no_grad():
        padded = classifier(ids, attention_mask=mask, labels=torch.tensor([0, 2]))
        short = classifier(ids[:, :6])
    assert padded.logits.shape == (2, 3) and torch.isfinite(padded.loss)
    torch.testing.assert_close(padded.logits, short.logits, atol=1e-5, rtol=1e-5)


def test_parameter_counts_of_the_paper_presets():
    # Table 1: 12 layers, 12 heads, hidden 768, FFN 2048, vocabulary 16k, tied embeddings
    V, H, I, L, B = 16000, 768, 2048, 12, 32
    llama = V * H + L * (4 * H * H + 3 * H * I + 2 * H) + H
    ltg_layer = (H * 2 * H + 2 * H) + (H * H + H) + (H * H + H) + 2 * H + (H * 2 * I) + (I * H)
    ltg = V * H + (2 * B - 1) * H + 2 * H + L * ltg_layer + (H * H + H) + V
    for recipe in ("antlm-babyllama", "babyllama-clm-only"):
        assert count_parameters(load_recipe(recipe).resolve("paper")) == llama == 97_241_856
    for recipe in ("antlm-ltgbert", "ltgbert-mlm-only"):
        assert count_parameters(load_recipe(recipe).resolve("paper")) == ltg == 97_934_464


@pytest.mark.parametrize("recipe_name", ["antlm-babyllama", "antlm-ltgbert"])
def test_meta_count_equals_the_real_model(recipe_name):
    recipe = load_recipe(recipe_name)
    model = build_model(recipe.resolve("tiny"))
    assert sum(p.numel() for p in model.parameters()) == count_parameters(recipe.resolve("tiny"))
    assert model.config.antlm_architecture == recipe.architecture


def test_cpu_dropout_keeps_1_minus_p_and_scales_what_it_keeps():
    dropout = ltgbert.UniformMaskDropout(0.25)
    torch.manual_seed(6)
    x = (torch.rand(200_000) + 0.5).requires_grad_()
    out = dropout(x)
    kept = out != 0
    assert abs(kept.float().mean().item() - 0.75) < 0.005  # 6 standard deviations: ~0.001
    torch.testing.assert_close(out[kept], x[kept] / 0.75)
    out.sum().backward()
    torch.testing.assert_close(x.grad, kept.float() / 0.75)
    dropout.eval()
    assert torch.equal(dropout(x), x)


def test_dropout_is_off_in_eval_and_on_in_train():
    model = tiny("ltgbert", dropout=0.5)
    ids = batch()
    with torch.no_grad():
        assert torch.equal(model(ids).logits, model(ids).logits)
        model.train()
        assert not torch.equal(model(ids).logits, model(ids).logits)
