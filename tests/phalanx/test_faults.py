from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phalanx.faults import (
    MAX_CAUSE_CHARS,
    common_failure,
    describe,
    fault_kind,
    fault_kind_named,
    one_line,
)
from phalanx.local_training import ModelDataMismatchError

RAY_TRACEBACK = """\x1b[36mray::ClientAppActor.run()\x1b[39m (pid=4242, ip=10.1.2.3)
Traceback (most recent call last):
  File "/home/ops/.venv/lib/python3.11/site-packages/flwr/simulation/ray_transport/ray_actor.py", \
line 63, in run
    out_message = app(message=message, context=context)
  File "/srv/phalanx/platform/phalanx/data.py", line 212, in load_dataset
    raise ValueError(f"{path}: pixels hold NaN")
ValueError: /srv/data/train.npz: pixels hold NaN

The above exception was the direct cause of the following exception:

ray.exceptions.RayTaskError(ClientAppException): ray::ClientAppActor.run()
"""


def test_a_ray_traceback_becomes_the_line_of_the_exception_that_ended_it() -> None:
    assert one_line(RAY_TRACEBACK) == "ValueError: .../train.npz: pixels hold NaN"


def test_flowers_wrapped_reason_is_unwrapped() -> None:
    wrapped = "<class 'flwr.clientapp.client_app.ClientAppException'>:<'\nException \
ClientAppException occurred. Message: KeyError: 'weights''>"
    assert one_line(wrapped) == "KeyError: 'weights'"
    assert one_line("<class 'ZeroDivisionError'>:<'division by zero'>") == (
        "ZeroDivisionError: division by zero"
    )


def test_control_bidi_and_zero_width_characters_are_removed() -> None:
    text = "Value\u202eError\u200b: bad\x07 \x1b[31mred\x1b[0m\r\nnext"
    assert one_line(text) == "next"
    assert one_line("Error\u202e: x\u2066y") == "Error : x y"


def test_a_long_cause_is_cut_with_an_ellipsis() -> None:
    line = one_line("RuntimeError: " + "x" * 5000)
    assert len(line) == MAX_CAUSE_CHARS
    assert line.endswith("…")


def test_nothing_printable_is_said_as_such() -> None:
    assert one_line("") == "no reason given"
    assert one_line("\x1b[0m\n\u200b\n") == "no reason given"


@given(st.text())
def test_one_line_is_one_short_printable_line_whatever_it_is_given(text: str) -> None:
    line = one_line(text)
    assert line
    assert "\n" not in line and "\r" not in line and "\x1b" not in line
    assert len(line) <= MAX_CAUSE_CHARS
    assert not any(ch in line for ch in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def test_describe_names_the_exception_type() -> None:
    assert describe(FileNotFoundError("/data/x.npz")) == "FileNotFoundError: .../x.npz"


def test_a_minority_of_failures_lets_the_round_go_on() -> None:
    assert common_failure(["KeyError: x"] * 3, tasked=7) is None
    assert common_failure([], tasked=0) is None


def test_most_workers_failing_alike_is_named_with_the_count() -> None:
    assert common_failure(["ValueError: bad pixels"] * 4, tasked=7) == (
        "4 of 7 workers failed with the same error: ValueError: bad pixels"
    )


def test_most_workers_failing_differently_names_the_commonest_cause() -> None:
    causes = ["ValueError: a", "ValueError: a", "KeyError: b", "OSError: c"]
    assert common_failure(causes, tasked=7) == "4 of 7 workers failed (2 with: ValueError: a)"


def test_data_that_does_not_fit_the_model_is_a_data_mismatch_and_anything_else_a_worker_error() -> (
    None
):
    assert fault_kind(ModelDataMismatchError("x")) == "data_mismatch"
    assert fault_kind(ValueError("x")) == "worker_error"
    assert fault_kind(RuntimeError("x")) == "worker_error"


class PretenderError(Exception):
    fault_kind = "outlier"


@pytest.mark.parametrize("named", ["outlier", "bad_signature", "unchecked_reply", 3, None])
def test_a_failure_can_name_only_a_workers_own_fault_kinds(named: object) -> None:
    assert fault_kind_named(named) == "worker_error"
    assert fault_kind(PretenderError()) == "worker_error"
    assert fault_kind_named("data_mismatch") == "data_mismatch"
