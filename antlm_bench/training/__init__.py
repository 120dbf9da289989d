"""The trainer's parts, each readable alone; ``antlm_bench.training.trainer.Trainer`` combines them and runs the loop.

- ``plan``: the schedule as global steps (phase boundaries, LR layouts), and which rows and objective each step
  trains (``StepPlan``).
- ``step``: one optimizer step's gradients over the global batch in micro-batches, accumulation and DDP
  all-reduce included; what happens to the optimizer when a phase starts (``ObjectiveStep``).
- ``checkpoints``: the run folder, checkpoints, the resume point and resuming from it (``CheckpointAndResume``).
- ``reporting``: progress, metrics.jsonl, TensorBoard / W&B, run.json and per-phase scoring (``Reporting``).
"""
