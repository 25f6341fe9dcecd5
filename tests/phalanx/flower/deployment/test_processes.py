"""Processes Phalanx starts are stopped by pid, with everything they started."""

from __future__ import annotations

from pathlib import Path

import pytest

from phalanx.flower.deployment.processes import (
    ProcessFailedError,
    ProcessId,
    start_process,
    stop_all,
    wait_until,
)


def test_stop_ends_the_process_and_every_descendant(tmp_path: Path) -> None:
    process = start_process(
        "tree",
        ["sh", "-c", "sleep 300 & (sleep 300 & wait) & echo started; wait"],
        log_path=tmp_path / "tree.log",
    )
    wait_until(lambda: len(process.descendants()) >= 3, timeout=30, what="forked", process=process)
    tree = process.descendants()
    process.stop(timeout=5)
    assert not process.running()
    assert [p.pid for p in tree if p.alive()] == []
    assert "started" in process.log_text()


def test_a_process_that_ignores_sigterm_is_killed(tmp_path: Path) -> None:
    process = start_process(
        "stubborn",
        ["sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done"],
        log_path=tmp_path / "stubborn.log",
    )
    wait_until(lambda: "ready" in process.log_text(), timeout=30, what="ready", process=process)
    assert process.stop(timeout=0.5) == -9


READY_AND_WAIT = "echo ready; sleep 300 & wait"
IGNORE_TERM = "sh -c \"trap '' TERM; while :; do sleep 1; done\""


def test_stop_all_signals_every_process_before_waiting_for_any(tmp_path: Path) -> None:
    # On SIGTERM each of the two notes it was signalled, then exits 7 only once it sees
    # that the other was signalled too (1 if not within 5 s): one stop after the other
    # would have the first one killed at the timeout.
    def signalled_together(me: str, other: str) -> str:
        wait = f"i=0; while [ ! -e {other} ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done"
        return f"trap 'touch {me}; {wait}; [ -e {other} ] && exit 7; exit 1' TERM"

    marks = [tmp_path / "signalled-0", tmp_path / "signalled-1"]
    pairs = [(marks[0], marks[1]), (marks[1], marks[0])]
    together = [
        start_process(
            f"together-{n}",
            ["sh", "-c", f"{signalled_together(str(me), str(other))}; {READY_AND_WAIT}"],
            log_path=tmp_path / f"together-{n}.log",
        )
        for n, (me, other) in enumerate(pairs)
    ]
    # It ignores SIGTERM, and so does the helper it started (as a busy ClientApp
    # does): both killed, and both gone by the time stop_all returns.
    stubborn = start_process(
        "stubborn",
        ["sh", "-c", f"trap '' TERM; {IGNORE_TERM} & echo ready; {IGNORE_TERM}"],
        log_path=tmp_path / "stubborn.log",
    )
    everyone = [*together, stubborn]
    for process in everyone:
        wait_until(lambda p=process: "ready" in p.log_text(), timeout=30, what="ready")
    wait_until(lambda: len(stubborn.descendants()) >= 2, timeout=30, what="forked")
    tree = [p for process in everyone for p in process.descendants()]
    assert stop_all(everyone, timeout=3) == [7, 7, -9]
    assert not any(p.running() for p in everyone)
    assert [p.pid for p in tree if p.alive()] == []


def test_waiting_on_a_process_that_exits_reports_its_log(tmp_path: Path) -> None:
    process = start_process(
        "failing", ["sh", "-c", "echo no such thing; exit 3"], log_path=tmp_path / "failing.log"
    )
    with pytest.raises(ProcessFailedError, match=r"(?s)exited with status 3.*no such thing"):
        wait_until(lambda: False, timeout=30, what="ready", process=process)
    process.stop()


def test_a_pid_noted_with_another_start_time_is_never_taken_for_the_live_process(
    tmp_path: Path,
) -> None:
    process = start_process(
        "parent", ["sh", "-c", "sleep 300 & wait"], log_path=tmp_path / "parent.log"
    )
    try:
        wait_until(lambda: len(process.descendants()) == 1, timeout=30, what="forked")
        (child,) = process.descendants()
        reused = ProcessId(child.pid, child.started + 1.0)  # the same number, another process
        assert child.alive() and child.process() is not None
        assert not reused.alive() and reused.process() is None
    finally:
        process.stop(timeout=5)
    assert not child.alive()
