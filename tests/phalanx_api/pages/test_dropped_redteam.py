"""Red team of the run page's "Files left out" (`phalanx_api.pages.dropped`, issue 17).

All held: a stored record is hostile input, so these fail if a malformed one raises
(a 500 on the run page) instead of hiding the section, or if a digest reaches the HTML
unescaped.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest

from phalanx_api.pages.dropped import dropped_files
from phalanx_api.templating import TEMPLATES_DIR, make_templates


def record(**dropped: Any) -> dict[str, Any]:
    entry = {"file": 3, "reason": "disputed", "holders": [0, 1, 2], "digests": [[0, "ab"]]}
    entry.update(dropped)
    return {
        "version": 2,
        "rule": "unanimity",
        "replied": [[0, 2]],
        "flagged": [],
        "degrees": [],
        "conflicts": [],
        "num_conflicts": 0,
        "outside_max_cliques": [],
        "num_max_cliques": 2,
        "suspects": [0, 1],
        "dropped": [entry],
        "num_dropped": 1,
    }


@pytest.mark.parametrize(
    "hostile",
    [
        {"file": True},
        {"file": -1},
        {"file": math.nan},
        {"file": "3"},
        {"reason": "<b>why</b>"},
        {"holders": [0, [1]]},
        {"holders": [10_000]},
        {"holders": list(range(10_001))},
        {"digests": [[0, ""]]},
        {"digests": [[0, "a" * 129]]},
        {"digests": [[0, 7]]},
        {"digests": [[True, "ab"]]},
        {"digests": [[0, "ab", "cd"]]},
        {"digests": {"0": "ab"}},
    ],
)
def test_a_malformed_dropped_entry_hides_the_section_rather_than_failing(
    hostile: dict[str, Any],
) -> None:
    assert dropped_files(4, record(**hostile)) is None


@pytest.mark.parametrize(
    "stored",
    [
        None,
        [],
        "x",
        {"version": True},
        {**record(), "num_dropped": 0.5},
        {**record(), "suspects": [9]},
    ],
)
def test_a_malformed_record_hides_the_section(stored: Any) -> None:
    assert dropped_files(4, stored) is None


def test_a_digest_that_is_markup_is_escaped_on_the_run_page() -> None:
    """Renders the run page's own "Files left out" section, cut from its template."""
    dropped = dropped_files(4, record(digests=[[0, "<img src=x onerror=alert(1)>"]]))
    assert dropped is not None
    source = (TEMPLATES_DIR / "_run_panels.html").read_text()
    start = source.index("{% if page.dropped %}")
    section = source[start : source.index("</section>", start)] + "</section>{% endif %}"
    text = make_templates().env.from_string(section).render(page=SimpleNamespace(dropped=dropped))
    assert "<img" not in text
    assert "&lt;img src=x" in text
