"""Numbers, sizes and durations written for people (phalanx_api.pages.formatting)."""

from __future__ import annotations

from phalanx_api.pages.formatting import ago, duration, human_bytes, percent


def test_numbers_are_written_for_people() -> None:
    assert human_bytes(4_271_226) == "4.27 MB" and human_bytes(512) == "512 B"
    assert percent(0.64345) == "64.3%" and percent(None) == "–"
    assert duration(42.1) == "42.1 s" and duration(185) == "3 min 5 s"
    assert ago(None) == "never"
