"""Host paths taken out of the text viewers read."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phalanx.redaction import redact, redact_host_paths


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        (
            "DataError: /srv/datasets/mnist.npz[x_train]: images contain NaN",
            "DataError: .../mnist.npz[x_train]: images contain NaN",
        ),
        ("not found in /usr/share/datasets/fashion-mnist.", "not found in .../fashion-mnist."),
        ("[Errno 2] No such file: '/home/ana/x.npz'", "[Errno 2] No such file: '.../x.npz'"),
        ("see /var/log/phalanx/run.log; then", "see .../run.log; then"),
        ("PHALANX_DATASETS_DIR=/data/sets", "PHALANX_DATASETS_DIR=.../sets"),
        ("dir /srv/data/ is empty", "dir .../data is empty"),
    ],
)
def test_absolute_paths_keep_only_their_last_component(text: str, redacted: str) -> None:
    assert redact_host_paths(text) == redacted


@pytest.mark.parametrize(
    "text",
    [
        "labels run 1..10 with no 0; subtract 1",
        "npz:sub/mnist.npz[y_train]: label 10",
        "accuracy 1/2, N/A, a / b",
        "see https://sqlalche.me/e/20/e3q8",
        "",
    ],
)
def test_text_without_absolute_paths_is_unchanged(text: str) -> None:
    assert redact_host_paths(text) == text


@given(st.lists(st.sampled_from(["srv", "home", "a b", "x.npz", "..", "é"]), min_size=2))
def test_no_directory_of_a_path_survives(parts: list[str]) -> None:
    path = "/" + "/".join(parts)
    redacted = redact_host_paths(f"error at {path}: bad")
    assert path not in redacted and redacted.startswith("error at .../")


def test_addresses_are_redacted_but_not_clock_times() -> None:
    text = "failed on 192.168.1.20:9092 and [fe80::1]:80 and 2001:db8::7 at 12:30:45"
    assert redact(text) == "failed on <address> and <address> and <address> at 12:30:45"


def test_redact_takes_out_paths_and_addresses_together() -> None:
    assert redact("open('/home/alice/data.npz') on 10.0.0.7") == (
        "open('.../data.npz') on <address>"
    )
