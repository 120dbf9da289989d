"""The run's contract, shared by every stage: what a schedule is, what a checkpoint records, where a run keeps what.

- ``schedule``: the grammar (``4_CLM+16_MLM+4_CLM``), parsed into phases with one canonical string.
- ``record``: ``CheckpointRecord``, the ``antlm_state.json`` every AntLM checkpoint carries (written by the trainer,
  read by every scorer, the exporter and the leaderboard), and the scoring method a checkpoint's last phase calls for.
- ``layout``: ``RunLayout``, the files and folders of a run folder (checkpoints, the final and last ones, the run
  file, metrics, the results store).
- ``identity``: the two identities, defined once: the weights digest (which network) and the configuration digest
  (which configuration; what seeds pool); and ``RunIdentity``, which run (its folder's name, its rows' run id, the
  one "same run" check).
- ``run_file``: ``RunRecord``, run.json typed (one writer, the trainer's reporter; read through the layout).
- ``export_record``: ``ExportRecord``, an export's antlm_export.json typed, and the check of an export's weights.

It sits at the bottom of the stack, beside ``data``, so that every stage reads a run the same way.
"""
