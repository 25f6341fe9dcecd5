"""Asynchronous runs on real arrival times: a deployment's stream, played by a test double.

The double (:class:`~tests.support.fake_stream.FakeStream`) computes every answer
with the in-process workers and hands it back after the worker's delay on a virtual
clock, so the loop the deployment runs is replayed exactly, without sleeping.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any

import pytest

from phalanx.channel import Downlink
from phalanx.config import RunConfig
from phalanx.faults import RunFailedError
from phalanx.replies import Reply, Task
from phalanx.reports import RoundReport
from phalanx.runs import build_coordinator, execute_run
from tests.support.configs import small_config
from tests.support.coordinator_runs import RUN_ID, FakeSink, transport
from tests.support.fake_stream import Delay, FakeStream

SLOW = 0
"""The worker that takes ten times as long as the others."""


def deployed_async_config(rounds: int, **overrides: Any) -> RunConfig:
    """Five honest workers at r = 1, deployed, a buffer of 2 and a staleness bound of 2."""
    settings: dict[str, Any] = {
        "rounds": rounds,
        "assignment": {"scheme": "none", "num_workers": 5, "r": 1},
        "attack": {"name": None, "q": 0},
        "training": {"optimizer": "adam", "server_lr": 0.003},
        "asynchronous": {"enabled": True, "buffer_size": 2, "max_staleness": 2},
        "deployment": {"backend": "deployment", "round_timeout_s": 60.0},
    }
    for key, value in overrides.items():
        settings[key] = {**settings[key], **value} if isinstance(value, dict) else value
    return small_config(**settings)


def one_slow(worker: int, number: int) -> float:
    """Ten seconds a task for the slow worker; one and a bit for the others."""
    return 10.0 if worker == SLOW else 1.0 + 0.1 * worker


def run_streamed(
    config: RunConfig, delay: Delay, *, tamper: Any = None
) -> tuple[list[RoundReport], FakeStream]:
    stream = FakeStream(transport(config, tamper), delay)
    sink = FakeSink()
    execute_run(config, run_id=RUN_ID, sink=sink, transport=stream)
    return sink.reports, stream


def test_a_deployed_async_run_goes_by_real_arrival_times_without_waiting_for_the_slow() -> None:
    reports, stream = run_streamed(deployed_async_config(20), one_slow)
    assert [r.round for r in reports] == list(range(1, 21))
    assert [r.metrics["model_version"] for r in reports] == [float(t) for t in range(1, 21)]
    assert reports[-1].accuracy > reports[0].accuracy
    # Timed by the stream's clock: no simulated time is claimed.
    for report in reports:
        assert "simulated_s" not in report.metrics
        assert report.metrics["collected_s"] >= 0
        assert report.metrics["buffered_updates"] == 2
        assert report.metrics["update_applied"] == 1
    # Twenty updates of two fast answers each take about 12 s of the stream's clock;
    # waiting for the slow worker every time would take 200.
    assert stream.clock < 30
    # The slow worker's one answer came five versions late: dropped and counted, never
    # judged (slow is not lying); every worker that finished was given the newest model.
    assert not any(r.flagged or r.rejected or r.events for r in reports)
    late = [(r.round, x.worker) for r in reports for x in r.responses if x.status == "late"]
    assert late == [(late[0][0], SLOW)]
    assert sum(r.metrics["late_replies"] for r in reports) == 1
    slow_times = [x.seconds for r in reports for x in r.responses if x.worker == SLOW]
    assert slow_times == [10.0]
    fast_times = [x.seconds for r in reports for x in r.responses if x.worker != SLOW]
    assert statistics.median(t for t in fast_times if t is not None) < 2
    given = [task.worker for task in stream.sent]
    assert given.count(SLOW) == 2  # its first task, and one on the model it pulled
    assert all(given.count(w) >= 4 for w in range(1, 5))


def test_a_task_out_longer_than_the_timeout_is_given_up_and_its_late_answer_counted() -> None:
    config = deployed_async_config(20, deployment={"round_timeout_s": 5.0})
    reports, stream = run_streamed(config, one_slow)
    # Given up at 5 s, it answered at 10 s: late, never checked, and given work again.
    late = [(r.round, x.worker, x.seconds) for r in reports for x in r.responses]
    assert [(w, s) for _, w, s in late if w == SLOW] == [(SLOW, 10.0)]
    assert [x.status for r in reports for x in r.responses if x.worker == SLOW] == ["late"]
    assert sum(r.metrics["late_replies"] for r in reports) == 1
    assert sum(r.metrics["stale_dropped"] for r in reports) == 0
    assert [task.worker for task in stream.sent].count(SLOW) == 2
    assert not any(r.flagged or r.rejected or r.events for r in reports)


def test_a_run_whose_every_task_goes_unanswered_fails_naming_the_cause() -> None:
    config = deployed_async_config(2, deployment={"round_timeout_s": 5.0})
    with pytest.raises(RunFailedError, match=r"no worker is at work any more \(5 sent no reply;"):
        run_streamed(config, lambda worker, number: None)


def test_a_worker_that_dies_mid_run_is_given_up_and_the_others_go_on() -> None:
    def dies_after_its_first_task(worker: int, number: int) -> float | None:
        return None if worker == SLOW and number > 1 else 1.0 + 0.1 * worker

    config = deployed_async_config(12, deployment={"round_timeout_s": 5.0})
    reports, stream = run_streamed(config, dies_after_its_first_task)
    assert [r.round for r in reports] == list(range(1, 13))
    assert not any(r.flagged or r.rejected or r.events for r in reports)
    assert [task.worker for task in stream.sent].count(SLOW) == 2  # never given work again


def test_a_forged_answer_is_refused_on_the_record_and_its_worker_alone_blamed() -> None:
    forger = 3

    def forge(reply: Reply) -> Reply:
        if reply.worker != forger:
            return reply
        return dataclasses.replace(reply, signature=b"\x30\x06\x02\x01\x01\x02\x01\x01")

    reports, _ = run_streamed(deployed_async_config(4), one_slow, tamper=forge)
    refused = {(e.worker, e.kind) for r in reports for e in r.events}
    assert refused == {(forger, "bad_signature")}
    assert all(set(r.rejected) <= {forger} for r in reports)
    assert any(r.rejected for r in reports)


def test_a_transport_that_cannot_stream_is_refused_with_the_reason() -> None:
    config = deployed_async_config(1)
    with pytest.raises(ValueError, match="keeps tasks out while others come back"):
        build_coordinator(config, RUN_ID, transport(config), FakeSink())


def test_a_worker_that_answers_garbage_at_once_is_refused_once_per_update_and_the_run_goes_on() -> (
    None
):
    # Attack: on real time a worker sets its own pace. One that answers forged replies
    # at once must neither be sent a model per answer nor fail the run with refusals.
    forger = 2

    def forge(reply: Reply) -> Reply:
        if reply.worker != forger:
            return reply
        return dataclasses.replace(reply, signature=b"\x30\x06\x02\x01\x01\x02\x01\x01")

    def instant_forger(worker: int, number: int) -> float:
        return 0.001 if worker == forger else 1.0 + 0.1 * worker

    config = deployed_async_config(6, training={"max_rounds_without_update": 1})
    reports, stream = run_streamed(config, instant_forger, tamper=forge)
    assert [r.round for r in reports] == list(range(1, 7))
    tasks_of_forger = [task.worker for task in stream.sent].count(forger)
    assert tasks_of_forger == 6  # one per model version, never one per refusal
    assert all(r.rejected == (forger,) for r in reports)
    assert all(
        [(e.worker, e.kind) for e in r.events] == [(forger, "bad_signature")] for r in reports
    )


def test_when_every_worker_fails_alike_the_run_fails_naming_the_common_cause() -> None:
    def missing_data(task: Task, downlink: Downlink) -> Reply:
        raise OSError("No such file or directory: '/data/train.npz'")

    config = deployed_async_config(2)
    inner = transport(config)
    for worker in inner.workers.values():
        worker.handle = missing_data  # type: ignore[method-assign]
    with pytest.raises(RunFailedError) as failure:
        execute_run(config, run_id=RUN_ID, sink=FakeSink(), transport=FakeStream(inner, one_slow))
    assert str(failure.value) == (
        "round 1: no worker is at work any more (5 failed or were refused since the last "
        "update; 5 workers), with 0 of 2 updates buffered: 5 of 5 workers failed with the "
        "same error: OSError: No such file or directory: '.../train.npz'"
    )
