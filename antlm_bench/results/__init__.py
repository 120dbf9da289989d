"""The results stage: result tables and their store, the statistics over them, leaderboards and ``check``.

Owns the row schema and its Arrow/Parquet files (``tables.py``), the append-only, lock-guarded store of a results
folder (``store/``), seed- and item-aware inference (``stats/``), leaderboards over result folders
(``leaderboard/``) and the regression gate (``check.py``): it reads what training and evaluation wrote.
"""
