"""CSV cells that a spreadsheet will not run as formulas ("CSV injection").

A text cell that starts with one of the characters a spreadsheet reads as the start of a formula gets a
leading apostrophe, which spreadsheets show as text. Numbers are written unchanged (a negative number is a
number, not a formula). Every CSV the app produces passes its rows through `safe_row` or `safe_record`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# OWASP, "CSV Injection" (owasp.org/www-community/attacks/CSV_Injection): cells beginning with
# equals, plus, minus, at, tab (0x09) or carriage return (0x0D) are prefixed with a single quote.
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
ESCAPE = "'"


def safe_cell(value: Any) -> Any:
    """`value`, with an apostrophe in front when it is text a spreadsheet would read as a formula."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return ESCAPE + value
    return value


def safe_row(row: Iterable[Any]) -> list[Any]:
    """A row for csv.writer.writerow with every cell made safe."""
    return [safe_cell(value) for value in row]


def safe_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """A row for csv.DictWriter.writerow with every value made safe."""
    return {key: safe_cell(value) for key, value in record.items()}
