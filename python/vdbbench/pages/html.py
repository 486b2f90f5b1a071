"""What both pages share: the HTML document with plotly.js inlined, escaping, tables, figures."""

from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any, Iterable, Sequence

# Figures resize with the window; no plotly logo; the camera button saves a PNG of that plot.
PLOT_CONFIG = {"displaylogo": False, "responsive": True, "toImageButtonOptions": {"format": "png", "scale": 2}}

# One colour per index or outcome series, stable across the figures of a page (tab10).
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf")

_CSS = """
:root { --fg: #1d2125; --muted: #5f6b76; --line: #d9dee3; --bg-soft: #f5f7f9; --accent: #1a9850; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       margin: 0 auto; padding: 18px 26px 40px; max-width: 1320px; }
h1 { font-size: 22px; margin: 4px 0 2px; } h2 { font-size: 17px; margin: 26px 0 8px; }
h3 { font-size: 15px; margin: 16px 0 6px; }
.muted, .note { color: var(--muted); } .note { font-size: 12.5px; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; font-weight: 600;
         vertical-align: middle; background: var(--bg-soft); border: 1px solid var(--line); }
.badge.warn { background: #fff4e0; border-color: #f0b35a; color: #8a4b00; }
.badge.good { background: #e6f4ea; border-color: #7cc48c; color: #1b5e20; }
.badge.bad { background: #fde8e6; border-color: #e8958b; color: #8e1c12; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 6px 0; }
dl.facts dt { color: var(--muted); } dl.facts dd { margin: 0; overflow-wrap: anywhere; }
.cards { display: flex; flex-wrap: wrap; gap: 8px; margin: 10px 0; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 6px 12px; min-width: 108px; background: #fff; }
.card .v { font-size: 19px; font-weight: 650; } .card .k { color: var(--muted); font-size: 12px; }
table.data { border-collapse: collapse; margin: 6px 0 4px; font-size: 13px; }
table.data th, table.data td { border-bottom: 1px solid var(--line); padding: 3px 9px; text-align: right;
                               vertical-align: top; }
table.data th { background: var(--bg-soft); font-weight: 600; position: sticky; top: 0; }
table.data td.l, table.data th.l { text-align: left; }
table.data tr.ours td { font-weight: 650; } table.data tr.missed td { color: #b2182b; }
table.data tr.clickable { cursor: pointer; } table.data tr.clickable:hover td { background: #eef5ff; }
table.data tr.selected td { background: #dcebff; }
.wrap { overflow-x: auto; }
.plot { width: 100%; min-height: 420px; }
/* Two columns from the start (a plot is drawn as soon as it is parsed, before its neighbour
   exists), one on narrow windows. */
.grid2 { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 8px 18px; }
@media (max-width: 1100px) { .grid2 { grid-template-columns: minmax(0, 1fr); } }
pre { background: var(--bg-soft); border: 1px solid var(--line); border-radius: 6px; padding: 8px 10px;
      overflow: auto; font-size: 12.5px; line-height: 1.35; white-space: pre-wrap; overflow-wrap: anywhere; }
pre.diff { white-space: pre; max-height: 560px; }
pre.diff .add { color: #116329; background: #e6ffec; display: inline-block; min-width: 100%; }
pre.diff .del { color: #82071e; background: #ffebe9; display: inline-block; min-width: 100%; }
pre.diff .hunk { color: #0550ae; } pre.diff .meta { color: var(--muted); font-weight: 600; }
h4 { font-size: 13.5px; margin: 12px 0 4px; }
#detail { border: 1px solid var(--line); border-radius: 8px; padding: 4px 16px 12px; margin-top: 10px; }
footer { margin-top: 34px; color: var(--muted); font-size: 12px; }
"""


class Raw(str):
    """Text that is already HTML: tables and pages insert it as it is."""


def esc(value: Any) -> str:
    return value if isinstance(value, Raw) else html.escape("" if value is None else str(value), quote=True)


def _finite(obj: Any) -> Any:
    """NaN and infinities (Python's json writes them to a journal; JSON has no such numbers) as
    null: the page shows them as not measured instead of failing to be written."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def script_json(obj: Any) -> str:
    """JSON that is safe inside a <script> element: no `</script>`, `<!--` or line separator in
    the data (a diff or a model's message may hold any of them) can end the script early."""
    text = json.dumps(_finite(obj), default=str, ensure_ascii=False, allow_nan=False)
    for ch, code in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, code)
    return text


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], left: Sequence[int] = (0,),
          row_attrs: Sequence[str] | None = None, id: str | None = None) -> Raw:
    """An HTML table; columns whose index is in `left` are left-aligned (text), the others right
    (figures); `row_attrs` adds attributes (class, data-*) to each <tr>."""
    head = "".join(f'<th class="{"l" if i in left else ""}">{esc(h)}</th>' for i, h in enumerate(headers))
    body = []
    for n, row in enumerate(rows):
        attrs = f" {row_attrs[n]}" if row_attrs and row_attrs[n] else ""
        cells = "".join(f'<td class="{"l" if i in left else ""}">{esc(c)}</td>' for i, c in enumerate(row))
        body.append(f"<tr{attrs}>{cells}</tr>")
    ident = f' id="{esc(id)}"' if id else ""
    return Raw(f'<div class="wrap"><table class="data"{ident}><thead><tr>{head}</tr></thead>'
               f'<tbody>{"".join(body)}</tbody></table></div>')


def facts(pairs: Iterable[tuple[str, Any]]) -> Raw:
    """A definition list of (label, value) pairs; None values are left out."""
    items = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in pairs if v is not None and v != "")
    return Raw(f'<dl class="facts">{items}</dl>')


def cards(pairs: Iterable[tuple[str, Any]]) -> Raw:
    items = "".join(f'<div class="card"><div class="v">{esc(v)}</div><div class="k">{esc(k)}</div></div>'
                    for k, v in pairs)
    return Raw(f'<div class="cards">{items}</div>')


def figure(fig, div_id: str, height: int = 440) -> Raw:
    """A plotly figure as a <div> and the script that draws it (plotly.js is in the document's head)."""
    fig.update_layout(height=height, template="plotly_white", margin=dict(l=60, r=20, t=50, b=50))
    return Raw(fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config=PLOT_CONFIG,
                           default_width="100%", default_height=f"{height}px"))


def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def document(title: str, body: str, script: str = "") -> str:
    """The whole page: one file holding the styles, plotly.js, the body and the page's own script."""
    import plotly

    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        # No favicon request either: the page asks for nothing at all when opened.
        "<link rel=\"icon\" href=\"data:,\">"
        f"<title>{esc(title)}</title><style>{_CSS}</style>"
        f"<script>/* plotly.js {plotly.__version__}, inlined: the page needs no network */\n{_plotly_js()}\n</script>"
        f"</head><body>\n{body}\n"
        # Once the whole page is laid out, every plot takes its container's final width.
        + "<script>window.addEventListener('load', () => document.querySelectorAll('.plotly-graph-div')"
        ".forEach(g => Plotly.Plots.resize(g)));</script>\n"
        + (f"<script>\n{script}\n</script>\n" if script else "")
        + "</body></html>\n"
    )


def write(path: str | Path, text: str) -> Path:
    """Write the page atomically (a half-written page is never left behind)."""
    import os

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path
