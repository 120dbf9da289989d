"""Figure-2-style curves of scores per checkpoint, drawn so that they explain their numbers.

- Each point says which items it stands on: a point scored on a quick subset (the first N items of every
  subtask, ``--eval-limit`` / ``--limit``) is an open marker, a point on every item a filled one, so that a
  full-data final point beside subset points is never read as one more step of the same curve; the panel title
  and the caption name the subset.
- A shaded band is the 95% item interval of each point (the mean over the row's seeds of each seed's own
  bounds: it shows the items' sampling error, not the seeds' spread, which the table's intervals include).
- Tasks scored as two-way choices (BLiMP, its supplement, EWoK) get a dashed line at chance, 50% (their margin
  panels at 0 nats). A margin or a loss is drawn in its own units (nats), not as a percentage.
- The y axis spans at least ``MIN_SPAN`` percentage points, so that noise is not magnified into a trend.
- A panel or row with a single point at the final checkpoint (GLUE is fine-tuned on the final model only; the
  macro needs every task) is drawn as a star labelled "final only", never as a one-point curve.
"""

from __future__ import annotations

import io
import math

from antlm_bench.results.leaderboard.definition import MACRO, metric_kind
from antlm_bench.results.leaderboard.model import Leaderboard
from antlm_bench.results.leaderboard.text import key_text

# --x of the curves: the CurvePoint attribute each axis reads, and its label
X_AXES = {"epoch": ("epoch", "epoch"), "tokens": ("tokens_seen", "tokens seen"),
          "words": ("words_seen", "words seen (train --save-at-words checkpoints)")}
CHANCE = {"blimp": 50.0, "blimp_supplement": 50.0, "ewok": 50.0}  # two-way minimal-pair choices: chance is 50%
MIN_SPAN = 5.0  # percentage points
MIN_SPAN_NATS = 0.1  # a margin's or a loss's panel (nats)
MARKERS = {"clm": "o", "pll": "s", "mntp": "^", "pll-word-l2r": "D", "finetune": "P", "finetune-official": "p",
           "probe": "X"}  # one marker per scoring method
FINAL_MARKER = "*"
BAND_NOTE = ("bands: 95% item interval of each point (mean over the row's seeds of each seed's bounds; the seed "
             "spread is in the table's intervals, not in the bands)")


def words_label(value: float, _position: object = None) -> str:
    """A words axis tick: 500K, 1M, 2.5M (BabyLM names its checkpoints by millions of words)."""
    if abs(value) >= 1e6:
        return f"{value / 1e6:g}M"
    return f"{value / 1e3:g}K" if value else "0"


def chance_of(panel: str, metric: str = "accuracy") -> float | None:
    """Chance on the panel's axis: 50% for a two-way choice's accuracy, 0 nats for its margin (no preference)."""
    task = panel.split(":")[0].removesuffix(f".{metric}")
    if task not in CHANCE:
        return None
    return 0.0 if metric == "margin" else CHANCE[task] if metric_kind(metric).unit == "%" else None


def panel_subset(board: Leaderboard, panel: str) -> int | None:
    """The items per subtask behind the panel's curve points when they are a subset (the same for every point
    that has one), else None."""
    limits = {p.limit for row in board.rows for p in row.curves.get(panel, [])}
    limits.discard(None)
    return limits.pop() if len(limits) == 1 else (min(limits) if limits else None)


def y_limits(values: list[float], chance: float | None, min_span: float = MIN_SPAN,
             percent: bool = True) -> tuple[float, float]:
    """The panel's y range: its points, bands and chance line, widened around their middle to ``min_span``; a
    percentage stays inside 0..100, a margin or a loss (nats) has no such bounds."""
    shown = list(values) + ([chance] if chance is not None else [])
    low, high = min(shown), max(shown)
    pad = 0.06 * max(high - low, 1e-9)
    low, high = low - pad, high + pad
    if high - low < min_span:
        middle = (low + high) / 2
        low, high = middle - min_span / 2, middle + min_span / 2
    if not percent:
        return low, high
    if low < 0.0:  # keep the span, inside 0..100
        low, high = 0.0, high - low
    if high > 100.0:
        low, high = max(0.0, low - (high - 100.0)), 100.0
    return low, high


def curve_caption(board: Leaderboard) -> str:
    """One paragraph under the figure: what the points stand on, what the bands and lines are."""
    subsets = sorted({n for panel in [*board.columns, MACRO] if (n := panel_subset(board, panel))})
    parts = []
    if subsets:
        parts.append(f"Open markers are points scored on a quick subset (the first {', '.join(map(str, subsets))} "
                     "items of every subtask), filled markers and stars points on every item; the table above uses "
                     "every item, so the last point of a curve need not equal the table's score.")
    parts.append(BAND_NOTE[0].upper() + BAND_NOTE[1:] + ".")
    parts.append("Dashed line: chance (50%) for the two-way choice tasks (BLiMP, supplement, EWoK); GLUE has none. "
                 f"Every y axis spans at least {MIN_SPAN:g} points. Stars mark scores that exist only for the final "
                 "checkpoint (GLUE is fine-tuned on the final model; the macro needs every task): the table's score "
                 "and 95% interval for each row, side by side, not a point in training time.")
    other = sorted({board.column_metric(c) for c in board.columns} - {"accuracy"})
    other = [m for m in other if metric_kind(m).unit != "%"]
    if other:
        parts.append("Panels of " + ", ".join(f"{m} ({metric_kind(m).unit}"
                                              + (", lower is better)" if metric_kind(m).lower_is_better else ")")
                                              for m in other)
                     + f" are in their own units, not percentages (at least {MIN_SPAN_NATS:g} nats on the y axis; "
                       "a margin's chance line at 0).")
    return " ".join(parts)


def final_only_panels(board: Leaderboard, panels: list[str]) -> set[str]:
    """Panels whose every row has one point while some row has several checkpoints elsewhere: scores that exist
    for the final checkpoint only (GLUE, fine-tuned on the final model; the macro, which needs GLUE)."""
    longest = max((len(c) for row in board.rows for c in row.curves.values()), default=0)
    if longest < 2:
        return set()
    return {panel for panel in panels if all(len(row.curves.get(panel, [])) <= 1 for row in board.rows)}


def plot_curves(board: Leaderboard, fmt: str = "png", x: str = "epoch") -> bytes | None:
    """One panel per task (and macro), one line per row, markers by scoring method; see the module docstring."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    panels = [c for c in [*board.columns, MACRO] if any(c in r.curves for r in board.rows)]
    if not panels:
        return None
    attr, x_label = X_AXES[x]
    ncols = min(3, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.8 * ncols, 3.6 * nrows), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    methods_seen: set[str] = set()
    any_band = any_final = False
    fills_seen: set[bool] = set()  # True: a point on a subset of the items (open marker) was drawn; False: full
    any_chance = ""  # the units of the chance lines drawn: "%", "nats" or "both"
    final_only = final_only_panels(board, panels)
    for ax, panel in zip(axes.flat, panels):
        values: list[float] = []
        metric = board.column_metric(panel)
        kind = metric_kind(metric)
        scale, percent = kind.scale, kind.unit == "%"
        chance = chance_of(panel, metric)
        for i, row in enumerate(board.rows):
            curve = [p for p in row.curves.get(panel, []) if getattr(p, attr) is not None]
            if not curve:
                continue
            color = colors[i % len(colors)]
            xs = [getattr(p, attr) for p in curve]
            ys = [scale * p.value for p in curve]
            if panel in final_only:  # one point per row, side by side: no training axis to draw it on
                cell = row.macro if panel == MACRO else row.cells.get(panel)
                if cell is None:
                    continue
                any_final = True
                value = scale * cell.value  # the table's score (every item, all seeds) and its interval
                values.append(value)
                ax.plot([i], [value], marker=FINAL_MARKER, markersize=12, color=color, markeredgecolor="black",
                        markeredgewidth=0.6, linestyle="none")
                if cell.low is not None and cell.high is not None:
                    ax.errorbar([i], [value], yerr=[[value - scale * cell.low], [scale * cell.high - value]],
                                color=color, capsize=3, linewidth=1, linestyle="none")
                    values.extend([scale * cell.low, scale * cell.high])
                continue
            values.extend(ys)
            if len(curve) == 1:  # a one-phase schedule: its only checkpoint, with its interval
                method = curve[0].scoring.split("+")[0].split("/")[0]
                methods_seen.add(method)
                fills_seen.add(curve[0].limit is not None)
                ax.plot(xs, ys, marker=MARKERS.get(method, "o"), markersize=6, color=color, linestyle="none",
                        markerfacecolor="none" if curve[0].limit is not None else color)
                if curve[0].low is not None:
                    ax.errorbar(xs, ys, yerr=[[ys[0] - scale * curve[0].low], [scale * curve[0].high - ys[0]]],
                                color=color, capsize=3, linewidth=1, linestyle="none", alpha=0.6)
                    values.extend([scale * curve[0].low, scale * curve[0].high])
                continue
            banded = [(xv, scale * p.low, scale * p.high) for xv, p in zip(xs, curve) if p.low is not None]
            if len(banded) >= 2:
                any_band = True
                ax.fill_between([b[0] for b in banded], [b[1] for b in banded], [b[2] for b in banded],
                                color=color, alpha=0.14, linewidth=0)
                values.extend(v for b in banded for v in b[1:])
            ax.plot(xs, ys, color=color, linewidth=1.4)
            for xv, yv, p in zip(xs, ys, curve):
                method = p.scoring.split("+")[0].split("/")[0]
                methods_seen.add(method)
                fills_seen.add(p.limit is not None)
                ax.plot([xv], [yv], marker=MARKERS.get(method, "o"), color=color, markersize=5, linestyle="none",
                        markerfacecolor="none" if p.limit is not None else color)
        if chance is not None:
            unit = "%" if percent else "nats"
            any_chance = unit if any_chance in ("", unit) else "both"
            ax.axhline(chance, color="black", linestyle="--", linewidth=0.9, alpha=0.7)
        if values:
            ax.set_ylim(*y_limits(values, chance, MIN_SPAN if percent else MIN_SPAN_NATS, percent))
        subset = panel_subset(board, panel)
        points = "fast-suite points" if x == "words" else "per-phase points"
        mixed = subset and any(p.limit is None for row in board.rows for p in row.curves.get(panel, []))
        title = panel + (f"\n{'open markers' if mixed else points}: first {subset} items per subtask" if subset
                         else "")
        if panel in final_only:
            title = panel + "\nfinal only: the table's score and interval per row"
            ax.set_xticks([])
            ax.set_xlim(-0.8, len(board.rows) - 0.2)
            ax.set_xlabel("rows (colours as in the legend)")
        else:
            ax.set_xlabel(x_label)
            if x == "words":
                ax.xaxis.set_major_formatter(words_label)
        ax.set_title(title, fontsize=10)
        ax.set_ylabel("score (%)" if percent else f"{metric} ({kind.unit}"
                      + (", lower is better)" if kind.lower_is_better else ")"))
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    handles = [Line2D([], [], color=colors[i % len(colors)], linewidth=1.4, label=key_text(board, row.key))
               for i, row in enumerate(board.rows)]
    handles += [Line2D([], [], color="gray", marker=MARKERS.get(m, "o"), linestyle="none", label=f"scored {m}")
                for m in sorted(methods_seen)]
    if True in fills_seen:
        subsets = sorted({n for panel in panels if (n := panel_subset(board, panel))})
        handles.append(Line2D([], [], color="gray", marker="o", markerfacecolor="none", linestyle="none",
                              label=f"open: first {'/'.join(map(str, subsets))} items per subtask (a subset)"))
        if False in fills_seen:
            handles.append(Line2D([], [], color="gray", marker="o", linestyle="none", label="filled: every item"))
    if any_final:
        handles.append(Line2D([], [], color="gray", marker=FINAL_MARKER, markersize=11, markeredgecolor="black",
                              linestyle="none", label="final only (one point, not a curve)"))
    if any_band:
        handles.append(Patch(color="gray", alpha=0.3, label="95% item interval (mean of the seeds' bounds)"))
    if any_chance:
        handles.append(Line2D([], [], color="black", linestyle="--", linewidth=0.9,
                              label="chance (50%)" if any_chance == "%" else "chance (0 nats: no preference)"
                              if any_chance == "nats" else "chance (50%; a margin's 0 nats)"))
    ncol = min(3, len(handles), ncols)  # a one-panel figure stacks its legend: a wide row would be cut off
    fig.legend(handles=handles, loc="lower center", ncol=ncol, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.03 + 0.035 * math.ceil(len(handles) / ncol), 1, 1))
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, dpi=100, metadata={"Date": None} if fmt == "svg" else None)
    plt.close(fig)
    return buffer.getvalue()
