"""Text inside the markdown tables the project generates (references/, bench/RESULTS.md): one cell a value.

Imports nothing from the project.
"""

from __future__ import annotations


def table_cell(text: str) -> str:
    """Text for one markdown table cell: pipes escaped (a bare one would start a new column), lines joined.

    >>> table_cell("a | b\\n  c")
    'a \\\\| b c'
    """
    return " ".join(text.replace("|", "\\|").split())
