"""``antlm-bench run``: the whole job in one command.

    data + tokenizer (cached) -> train under the schedule, each phase scored its own way (paper Fig. 2)
      -> final checkpoint evaluated on every asked task (minimal pairs by --final-scoring: auto, the last
         phase's method, or clm / pll for every run; GLUE fine-tuning)
      -> rows appended to the run's tables -> a Table-2-style summary over seeds

Each seed is one run folder ``<output>/<recipe>-<preset>-<schedule>-seed<N>`` (``...-<schedule>-<label>-seed<N>``
under ``--label``: runs.identity). Re-running the same command reuses what is finished.

- ``run``: the driver (:func:`run_benchmark`, a :class:`antlm_bench.config.RunConfig` in, a summary out) and the
  trainer's per-phase scorer (:func:`score_checkpoint`);
- ``request``: a run request resolved once (:func:`resolve_run`: defaults decided, recipe, schedule, tasks, task
  options), what the driver and the reuse rule both start from;
- ``reuse``: the reuse rule: what of a run is finished, decided from its records (:func:`pending_seeds`, what a
  sweep asks before it starts a cell);
- ``evaluations``: a final evaluation as a record: its settings, content key, marker and store event.
"""

from antlm_bench.pipeline.evaluations import final_method, glue_options
from antlm_bench.pipeline.request import ResolvedRun, default_preset, resolve_run, run_threads
from antlm_bench.pipeline.reuse import kept_final_evaluations, pending_seeds
from antlm_bench.pipeline.run import RunSummary, SeedRun, run_benchmark, score_checkpoint

__all__ = ["ResolvedRun", "RunSummary", "SeedRun", "default_preset", "final_method", "glue_options", "kept_final_evaluations",
           "pending_seeds", "resolve_run", "run_benchmark", "run_threads", "score_checkpoint"]
