"""The pieces every report page is drawn with: the page shell (inline CSS), and bar charts as inline SVG.

Everything is text in one file: no script, font or style sheet from anywhere else, so a page opens the same
from a laptop, an air-gapped cluster or an attachment. Colours are fixed per meaning, so two reports compare
at a glance: the summary bar's three (:data:`MIX_COLORS`) appear nowhere else on a page.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

# The summary bar only: judged and passed, judged and failed, no verdict.
MIX_COLORS = {"passed": "#1f9d55", "failed": "#e8590c", "no verdict": "#4263eb"}
# Everything else: one colour per outcome, in order of first appearance.
PALETTE = ("#2f9e44", "#f08c00", "#c92a2a", "#862e9c", "#1971c2", "#0c8599", "#5c940d", "#e64980", "#495057",
           "#a61e4d", "#364fc7", "#087f5b", "#d9480f", "#5f3dc4", "#868e96")
STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1100px; color: #212529; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin-top: 32px; }
table { border-collapse: collapse; margin: 8px 0; } td, th { padding: 3px 10px; border-bottom: 1px solid #dee2e6;
text-align: left; vertical-align: top; } td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
.muted { color: #6c757d; } .legend span { display: inline-block; margin-right: 14px; }
.swatch { display: inline-block; width: 11px; height: 11px; margin-right: 4px; vertical-align: -1px; }
code, pre { font: 12px ui-monospace, monospace; } pre { white-space: pre-wrap; max-height: 12em; overflow: auto; }
"""


def page(title: str, body: str, style: str = "") -> str:
    """A whole HTML document: ``body`` under a heading, with the shared style and ``style``."""
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{escape(title)}</title>"
            f"<style>{STYLE}{style}</style></head>\n<body><h1>{escape(title)}</h1>\n{body}\n</body></html>\n")


def colors(names: Sequence[str]) -> dict[str, str]:
    """A colour per name: ``passed`` always green, the others from :data:`PALETTE` in order."""
    chosen = {"passed": PALETTE[0]}
    for name in names:
        if name not in chosen:
            chosen[name] = PALETTE[1 + (len(chosen) - 1) % (len(PALETTE) - 1)]
    return {name: chosen[name] for name in names}


def legend(counts: Mapping[str, int], palette: Mapping[str, str]) -> str:
    items = "".join(f"<span><i class=\"swatch\" style=\"background:{palette[name]}\"></i>{escape(name)} "
                    f"<b>{count}</b></span>" for name, count in counts.items())
    return f"<div class=\"legend\">{items}</div>"


def stacked_bar(counts: Mapping[str, int], palette: Mapping[str, str], *, width: int = 1000,
                height: int = 26) -> str:
    """One horizontal bar split by ``counts`` (widths exactly proportional, in whole pixels)."""
    total = sum(counts.values()) or 1
    parts, x = [], 0
    items = [(name, count) for name, count in counts.items() if count]
    for position, (name, count) in enumerate(items):
        right = width if position == len(items) - 1 else round(width * (sum(c for _, c in items[:position + 1])
                                                                          / total))
        parts.append(f"<rect x=\"{x}\" y=\"0\" width=\"{right - x}\" height=\"{height}\" fill=\"{palette[name]}\">"
                     f"<title>{escape(name)}: {count}</title></rect>")
        x = right
    return (f"<svg width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" role=\"img\" "
            f"shape-rendering=\"crispEdges\">{''.join(parts)}</svg>")


def columns(series: Sequence[Mapping[str, int]], labels: Sequence[str], palette: Mapping[str, str], *,
            width: int = 1000, height: int = 180) -> str:
    """Stacked columns, one per entry of ``series`` (name -> count), labelled underneath by ``labels``."""
    top = max((sum(entry.values()) for entry in series), default=0) or 1
    step = width / max(1, len(series))
    plot = height - 20
    parts = [f"<line x1=\"0\" y1=\"{plot}\" x2=\"{width}\" y2=\"{plot}\" stroke=\"#adb5bd\"/>",
             f"<text x=\"2\" y=\"11\" font-size=\"11\" fill=\"#6c757d\">{top}</text>"]
    for index, (entry, label) in enumerate(zip(series, labels)):
        y = plot
        for name, count in entry.items():
            tall = plot * count / top
            y -= tall
            parts.append(f"<rect x=\"{index * step + 1:.1f}\" y=\"{y:.1f}\" width=\"{max(1.0, step - 2):.1f}\" "
                         f"height=\"{tall:.1f}\" fill=\"{palette[name]}\"><title>{escape(label)}: {escape(name)} "
                         f"{count}</title></rect>")
        if index % max(1, len(series) // 10) == 0:
            parts.append(f"<text x=\"{index * step + 1:.1f}\" y=\"{height - 5}\" font-size=\"11\" "
                         f"fill=\"#6c757d\">{escape(label)}</text>")
    return f"<svg width=\"{width}\" height=\"{height}\" role=\"img\">{''.join(parts)}</svg>"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], numeric: Sequence[bool] | None = None) -> str:
    """An HTML table; cells are escaped, except those given as :class:`Raw`."""
    numeric = numeric or [False] * len(headers)
    head = "".join(f"<th{' class=n' if n else ''}>{escape(h)}</th>" for h, n in zip(headers, numeric))
    body = "".join("<tr>" + "".join(f"<td{' class=n' if n else ''}>{cell if isinstance(cell, Raw) else escape(str(cell))}"
                                    f"</td>" for cell, n in zip(row, numeric)) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


class Raw(str):
    """Markup to put into a table cell as it is (already escaped)."""
