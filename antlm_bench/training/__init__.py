"""The training stage: the objectives, learning-rate schedules, checkpoints and the trainer.

- ``objectives``: the batches of each objective (CLM, MLM, MNTP, MIX) and the loss module.
- ``lr_schedules``: per-objective learning-rate schedules, restarted at every phase.
- ``checkpoint``: checkpoint folders and resume points (their record is ``antlm_bench.runs.record``).
- ``trainer``: ``train``, ``TrainJob`` (an ``antlm_bench.config.TrainConfig`` resolved once) and ``Trainer``, the loop over the trainer's parts, each readable alone:

  - ``plan``: the schedule as global steps (phase boundaries, LR layouts), and which rows and objective each step
    trains (``StepPlan``).
  - ``step``: one optimizer step's gradients over the global batch in micro-batches, accumulation and DDP
    all-reduce included; what happens to the optimizer when a phase starts (``StepRunner``); the device, the
    process group, and stopping after the step on SIGINT / SIGTERM (``StopSignal``).
  - ``checkpointer``: the run folder and what a start may do with it, the records every checkpoint carries, and
    the policy of which checkpoints and resume points are written after a step and which are scored
    (``SavePolicy``, applied by ``Checkpointer.after_step``).
  - ``reporting``: progress, metrics.jsonl, TensorBoard / W&B, run.json and per-phase scoring (``Reporter``),
    with a scorer the caller passes in (``PhaseScorer``): nothing here imports the evaluation stage.
"""
