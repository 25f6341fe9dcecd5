"""Client names: visible characters only, trimmed, one way to write each."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phalanx_api.names import MAX_CLIENT_NAME, client_name, refused


@pytest.mark.parametrize(
    ("given_name", "stored"),
    [
        ("worker-1", "worker-1"),
        ("  worker 1\t", "worker 1"),
        ("edge   node", "edge node"),
        ("caf\u0065\u0301", "caf\u00e9"),
        ("\u00a0padded\u00a0", "padded"),
        ("名前", "名前"),
        ("عامل", "عامل"),  # right-to-left text itself is fine; only the controls are not
    ],
)
def test_a_name_is_stored_trimmed_collapsed_and_nfc(given_name: str, stored: str) -> None:
    assert client_name(given_name) == stored


@pytest.mark.parametrize(
    "char",
    [
        "\u202e",
        "\u202a",
        "\u2066",
        "\u2069",
        "\u061c",
        "\u200b",
        "\u200d",
        "\ufeff",
        "\x00",
        "\x1b",
        "\u2028",
        "\u2029",
        "\ue000",
        "\u3000",
        "\u2800",
        "\u115f",
    ],
)
def test_a_hidden_or_reordering_character_inside_a_name_is_refused_and_named(char: str) -> None:
    with pytest.raises(ValueError, match=f"U\\+{ord(char):04X}"):
        client_name(f"a{char}b")


@pytest.mark.parametrize("value", ["", "   ", "\t\n"])
def test_an_empty_name_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match="empty"):
        client_name(value)


def test_a_name_over_the_limit_is_refused() -> None:
    assert client_name("x" * MAX_CLIENT_NAME) == "x" * MAX_CLIENT_NAME
    with pytest.raises(ValueError, match=f"at most {MAX_CLIENT_NAME}"):
        client_name("x" * (MAX_CLIENT_NAME + 1))


@given(st.text(max_size=40))
def test_a_stored_name_holds_no_refused_character_and_is_stored_as_is_again(value: str) -> None:
    try:
        name = client_name(value)
    except ValueError:
        return
    assert not any(refused(char) for char in name)
    assert unicodedata.is_normalized("NFC", name)
    assert client_name(name) == name
