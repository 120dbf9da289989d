"""antlm-bench: benchmark pre-training schedules (AntLM and friends) for small language models.

The package is laid out by stage, in the order the data flows:

- ``data/``: finding the data (``--data-dir``, ``$ANTLM_BENCH_DATA``, the cache), file readers, the training
  corpus, the tokenizer;
- ``runs/``: the run's contract: the schedule grammar, a checkpoint's record, the run folder's layout;
- ``models/``: one architecture per file, the backend interface;
- ``training/``: objectives, learning-rate schedules, checkpoint folders, the trainer;
- ``scoring/``: log-likelihoods and pseudo-log-likelihoods of token sequences, batched;
- ``adapters/``: tasks built on scoring (minimal pairs, the BabyLM 2025 tasks, GLUE fine-tuning, lm-eval);
- ``evaluate.py``: tasks x model -> result rows;
- ``export.py``: a checkpoint as the BabyLM 2025 pipeline loads it (``antlm-bench export``);
- ``results/``: result tables and their store, statistics, leaderboards, ``check``;
- ``pipeline/``: ``antlm-bench run`` (train per seed, evaluate, reuse what is finished);
- ``sweep/``: a grid of ``run`` cells, its executors and ``--until-decided``;
- ``cli/``: the ``antlm-bench`` commands; ``lm_eval_tasks/``: task folders for ``lm_eval --include_path``.

``registry.py``, ``recipes.py``, ``tasks.py``, ``conventions.py``, ``options.py`` (command-line values parsed once:
the seeds grammar, the device), ``config.py`` (the typed job configuration: run's sections, each option a field
defined once, from which the flags, config files and sweep cells derive), ``clock.py`` (UTC now, as records write
it), ``errors.py`` (the error contract and the one way an error becomes a line), ``progress.py`` (progress bars and
lines, one way for every stage) and ``locking.py`` serve every stage. Which module may import which is written once,
in ``tests/project/test_layout.py`` (docs/layout.md).
"""

__version__ = "0.1.0"
