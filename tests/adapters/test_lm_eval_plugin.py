"""The lm-eval plug-in: ``--model antlm`` on a local json task gives the numbers of antlm-bench's own scorer,
for a causal model (clm, checked against lm-eval's ``hf`` model too) and a masked one (PLL, which ``hf`` refuses)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

lm_eval = pytest.importorskip("lm_eval")

from lm_eval.api.instance import Instance
from lm_eval.api.registry import get_model
from lm_eval.tasks import TaskManager

from antlm_bench.adapters.lm_eval import AntLMEvalModel
from antlm_bench.scoring import load_scoring_model, score_pairs, score_texts

PAIRS = [
    ("the cat sat on the mat .", "the cat sat on the mats mat ."),
    ("who should derek hug after shocking richard ?", "who should derek hug richard after shocking ?"),
    ("these dogs were barking loudly .", "these dogs was barking loudly ."),
    ("thank you very much .", "thank you very many ."),
    ("some teachers had seen the new books .", "some teachers had see the new books ."),
    ("the cat sat on the mat .", "the cat sat on the mat ."),  # identical: a tie, scored the same
]
CONTEXT = [
    ("the children slept in their beds .", "they were tired", "they were loud"),
    ("the dog is barking .", "it is loud", "it is quiet"),
    ("well , you all have a nice day there .", "thank you", "you thank"),
]

TASK_YAML = """task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{text}"
doc_to_choice: "{{{{[{good}, {bad}]}}}}"
doc_to_target: 0
metric_list:
  - metric: acc
metadata:
  version: 1.0
"""


@pytest.fixture(scope="module")
def tasks_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lm_eval_tasks")
    pairs = folder / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"sentence_good": g, "sentence_bad": b}) + "\n" for g, b in PAIRS))
    context = folder / "context.jsonl"
    context.write_text("".join(json.dumps({"context": c, "good": g, "bad": b}) + "\n" for c, g, b in CONTEXT))
    (folder / "antlm_pairs.yaml").write_text(TASK_YAML.format(
        name="antlm_local_pairs", data=pairs, text="", good="sentence_good", bad="sentence_bad"))
    (folder / "antlm_context.yaml").write_text(TASK_YAML.format(
        name="antlm_local_context", data=context, text="{{context}}", good="good", bad="bad"))
    return folder


@pytest.fixture(scope="module")
def task_manager(tasks_dir):
    # only our two local tasks: indexing lm-eval's thousands of built-in task files takes seconds
    return TaskManager(include_path=str(tasks_dir), include_defaults=False)


@pytest.fixture(scope="module")
def evaluate(task_manager):
    """simple_evaluate on both local tasks, cached per (model, model_args): task -> (acc, loglikelihoods [n, 2])."""
    cache: dict = {}

    def run(model: str, model_args: str) -> dict:
        if (model, model_args) not in cache:
            with pytest.MonkeyPatch.context() as patch:
                # lm-eval collects the machine's environment (nvidia-smi, pip, ...) into the results: seconds, unused
                patch.setattr("lm_eval.evaluator.add_env_info", lambda results: None)
                results = lm_eval.simple_evaluate(
                    model=model, model_args=model_args, tasks=["antlm_local_pairs", "antlm_local_context"],
                    task_manager=task_manager, log_samples=True, batch_size=1,
                )
            out = {}
            for task, samples in results["samples"].items():
                samples = sorted(samples, key=lambda s: s["doc_id"])
                loglikelihoods = np.array([[float(r[0][0]) for r in s["resps"]] for s in samples])
                out[task] = (results["results"][task]["acc,none"], loglikelihoods)
            cache[(model, model_args)] = out
        return cache[(model, model_args)]

    return run


def test_antlm_is_registered_without_hiding_the_builtin_models():
    assert get_model("antlm") is AntLMEvalModel
    assert get_model("hf").__name__ == "HFLM"


@pytest.mark.parametrize("kind, method", [("llama", "clm"), ("bert", "pll")])
def test_plugin_equals_the_scorer_on_a_local_json_task(kind, method, evaluate, llama_dir, bert_dir):
    folder = llama_dir if kind == "llama" else bert_dir
    sm = load_scoring_model(folder)
    # scoring=auto: a plain causal folder is scored clm, a masked one pll (lm-eval's hf model refuses masked LMs)
    results = evaluate("antlm", f"pretrained={folder},scoring=auto")
    acc, ll = results["antlm_local_pairs"]
    # lm-eval scores " " + sentence with an empty context: the scorer's leading_space=True
    good, bad = score_pairs(sm, [g for g, _ in PAIRS], [b for _, b in PAIRS], method, leading_space=True)
    np.testing.assert_allclose(ll[:, 0], good, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ll[:, 1], bad, rtol=1e-6, atol=1e-6)
    assert ll[-1, 0] == ll[-1, 1]  # the identical pair ties exactly
    # lm-eval's acc counts a tie toward the first choice, the correct one here; with that rule the numbers agree
    assert acc == pytest.approx(np.mean(good >= bad))
    assert len(set(np.round(good, 4))) > 3  # the model is not degenerate: the comparison means something

    acc, ll = results["antlm_local_context"]
    contexts = [c for c, _, _ in CONTEXT]
    good, bad = score_pairs(sm, [g for _, g, _ in CONTEXT], [b for _, _, b in CONTEXT], method, contexts=contexts)
    np.testing.assert_allclose(ll[:, 0], good, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ll[:, 1], bad, rtol=1e-6, atol=1e-6)
    assert acc == pytest.approx(np.mean(good >= bad))


def test_clm_matches_lm_evals_own_hf_model(evaluate, llama_dir):
    ours = evaluate("antlm", f"pretrained={llama_dir},scoring=auto")
    # add_bos_token: the scorer conditions every sequence on BOS, a context included
    theirs = evaluate("hf", f"pretrained={llama_dir},add_bos_token=True,dtype=float32,device=cpu")
    for task in ("antlm_local_pairs", "antlm_local_context"):
        np.testing.assert_allclose(ours[task][1], theirs[task][1], rtol=1e-4, atol=1e-4)
        assert ours[task][0] == theirs[task][0]


def test_rolling_greedy_and_generation(llama_dir, bert_dir):
    text = "these dogs were barking loudly while the children slept in their beds ."
    clm = AntLMEvalModel(pretrained=str(llama_dir), scoring="clm")
    (rolling,) = clm.loglikelihood_rolling([Instance("loglikelihood_rolling", {}, (text,), 0)])
    sm = clm.sm
    assert rolling == pytest.approx(float(score_texts(sm, [text], "clm")[0]), abs=1e-6)
    # windows: a short model length splits the text; the sum over disjoint windows still scores every token once
    clm.sm.module.config.max_position_embeddings = 8
    (windowed,) = clm.loglikelihood_rolling([Instance("loglikelihood_rolling", {}, (text,), 0)])
    n_tokens = len(sm.tokenizer(text, add_special_tokens=False)["input_ids"])
    assert n_tokens > 8 and windowed < 0 and windowed != pytest.approx(rolling)
    clm.sm.module.config.max_position_embeddings = 512

    # is_greedy: a continuation made of the model's own argmax tokens is greedy; its tail swapped is not
    prompt = "the cat"
    ids = sm.tokenizer(prompt, add_special_tokens=False)["input_ids"]
    import torch

    with torch.inference_mode():
        prefixed = torch.tensor([[sm.tokenizer.bos_token_id, *ids]])
        for _ in range(3):
            nxt = sm.module(prefixed).logits[0, -1].argmax().item()
            prefixed = torch.cat([prefixed, torch.tensor([[nxt]])], dim=1)
    greedy_text = sm.tokenizer.decode(prefixed[0, 1:].tolist())
    continuation = greedy_text[len(prompt):]
    assert sm.tokenizer(greedy_text, add_special_tokens=False)["input_ids"] == prefixed[0, 1:].tolist()
    (ll, is_greedy), (_, not_greedy) = clm.loglikelihood([
        Instance("loglikelihood", {}, (prompt, continuation), 0),
        Instance("loglikelihood", {}, (prompt, " mat mat mat"), 1),
    ])
    assert is_greedy and not not_greedy
    # and the loglikelihood is the plain sum over the continuation's tokens, each given BOS + everything before
    with torch.inference_mode():
        logprobs = torch.log_softmax(sm.module(prefixed).logits[0].float(), dim=-1)
    expected = sum(logprobs[j - 1, prefixed[0, j]].item() for j in range(1 + len(ids), prefixed.shape[1]))
    assert ll == pytest.approx(expected, abs=1e-5)

    pll = AntLMEvalModel(pretrained=str(bert_dir), scoring="pll")
    # pll is_greedy: the last word's token is greedy when it is the argmax at its masked position
    from antlm_bench.scoring.encode import Seq

    tok = pll.sm.tokenizer
    enc = tok("the children slept in their beds", add_special_tokens=True)["input_ids"]
    position = len(enc) - 2  # before [SEP]
    masked = torch.tensor([enc[:position] + [tok.mask_token_id] + enc[position + 1:]])
    with torch.inference_mode():
        best = int(pll.sm.module(masked).logits[0, position].argmax())
    other = (best + 1) % len(tok)
    seqs = [Seq(np.asarray(enc[:position] + [t] + enc[position + 1:]), np.asarray([position])) for t in (best, other)]
    assert pll._greedy(seqs).tolist() == [True, False]
    (whole,) = pll.loglikelihood_rolling([Instance("loglikelihood_rolling", {}, (text,), 0)])
    assert whole == pytest.approx(float(score_texts(pll.sm, [text], "pll")[0]), abs=1e-6)
    with pytest.raises(NotImplementedError, match="does not generate"):
        pll.generate_until([Instance("generate_until", {}, ("the", {"until": ["."]}), 0)])


def _expected_pll_acc(bert_dir) -> float:
    good, bad = score_pairs(load_scoring_model(bert_dir), [g for g, _ in PAIRS], [b for _, b in PAIRS], "pll",
                            leading_space=True)
    return float(np.mean(good >= bad))


def test_the_wrapper_hands_lm_evals_own_command_line_the_antlm_model(tasks_dir, bert_dir, tmp_path, monkeypatch):
    """``antlm-lm-eval`` = lm-eval's CLI with ``antlm`` registered (in process; the real command: the slow test)."""
    from lm_eval.tasks import TaskManager as RealTaskManager

    from antlm_bench.adapters.lm_eval import cli_evaluate

    # lm-eval's CLI indexes its thousands of built-in tasks first (seconds); this test needs only ours
    monkeypatch.setattr("lm_eval.tasks.TaskManager",
                        lambda include_path=None, metadata=None, **kw: RealTaskManager(
                            include_path=include_path, include_defaults=False, metadata=metadata))
    monkeypatch.setattr("lm_eval.evaluator.add_env_info", lambda results: None)
    out = tmp_path / "out"
    cli_evaluate(["--model", "antlm", "--model_args", f"pretrained={bert_dir},scoring=pll", "--tasks",
                  "antlm_local_pairs", "--include_path", str(tasks_dir), "--output_path", str(out)])
    (path,) = out.rglob("results_*.json")
    report = json.loads(path.read_text())
    assert report["results"]["antlm_local_pairs"]["acc,none"] == pytest.approx(_expected_pll_acc(bert_dir))
    assert report["config"]["model"] == "antlm"


@pytest.mark.parametrize(("model_args", "says"), [
    ("pretrained={missing}", "not a folder"),
    ("pretrained={bert},batch_tokens=0", "--batch-tokens 0"),
])
def test_the_wrapper_says_our_errors_in_one_line(tasks_dir, bert_dir, tmp_path, monkeypatch, capsys, model_args, says):
    """A missing folder or a bad option of ours: one line and exit 2, as every antlm-bench command, no traceback."""
    from lm_eval.tasks import TaskManager as RealTaskManager

    from antlm_bench.adapters.lm_eval import cli_evaluate

    monkeypatch.setattr("lm_eval.tasks.TaskManager",
                        lambda include_path=None, metadata=None, **kw: RealTaskManager(
                            include_path=include_path, include_defaults=False, metadata=metadata))
    args = model_args.format(missing=tmp_path / "nowhere", bert=bert_dir)
    with pytest.raises(SystemExit) as stopped:
        cli_evaluate(["--model", "antlm", "--model_args", args, "--tasks", "antlm_local_pairs", "--include_path",
                      str(tasks_dir), "--device", "cpu"])
    assert stopped.value.code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and says in errors[0]


@pytest.mark.slow
def test_the_wrapper_command_runs_lm_eval_with_antlm(tasks_dir, bert_dir, tmp_path):
    """``python -m antlm_bench.adapters.lm_eval`` as a user runs it (lm-eval indexes all its tasks: ~30 s)."""
    out = tmp_path / "out"
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    result = subprocess.run(
        [sys.executable, "-m", "antlm_bench.adapters.lm_eval", "--model", "antlm", "--model_args",
         f"pretrained={bert_dir},scoring=pll", "--tasks", "antlm_local_pairs", "--include_path", str(tasks_dir),
         "--output_path", str(out)],
        capture_output=True, text=True, timeout=600, env=env, check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (path,) = out.rglob("results_*.json")
    report = json.loads(path.read_text())
    assert report["results"]["antlm_local_pairs"]["acc,none"] == pytest.approx(_expected_pll_acc(bert_dir))
    assert report["config"]["model"] == "antlm"
