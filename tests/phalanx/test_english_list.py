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
    evens = list(range(0, 40, 2))
    assert name_numbers("worker", "workers", evens) == (
        "workers 0, 2, 4, 6, 8, 10, 12, 14, 16, 18 and 10 more"
    )
    assert name_numbers("worker", "workers", [5, 7, 9, 11, 13, 15, 17, 19], shown=2) == (
        "workers 5, 7 and 6 more"
    )


def test_a_list_is_never_cut_to_hide_only_a_few() -> None:
    fourteen = list(range(0, 28, 2))
    assert name_numbers("worker", "workers", fourteen).endswith("22, 24 and 26")
    assert "more" not in name_numbers("worker", "workers", list(range(0, 30, 2)))  # 15: 5 hidden
    assert name_numbers("worker", "workers", list(range(0, 32, 2))).endswith("and 6 more")


def test_consecutive_numbers_are_named_as_runs() -> None:
    assert name_numbers("worker", "workers", [0, 1, 2, 3, *range(5, 15)]) == (
        "workers 0, 1, 2, 3 and 5 to 14"
    )
    assert name_numbers("worker", "workers", [0, *range(2, 7)]) == "workers 0 and 2 to 6"
    assert name_numbers("worker", "workers", list(range(1000))) == "workers 0 to 999"
    assert name_numbers("file", "files", [9, 8, 7, 6, 5]) == "files 9, 8, 7, 6 and 5"  # as given


def test_the_examples_in_the_docstring_hold() -> None:
    assert doctest.testmod(english_list).failed == 0
