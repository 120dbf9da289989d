"""Figure-2-style curves of scores per checkpoint."""

from __future__ import annotations

import io
import math

from antlm_bench.leaderboard.definition import MACRO
from antlm_bench.leaderboard.model import Leaderboard
from antlm_bench.leaderboard.text import MARKERS, key_text


def plot_curves(board: Leaderboard, fmt: str = "png", x: str = "epoch") -> bytes | None:
    """Figure-2-style curves: one panel per task (and macro), one line per row, markers by scoring method."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    panels = [c for c in [*board.columns, MACRO] if any(c in r.curves for r in board.rows)]
    if not panels:
        return None
    attr = "tokens_seen" if x == "tokens" else "epoch"
    ncols = min(3, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols, 3.4 * nrows), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    methods_seen: set[str] = set()
    for ax, panel in zip(axes.flat, panels):
        for i, row in enumerate(board.rows):
            curve = [p for p in row.curves.get(panel, []) if getattr(p, attr) is not None]
            if not curve:
                continue
            color = colors[i % len(colors)]
            xs = [getattr(p, attr) for p in curve]
            ys = [100 * p.value for p in curve]
            ax.plot(xs, ys, color=color, linewidth=1.4, label=key_text(board, row.key))
            for xv, yv, p in zip(xs, ys, curve):
                method = p.scoring.split("+")[0].split("/")[0]
                methods_seen.add(method)
                ax.plot([xv], [yv], marker=MARKERS.get(method, "o"), color=color, markersize=5, linestyle="none")
        ax.set_title(panel)
        ax.set_xlabel("tokens seen" if x == "tokens" else "epoch")
        ax.set_ylabel("score (%)")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    handles += [Line2D([], [], color="gray", marker=MARKERS.get(m, "o"), linestyle="none", label=f"scored {m}")
                for m in sorted(methods_seen)]
    labels += [f"scored {m}" for m in sorted(methods_seen)]
    fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.06 + 0.03 * math.ceil(len(labels) / 4), 1, 1))
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, dpi=100, metadata={"Date": None} if fmt == "svg" else None)
    plt.close(fig)
    return buffer.getvalue()

