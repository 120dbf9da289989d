"""The BabyLM 2025 zero-shot tasks beyond minimal pairs, scored as the official pipeline
(babylm/evaluation-pipeline-2025) scores them, under the convention ``babylm-2025`` (docs/babylm-2025.md has every
rule with its place in the official code): entity tracking (``entity_tracking``: ``EntityTrackingTask``), WUG
adjective nominalization (``wug``: ``WugAdjTask``) and reading times (``reading``: ``ReadingTask``), on what they
share (``common``: data files, the scoring method, batched scoring and its notes).
"""

from __future__ import annotations

from antlm_bench.adapters.babylm2025.entity_tracking import (
    EntityTrackingTask,
    entity_tracking_value,
    option_credit,
)
from antlm_bench.adapters.babylm2025.reading import (
    EYE_TRACKING,
    NUMERIC,
    PANDAS_NA,
    SELF_PACED,
    ReadingData,
    ReadingTask,
    r_squared,
    read_reading_csv,
    reading_scores,
    word_surprisals,
)
from antlm_bench.adapters.babylm2025.wug import WugAdjTask, spearman, wug_p_first

__all__ = [
    "EYE_TRACKING", "NUMERIC", "PANDAS_NA", "SELF_PACED", "EntityTrackingTask", "ReadingData",
    "ReadingTask", "WugAdjTask", "entity_tracking_value", "option_credit", "r_squared", "read_reading_csv",
    "reading_scores", "spearman", "word_surprisals", "wug_p_first",
]
