"""Lists in plain English, shared by detection's evidence and the dashboard."""

from __future__ import annotations

import doctest

import pytest

from phalanx import english_list
from phalanx.english_list import join_words, name_numbers


@pytest.mark.parametrize(
    ("words", "joined"),
    [([], ""), (["a"], "a"), (["a", "b"], "a and b"), (["a", "b", "c"], "a, b and c")],
)
def test_words_are_joined_with_commas_and_a_final_and(words: list[str], joined: str) -> None:
    assert join_words(words) == joined


def test_one_number_takes_the_singular_noun() -> None:
    assert name_numbers("worker", "workers", [3]) == "worker 3"


def test_several_numbers_take_the_plural_noun_in_the_order_given() -> None:
    assert name_numbers("file", "files", [9, 4]) == "files 9 and 4"
    assert name_numbers("Worker", "Workers", [0, 1, 2]) == "Workers 0, 1 and 2"


def test_a_long_list_names_the_first_ones_and_counts_the_rest() -> None:
    assert name_numbers("worker", "workers", list(range(13))) == (
        "workers 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 and 3 more"
    )
    assert name_numbers("worker", "workers", list(range(10))).endswith("8 and 9")
    assert name_numbers("worker", "workers", [5, 6, 7], shown=2) == "workers 5, 6 and 1 more"


def test_the_examples_in_the_docstring_hold() -> None:
    assert doctest.testmod(english_list).failed == 0
