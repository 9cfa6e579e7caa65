"""HTML tables: the console's rich tables carried over cell for cell (the page says what
`run`, `sweep` and `capacity` print, from the same code), and small key/value tables.

Every cell is text: rich markup is dropped (``[red]missed[/]`` -> ``missed``) and the rest
escaped, so nothing read from a results folder can become markup in the page.
"""

from __future__ import annotations

from html import escape

from rich.table import Table
from rich.text import Text

NUM_MAX = 32  # characters: longer right-justified cells are sentences, not numbers


def plain(cell) -> str:
    """A rich cell (markup string or Text) as plain text."""
    if isinstance(cell, Text):
        return cell.plain
    try:
        return Text.from_markup(str(cell)).plain
    except Exception:  # rich's MarkupError: a value that looks like markup; shown as is
        return str(cell)


def from_rich(t: Table) -> str:
    """``t`` as an HTML table; the first column reads as a label, the rest as numbers when
    rich right-justified them."""
    cols = t.columns
    head = "".join(f"<th>{escape(plain(c.header))}</th>" for c in cols) if t.show_header else ""
    rows = []
    for cells in zip(*(list(c.cells) for c in cols)):
        tds = "".join(_td(c, plain(v), i == 0) for i, (c, v) in enumerate(zip(cols, cells)))
        rows.append(f"<tr>{tds}</tr>")
    caption = f"<caption>{escape(plain(t.title))}</caption>" if t.title else ""
    thead = f"<thead><tr>{head}</tr></thead>" if head else ""
    return f"<table>{caption}{thead}<tbody>{''.join(rows)}</tbody></table>"


def _td(col, text: str, label: bool) -> str:
    """A cell; a short right-justified one (a number) stays on one line, aligned right,
    a long one (a verdict's reason) wraps; the first column is the row's label."""
    num = not label and col.justify == "right" and len(text) <= NUM_MAX
    return f'<td class="{"num" if num else "text"}">{escape(text)}</td>'


def key_values(rows, caption: str = "") -> str:
    """A two-column table of (label, value) pairs."""
    body = "".join(f'<tr><th scope="row">{escape(str(k))}</th><td>{escape(str(v))}</td></tr>'
                   for k, v in rows)
    cap = f"<caption>{escape(caption)}</caption>" if caption else ""
    return f'<table class="kv">{cap}<tbody>{body}</tbody></table>'
