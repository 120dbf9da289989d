"""One self-contained HTML page: sortable tables, plots inline."""

from __future__ import annotations

import base64
import html

from antlm_bench import __version__
from antlm_bench.results.leaderboard.comparability import limit_text
from antlm_bench.results.leaderboard.definition import metric_kind
from antlm_bench.results.leaderboard.model import Cell, Leaderboard
from antlm_bench.results.leaderboard.plots import curve_caption, plot_curves
from antlm_bench.results.leaderboard.text import (
    SIGNAL_HEADER,
    SIGNAL_NOTE,
    common_text,
    design_text,
    interval_text,
    is_significant,
    is_swept,
    key_text,
    mde_text,
    method_lines,
    p_text,
    row_is_better,
    runs_text,
    shown_keys,
    signal_table,
    unit_text,
    value_text,
    verdict,
)

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem;color:#1b1b1b;max-width:1400px}
table{border-collapse:collapse;margin:1rem 0;font-size:14px}
th,td{border-bottom:1px solid #ddd;padding:4px 10px;text-align:right;white-space:nowrap}
th{background:#f3f3f3;cursor:pointer;user-select:none}
th.sorted-desc::after{content:" \\25BC"}th.sorted-asc::after{content:" \\25B2"}
td.key,th.key{text-align:left}
.ci,.sd,.m{color:#666;font-size:12px}
td.macro{font-weight:bold}
tr.sig-up td{background:#eaf7ea}tr.sig-down td{background:#fbeaea}
.notes{color:#555;font-size:13px}
img{max-width:100%}
"""

_JS = """
(function(){
  function val(cell){var v=cell.getAttribute('data-value');if(v===null)return cell.textContent.trim();
    return v===''?null:parseFloat(v);}
  function sortTable(table,col,desc){
    var body=table.tBodies[0];var rows=Array.prototype.slice.call(body.rows);
    rows.sort(function(a,b){var x=val(a.cells[col]),y=val(b.cells[col]);
      if(x===null&&y===null)return 0;if(x===null)return 1;if(y===null)return -1;
      if(typeof x==='number'&&typeof y==='number')return desc?y-x:x-y;
      return desc?String(y).localeCompare(String(x)):String(x).localeCompare(String(y));});
    rows.forEach(function(r){body.appendChild(r);});
    Array.prototype.forEach.call(table.tHead.rows[0].cells,function(th,i){
      th.classList.remove('sorted-asc','sorted-desc');if(i===col)th.classList.add(desc?'sorted-desc':'sorted-asc');});
  }
  Array.prototype.forEach.call(document.querySelectorAll('table.sortable'),function(table){
    var heads=table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads,function(th,i){th.addEventListener('click',function(){
      // best first: the highest score, the lowest rank
      sortTable(table,i,th.classList.contains('rank')?th.classList.contains('sorted-asc')
                                                    :!th.classList.contains('sorted-desc'));});});
    // the rows come ranked (the board's one ranking, as in every format); a link ending in #sort=<column>
    // opens the page sorted by that column (best first), the ranks staying as they are
    var m=/^#sort=(.+)$/.exec(window.location.hash);
    if(m&&table.id==='leaderboard'){var name=decodeURIComponent(m[1]);
      Array.prototype.forEach.call(heads,function(th,i){if(th.textContent.trim()===name){sortTable(table,i,true);}});}
  });
})();
"""


def _html_cell(cell: Cell | None, css: str = "") -> str:
    cls = f' class="{css}"' if css else ""
    if cell is None:
        return f'<td{cls} data-value="">-</td>'
    parts = [html.escape(value_text(cell.value, cell.metric))]
    if interval_text(cell):
        parts.append(f'<span class="ci">{html.escape(interval_text(cell).strip())}</span>')
    if cell.spread is not None:
        parts.append(f'<span class="sd">±{value_text(cell.spread, cell.metric)}</span>')
    elif cell.n_seeds == 1:
        parts.append('<span class="sd">(1 seed)</span>')
    if cell.scoring != "auto":
        parts.append(f'<span class="m">{html.escape(cell.scoring)}</span>')
    if cell.limit is not None:
        parts.append(f'<span class="limit">({html.escape(limit_text(cell.limit))})</span>')
    # a lower-is-better metric sorts by its negative, so that "best first" holds for every column
    key = -cell.value if metric_kind(cell.metric).lower_is_better else cell.value
    return f'<td{cls} data-value="{key:.10g}">{" ".join(parts)}</td>'


def render_html(board: Leaderboard, x: str = "epoch") -> str:
    """One self-contained page: inline CSS, a few lines of JS (sortable columns), the plot as inline PNG."""
    e = html.escape
    shown = shown_keys(board)
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>{e(board.definition.name)} — antlm-bench leaderboard</title>", f"<style>{_CSS}</style></head>",
           "<body>", f"<h1>{e(board.definition.name)}</h1>"]
    if board.definition.description:
        out.append(f"<p>{e(board.definition.description)}</p>")
    if common_text(board):
        out.append(f"<p>All rows: {e(common_text(board))}.</p>")
    # rows go out ranked as the board ranked them (``board._rank_key``), the same order as every other format
    out.append('<table id="leaderboard" class="sortable" data-ranked="yes"><thead><tr>')
    out.append('<th class="key rank sorted-asc">#</th>' + "".join(f'<th class="key">{e(board.group_by[i])}</th>' for i in shown)
               + "<th>runs</th>" + "".join(f"<th>{e(c)}</th>" for c in board.columns) + f"<th>{e(board.macro_label)}</th>")
    out.append("</tr></thead><tbody>")
    for rank, row in enumerate(board.rows, 1):
        out.append("<tr>" + f'<td class="rank key" data-value="{rank}">{rank}</td>'
                   + "".join(f'<td class="key">{e(row.key[i])}</td>' for i in shown)
                   + f'<td data-value="{len(row.run_ids)}">{e(runs_text(row))}</td>'
                   + "".join(_html_cell(row.cells.get(c)) for c in board.columns)
                   + _html_cell(row.macro, "macro") + "</tr>")
    out.append("</tbody></table>")
    out.append("<noscript><p>Enable JavaScript to sort by another column.</p></noscript>")
    if board.comparisons:
        out.append(f"<h2>Gaps to {e(key_text(board, board.reference))}</h2>")
        out.append('<table id="gaps" class="sortable"><thead><tr><th class="key">row</th><th class="key">task</th>'
                   "<th>gap</th><th>95% CI</th><th>unit</th><th>p</th><th>MDE</th><th class=\"key\">test</th>"
                   '<th class="key">verdict</th></tr></thead><tbody>')
        for c in board.comparisons:
            swept = is_swept(board, c)  # a sweep decided it: descriptive here, no p-value, the sweep's verdict
            css = "" if not is_significant(board, c) else (' class="sig-up"' if row_is_better(c) else
                                                             ' class="sig-down"')
            ci = (f"[{value_text(c.low, c.metric, True)}, {value_text(c.high, c.metric, True)}]"
                  if c.low is not None else "-")
            pv = "" if c.p_value is None or swept else f"{c.p_value:.4g}"
            pv_text = "-" if c.p_value is None or swept else p_text(c.p_value).removeprefix("p=")
            sig = (e(verdict(c, board)) if swept else "-" if c.significant is None
                   else verdict(c).split(" (")[0])
            out.append(f'<tr{css}><td class="key">{e(key_text(board, c.row))}</td><td class="key">{e(board.column_label(c.column))}</td>'
                       f'<td data-value="{c.delta:.10g}">{value_text(c.delta, c.metric, True)}</td><td>{ci}</td>'
                       f'<td class="key">{e(unit_text(c.metric))}</td>'
                       f'<td data-value="{pv}">{e(pv_text)}</td>'
                       f'<td data-value="{"" if c.mde is None else f"{c.mde:.10g}"}">{mde_text(c)}</td>'
                       f'<td class="key">{e(design_text(c))}</td>'
                       f'<td class="key">{sig}</td></tr>')
        out.append("</tbody></table>")
    if len(board.rows) > 1 and board.signal_noise:
        out.append("<h2>Signal and noise per task</h2>")
        out.append('<table id="signal"><thead><tr>' + "".join(
            f'<th class="key">{e(h)}</th>' if i in (0, 4) else f"<th>{e(h)}</th>" for i, h in enumerate(SIGNAL_HEADER))
                   + "</tr></thead><tbody>")
        for line in signal_table(board):
            out.append("<tr>" + "".join(f'<td class="key">{e(v)}</td>' if i in (0, 4) else f"<td>{e(v)}</td>"
                                        for i, v in enumerate(line)) + "</tr>")
        out.append(f'</tbody></table><p class="notes">{e(SIGNAL_NOTE)}</p>')
    image = plot_curves(board, "png", x)
    if image is not None:
        out.append("<h2>Scores per checkpoint</h2>")
        out.append(f'<img alt="scores per checkpoint" src="data:image/png;base64,{base64.b64encode(image).decode()}">')
        out.append(f'<p class="caption">{e(curve_caption(board))}</p>')
    out.append('<div class="notes"><ul>' + "".join(f"<li>{e(line)}</li>" for line in method_lines(board)))
    for row in board.rows:
        for note in row.notes:
            out.append(f"<li>note, {e(key_text(board, row.key))}: {e(note)}</li>")
    for note in board.notes:
        out.append(f"<li>note: {e(note)}</li>")
    out.append("</ul>")
    if board.decisions:
        out.append("<h2>Sweep decision</h2><pre>" + e("\n".join(board.decisions)) + "</pre>")
    out.append(f"<p>antlm-bench {e(__version__)}, results as of {e(board.results_as_of)}</p></div>")
    out.append(f"<script>{_JS}</script></body></html>")
    return "\n".join(out)

