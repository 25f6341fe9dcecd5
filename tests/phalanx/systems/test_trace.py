from __future__ import annotations

import os
import runpy
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phalanx.config import MAX_WORKERS
from phalanx.systems import TraceError, TraceRow, load_trace, parse_trace
from phalanx.systems.trace import MAX_TRACE_BYTES, MAX_TRACE_ROWS

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "traces" / "devices-100.csv"
HEADER = "worker,seconds_per_sample,up_bytes_per_s,down_bytes_per_s"


def _refusal(text: str | bytes) -> str:
    data = text.encode() if isinstance(text, str) else text
    with pytest.raises(TraceError) as info:
        parse_trace(data, source="t.csv")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("trace t.csv")
    return message


def test_the_example_trace_loads_with_a_hundred_workers_in_order() -> None:
    rows = load_trace(EXAMPLE)
    assert [row.worker for row in rows] == list(range(100))
    assert all(row.latency_s is not None for row in rows)


def test_the_example_trace_is_what_its_generator_writes() -> None:
    generator = runpy.run_path(str(ROOT / "examples" / "traces" / "generate.py"))
    assert generator["trace_text"]() == EXAMPLE.read_text()


def test_rows_in_any_order_with_columns_in_any_order_comments_spaces_and_crlf() -> None:
    text = (
        "\ufeff# a comment\r\n"
        "down_bytes_per_s, worker ,seconds_per_sample,up_bytes_per_s\r\n"
        "\r\n"
        "2e6, 1, .5, 1000\r\n"
        "  # another comment\r\n"
        "3000000,0,0.25,2000.\r\n"
    )
    assert parse_trace(text.encode()) == (
        TraceRow(0, 0.25, 2000.0, 3e6, None),
        TraceRow(1, 0.5, 1000.0, 2e6, None),
    )


def test_the_latency_column_is_read_when_present() -> None:
    rows = parse_trace(f"{HEADER},latency_s\n0,0.1,10,10,0\n".encode())
    assert rows[0].latency_s == 0.0


def test_the_row_limit_matches_the_most_workers_a_run_may_have() -> None:
    assert MAX_WORKERS == MAX_TRACE_ROWS


# Each attack on the loader stays a test: the message names what is wrong and where.


def test_an_empty_file_is_refused() -> None:
    assert "no header" in _refusal(b"")


def test_a_file_of_comments_and_blank_lines_is_refused() -> None:
    assert "no header" in _refusal("# nothing\n\n   \n")


def test_a_header_without_rows_is_refused() -> None:
    assert "no worker rows" in _refusal(HEADER + "\n")


def test_binary_data_is_refused() -> None:
    assert "NUL bytes" in _refusal(bytes(range(256)))


def test_text_that_is_not_utf8_is_refused() -> None:
    assert "not UTF-8" in _refusal(HEADER.encode() + b"\n0,\xff,1,1\n")


def test_an_unknown_column_is_refused_without_quoting_it() -> None:
    message = _refusal("worker,root:x:0:0,up_bytes_per_s,down_bytes_per_s\n0,1,1,1\n")
    assert "line 1: header column 2 is not one of" in message
    assert "root" not in message


def test_a_missing_column_is_refused() -> None:
    message = _refusal("worker,seconds_per_sample,up_bytes_per_s\n0,1,1\n")
    assert "lacks column down_bytes_per_s" in message


def test_a_column_named_twice_is_refused() -> None:
    assert "names column worker twice" in _refusal(f"{HEADER},worker\n0,1,1,1,0\n")


def test_a_row_with_too_few_or_too_many_fields_is_refused() -> None:
    assert "line 2: 3 fields, but the header has 4" in _refusal(f"{HEADER}\n0,1,1\n")
    assert "line 2: 5 fields" in _refusal(f"{HEADER}\n0,1,1,1,1\n")


@pytest.mark.parametrize(
    "value",
    ["inf", "nan", "-inf", "1_000", "0x10", '"1.0"', "1,5", "", " ", "1e", "١", "1\u200b", "1\x01"],
)
def test_a_field_that_is_not_a_plain_decimal_is_refused(value: str) -> None:
    message = _refusal(f"{HEADER}\n0,{value},1,1\n")
    assert "line 2" in message


@pytest.mark.parametrize(
    ("column", "value", "expected"),
    [
        ("seconds_per_sample", "0", "must be > 0"),
        ("seconds_per_sample", "-1", "must be > 0"),
        ("seconds_per_sample", "1e-400", "must be > 0"),
        ("seconds_per_sample", "1e400", "too large to be a finite number"),
        ("seconds_per_sample", "3601", "must be > 0 and <= 3600"),
        ("up_bytes_per_s", "0.5", "must be >= 1"),
        ("down_bytes_per_s", "9" * 60, "must be >= 1 and <= 1e+12"),
        ("latency_s", "-0.01", "must be >= 0"),
    ],
)
def test_a_number_out_of_bounds_is_refused_naming_line_and_column(
    column: str, value: str, expected: str
) -> None:
    values = {"seconds_per_sample": "1", "up_bytes_per_s": "1", "down_bytes_per_s": "1"}
    values["latency_s"] = "0"
    values[column] = value
    text = f"{HEADER},latency_s\n0,1,1,1,0\n1,{','.join(values[c] for c in values)}\n"
    message = _refusal(text)
    assert f"line 3, column {column}: {expected}" in message


def test_a_field_longer_than_any_number_is_refused() -> None:
    assert "not a decimal number" in _refusal(f"{HEADER}\n0,{'1' * 100},1,1\n")


@pytest.mark.parametrize("worker", ["-1", "1.0", "a", "", "9" * 5000])
def test_a_worker_id_that_is_not_an_index_is_refused(worker: str) -> None:
    assert "column worker: not a worker index" in _refusal(f"{HEADER}\n{worker},1,1,1\n")


def test_a_worker_id_outside_the_rows_is_refused() -> None:
    message = _refusal(f"{HEADER}\n0,1,1,1\n2,1,1,1\n")
    assert "line 3, column worker: worker index must be below 2" in message


def test_a_repeated_worker_is_refused_naming_both_lines() -> None:
    message = _refusal(f"{HEADER}\n1,1,1,1\n# gap\n1,1,1,1\n")
    assert "line 4, column worker: the same worker as line 2" in message


def test_more_rows_than_a_run_may_have_workers_are_refused() -> None:
    text = HEADER + "\n" + "0,1,1,1\n" * (MAX_TRACE_ROWS + 1)
    assert f"more than {MAX_TRACE_ROWS} worker rows" in _refusal(text)


def test_data_over_the_size_limit_is_refused_before_parsing() -> None:
    assert "larger than" in _refusal(b"#" * (MAX_TRACE_BYTES + 1))


def test_a_file_over_the_size_limit_is_refused_without_reading_it(tmp_path: Path) -> None:
    path = tmp_path / "huge.csv"
    with path.open("wb") as file:
        file.truncate(MAX_TRACE_BYTES + 1)  # sparse: the size is there, the bytes are not
    with pytest.raises(TraceError, match="larger than"):
        load_trace(path)


def test_a_missing_file_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"cannot read it \(No such file or directory\)"):
        load_trace(tmp_path / "absent.csv")


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="not a regular file"):
        load_trace(tmp_path)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_named_pipe_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(TraceError, match="not a regular file"):
        load_trace(tmp_path / "pipe")


def test_a_device_file_is_refused() -> None:
    with pytest.raises(TraceError, match="not a regular file"):
        load_trace("/dev/zero")


@given(st.binary(max_size=512))
def test_arbitrary_bytes_parse_or_raise_a_trace_error(data: bytes) -> None:
    try:
        rows = parse_trace(HEADER.encode() + b"\n" + data)
    except TraceError as err:
        assert "\n" not in str(err)
    else:
        assert [row.worker for row in rows] == list(range(len(rows)))


@given(st.text(max_size=300))
def test_arbitrary_text_parses_or_raises_a_trace_error(text: str) -> None:
    try:
        parse_trace(text.encode("utf-8", "surrogatepass"))
    except TraceError as err:
        assert "\n" not in str(err)
