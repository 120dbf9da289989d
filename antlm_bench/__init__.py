"""antlm-bench: benchmark pre-training schedules (AntLM and friends) for small language models.

The package is laid out by stage, and imports run one way (``tests/test_layout.py`` checks it):

    cli -> pipeline -> training, evaluate -> scoring, adapters -> models -> data

- ``data/``: finding the data (``--data-dir``, ``$ANTLM_BENCH_DATA``, the cache), file readers, the training
  corpus, the tokenizer;
- ``training/``: the schedule grammar, objectives, learning-rate schedules, the trainer and its checkpoints;
- ``models/``: one architecture per file, and the backend registry;
- ``scoring/``: log-likelihoods and pseudo-log-likelihoods of token sequences, batched;
- ``adapters/``: tasks built on scoring (minimal pairs, the BabyLM 2025 tasks, GLUE fine-tuning, lm-eval);
- ``evaluate.py``: tasks x model -> result rows;
- ``results/``: result tables and their store, statistics, leaderboards, ``check``;
- ``pipeline.py`` and ``cli/``: the ``antlm-bench`` commands.

``registry.py``, ``recipes.py``, ``tasks.py``, ``conventions.py``, ``errors.py`` and ``locking.py`` are shared by
every stage. Modules that moved keep their old import paths (``antlm_bench/_moved.py``).
"""

__version__ = "0.1.0"

from antlm_bench import _moved

_moved.install()
