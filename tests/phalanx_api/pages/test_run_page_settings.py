from __future__ import annotations

import pytest

from phalanx_api.pages.run_page import tolerated_inputs


@pytest.mark.parametrize(
    ("f", "words"),
    [
        ("auto", ", tolerating in each round the files that unproven liars could have supplied"),
        (3, ", tolerating 3"),
        (0, ""),
        (None, ""),
    ],
)
def test_the_settings_say_how_many_inputs_the_rule_tolerates(f: object, words: str) -> None:
    assert tolerated_inputs(f) == words
