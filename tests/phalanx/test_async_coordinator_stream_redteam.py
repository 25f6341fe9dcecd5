"""Red team of asynchronous mode on real arrival times: the loop over a Stream, and the Grid.

Each test plays an outside attacker (a malicious or broken worker, a hostile network
between the SuperLink and the coordinator) and asserts what the product must do.
Runs are driven on virtual clocks, never sleeping: the coordinator's loop over the
:class:`~tests.support.fake_stream.FakeStream` double, or over the real
:class:`~phalanx.flower.transport.GridTransport` on a fake Grid that runs the real
ClientApp and lets each reply out only once the transport's (fake) clock reaches it.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pytest
from flwr.app import ConfigRecord, Error, Message, RecordDict

from phalanx.channel import Downlink
from phalanx.config import RunConfig
from phalanx.exchange import Arrival
from phalanx.faults import RunFailedError
from phalanx.flower.records import REPLY
from phalanx.flower.transport import GridTransport
from phalanx.replies import Reply, Task
from phalanx.reports import RoundReport
from phalanx.runs import execute_run
from phalanx_clients.app import build_client_app
from tests.support.clock import FakeClock
from tests.support.configs import small_config
from tests.support.coordinator_runs import RUN_ID, FakeSink, transport
from tests.support.fake_grid import (
    NODE_BASE,
    FakeGrid,
    Rewrite,
    patched_transport_clock,
    request_of,
    server_task_identity,
    untouched,
)
from tests.support.fake_stream import Delay, FakeStream
from tests.support.signed_replies import resigned

WORKERS = 5


def async_config(rounds: int, **overrides: Any) -> RunConfig:
    """Five honest workers at r = 1, deployed, a buffer of 2 and a staleness bound of 2."""
    settings: dict[str, Any] = {
        "rounds": rounds,
        "assignment": {"scheme": "none", "num_workers": WORKERS, "r": 1},
        "attack": {"name": None, "q": 0},
        "training": {"optimizer": "adam", "server_lr": 0.003},
        "asynchronous": {"enabled": True, "buffer_size": 2, "max_staleness": 2},
        "deployment": {"backend": "deployment", "round_timeout_s": 60.0},
    }
    for key, value in overrides.items():
        settings[key] = {**settings.get(key, {}), **value} if isinstance(value, dict) else value
    return small_config(**settings)


def honest_pace(worker: int, number: int) -> float:
    """One second and a bit a task, each worker its own pace."""
    return 1.0 + 0.1 * worker


def run_on(stream: FakeStream, config: RunConfig, **kw: Any) -> list[RoundReport]:
    sink = FakeSink()
    execute_run(config, run_id=RUN_ID, sink=sink, transport=stream, **kw)
    return sink.reports


def streamed(
    config: RunConfig, delay: Delay, *, tamper: Any = None
) -> tuple[list[RoundReport], FakeStream]:
    stream = FakeStream(transport(config, tamper), delay)
    return run_on(stream, config), stream


def scaled_by(liar: int, factor: float) -> Callable[[Reply], Reply]:
    """A tamper: ``liar`` sends its honest update times ``factor``, well signed."""

    def tamper(reply: Reply) -> Reply:
        if reply.worker != liar:
            return reply
        payloads = tuple(
            (np.frombuffer(p, dtype=np.float32) * factor).astype(np.float32).tobytes()
            for p in reply.payloads
        )
        return resigned(reply, payloads=payloads)

    return tamper


def tasks_of(stream: FakeStream, worker: int) -> int:
    return [task.worker for task in stream.sent].count(worker)


def event_kinds(reports: Sequence[RoundReport]) -> set[tuple[int, str]]:
    return {(e.worker, e.kind) for r in reports for e in r.events}


# --- A worker that sets its own pace on real time ------------------------------------------


LIAR = 2


def instant_liar(worker: int, number: int) -> float:
    """The liar answers at once, without computing; the others at an honest pace."""
    return 0.001 if worker == LIAR else honest_pace(worker, number)


def test_an_instant_large_norm_liar_cannot_fill_every_buffer_and_take_over_the_model() -> None:
    # Attack: on real time a worker sets its own pace. One that answers at once is sent
    # the next task at once while the buffer is not full, so it can hold every slot of
    # every buffer; its own updates then become the crowd later buffers are screened
    # among, and it is never an outlier. One worker must not steer the model so.
    # A buffer of 4: with 2 no robust rule outvotes one liar (the trimmed mean tolerates
    # none of 2 inputs), however the buffer is filled.
    config = async_config(10, detection={"exclude_flagged_for": 3}, asynchronous={"buffer_size": 4})
    reports, _ = streamed(config, instant_liar, tamper=scaled_by(LIAR, -100.0))
    assert [r.round for r in reports] == list(range(1, 11))
    sole = [r.round for r in reports if {x.worker for x in r.responses} == {LIAR}]
    unflagged_sole = [t for t in sole if LIAR not in reports[t - 1].flagged]
    assert unflagged_sole == [], (
        f"the liar alone filled the buffers of rounds {sole} and was not flagged in "
        f"{unflagged_sole}; accuracy {[round(r.accuracy, 2) for r in reports]}"
    )
    assert reports[-1].accuracy > 0.5


def test_an_instant_liar_flagged_every_buffer_cannot_fail_the_run() -> None:
    # Attack: once the liar is screened (and, with the default exclude_flagged_for = 0,
    # never benched), it still fills every buffer by answering at once: no buffer ever
    # holds an honest update, no update is applied, and the run fails on its
    # progress check. One worker must not be able to fail the run.
    config = async_config(16, asynchronous={"buffer_size": 4})
    reports, _ = streamed(config, instant_liar, tamper=scaled_by(LIAR, -100.0))
    assert [r.round for r in reports] == list(range(1, 17))
    assert any(LIAR in r.flagged for r in reports)


class FakeLoggingStream(FakeStream):
    """Notes, for every task sent, how many model updates the sink had recorded by then."""

    def __init__(self, inner: Any, delay: Delay, sink: FakeSink) -> None:
        super().__init__(inner, delay)
        self.sink = sink
        self.log: list[tuple[int, int]] = []  # (updates recorded, worker)

    def send(self, tasks: Sequence[Task], downlink: Downlink) -> int:
        self.log.extend((len(self.sink.reports), task.worker) for task in tasks)
        return super().send(tasks, downlink)


def test_a_large_norm_liar_at_an_honest_pace_is_screened_and_benched_and_nothing_breaks() -> None:
    bench = 3
    config = async_config(
        12, detection={"exclude_flagged_for": bench}, asynchronous={"buffer_size": 4}
    )
    sink = FakeSink()
    stream = FakeLoggingStream(transport(config, scaled_by(LIAR, -100.0)), honest_pace, sink)
    execute_run(config, run_id=RUN_ID, sink=sink, transport=stream)
    reports = sink.reports
    assert [r.round for r in reports] == list(range(1, 13))
    flagged_in = [r.round for r in reports if LIAR in r.flagged]
    assert flagged_in, "the liar was never flagged"
    assert all(set(r.flagged) <= {LIAR} for r in reports)  # an honest worker never is
    assert not any(r.rejected for r in reports)
    # Benched: given no new task during the updates of its bench (a task given before
    # it was flagged may still come back).
    for t in flagged_in:
        during = [n for n, worker in stream.log if worker == LIAR and t <= n < t + bench]
        assert during == [], f"flagged in round {t}, it was sent tasks after {during} updates"
    assert reports[-1].accuracy > 0.5


# --- Faults a worker answers with ---------------------------------------------------------


def test_a_worker_replaying_its_first_reply_at_once_is_refused_once_per_update_alone() -> None:
    # Attack: the worker answers every later task at once with the (well-signed) reply
    # it sent to its first: an old nonce and round. Refused, it alone, no faster than
    # the model moves; the run goes on.
    replayer = 4
    first: dict[int, Reply] = {}

    def replay(reply: Reply) -> Reply:
        if reply.worker != replayer:
            return reply
        return first.setdefault(replayer, reply)

    def pace(worker: int, number: int) -> float:
        return 0.001 if worker == replayer and number > 1 else honest_pace(worker, number)

    config = async_config(8)
    reports, stream = streamed(config, pace, tamper=replay)
    assert [r.round for r in reports] == list(range(1, 9))
    kinds = event_kinds(reports)
    assert kinds and {w for w, _ in kinds} == {replayer}
    assert kinds <= {(replayer, "stale_round"), (replayer, "wrong_nonce")}
    assert not any(r.flagged for r in reports)
    assert tasks_of(stream, replayer) <= len(reports) + 2
    assert all(len([e for e in r.events if e.worker == replayer]) <= 1 for r in reports)


def test_a_reply_that_asks_for_a_sync_is_refused_never_buffered_and_the_run_goes_on() -> None:
    asker = 1

    def ask_sync(reply: Reply) -> Reply:
        return dataclasses.replace(reply, need_sync=True) if reply.worker == asker else reply

    reports, stream = streamed(async_config(6), honest_pace, tamper=ask_sync)
    assert [r.round for r in reports] == list(range(1, 7))
    assert event_kinds(reports) == {(asker, "malformed_reply")}
    for report in reports:
        mine = [e for e in report.events if e.worker == asker]
        assert len(mine) <= 1 and set(report.rejected) <= {asker}
        assert bool(mine) == (asker in report.rejected)
        assert not report.flagged
    assert all(r.metrics["buffered_updates"] == 2 for r in reports)
    assert tasks_of(stream, asker) <= len(reports) + 1


# --- Slow, silent and vanished workers --------------------------------------------------------


def test_a_worker_that_never_answers_does_not_hold_up_fast_ones_nor_is_called_an_adversary() -> (
    None
):
    silent = 0

    def pace(worker: int, number: int) -> float | None:
        return None if worker == silent else honest_pace(worker, number)

    config = async_config(10, deployment={"round_timeout_s": 30.0})
    reports, stream = streamed(config, pace)
    assert [r.round for r in reports] == list(range(1, 11))
    assert not any(r.flagged or r.rejected or r.events for r in reports)
    # Ten updates of two answers at about 1.2 s each: nobody waited 30 s for the silent.
    assert stream.clock < 30
    assert tasks_of(stream, silent) == 1


def test_when_every_worker_is_slower_than_the_timeout_the_run_fails_in_one_line() -> None:
    config = async_config(3, deployment={"round_timeout_s": 5.0})
    with pytest.raises(RunFailedError) as failure:
        streamed(config, lambda worker, number: 10.0)
    said = str(failure.value)
    assert "\n" not in said
    assert said.startswith("round 1: no worker is at work any more (5 sent no reply;")


# --- A stream that hands answers over twice, or answers to tasks never sent --------------------


class FakeRepeatingStream(FakeStream):
    """Hands over every answer twice: in the batch it comes, and again with the next batch."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._again: list[Arrival] = []

    def receive(self, timeout: float) -> list[Arrival]:
        fresh = super().receive(timeout)
        arrivals = [*self._again, *fresh, *fresh]
        self._again = list(fresh)
        return arrivals


def test_answers_handed_over_twice_are_taken_once_and_a_late_one_counted_once() -> None:
    slow = 0

    def pace(worker: int, number: int) -> float:
        return 10.0 if worker == slow else honest_pace(worker, number)

    config = async_config(20, deployment={"round_timeout_s": 5.0})
    stream = FakeRepeatingStream(transport(config), pace)
    reports = run_on(stream, config)
    reference, _ = streamed(config, pace)
    assert [r.round for r in reports] == list(range(1, 21))
    assert sum(r.metrics["late_replies"] for r in reports) == 1
    assert [x.status for r in reports for x in r.responses if x.worker == slow] == ["late"]
    assert tasks_of(stream, slow) == 2  # its first, and one once its late answer came
    assert not any(r.flagged or r.rejected or r.events for r in reports)
    assert [r.model_digest for r in reports] == [r.model_digest for r in reference]


class FakeStrayStream(FakeStream):
    """Also hands over answers to tasks nobody sent (replays of another worker's task)."""

    def receive(self, timeout: float) -> list[Arrival]:
        arrivals = super().receive(timeout)
        strays = [
            Arrival(dataclasses.replace(a.task, nonce=uuid.uuid4().hex), a.outcome, a.seconds)
            for a in arrivals
        ]
        return [*strays, *arrivals]


def test_answers_to_tasks_never_sent_change_nothing() -> None:
    config = async_config(6)
    stream = FakeStrayStream(transport(config), honest_pace)
    reports = run_on(stream, config)
    reference, _ = streamed(config, honest_pace)
    assert [r.model_digest for r in reports] == [r.model_digest for r in reference]
    assert [r.metrics["arrivals"] for r in reports] == [r.metrics["arrivals"] for r in reference]


class FakeRelabellingStream(FakeStream):
    """Hands each answer back under a task that claims other files and another round."""

    def receive(self, timeout: float) -> list[Arrival]:
        return [
            dataclasses.replace(
                a, task=dataclasses.replace(a.task, round=a.task.round + 7, files=(99,))
            )
            for a in super().receive(timeout)
        ]


def test_an_answer_is_judged_against_the_task_the_coordinator_sent_not_the_one_it_names() -> None:
    # Whatever a stream says the answer's task was, the coordinator checks it against its
    # own record of what it sent under that nonce.
    config = async_config(6)
    reports = run_on(FakeRelabellingStream(transport(config), honest_pace), config)
    reference, _ = streamed(config, honest_pace)
    assert [r.model_digest for r in reports] == [r.model_digest for r in reference]
    assert not any(r.events or r.rejected for r in reports)


def test_a_resumed_run_on_a_fresh_stream_ignores_answers_to_the_old_coordinators_tasks() -> None:
    # The run stops with tasks out; it resumes from its checkpoint on the same stream,
    # whose clock has moved on, and the old tasks' answers come during the resumed run.
    config = async_config(8)
    stream = FakeStream(transport(config), honest_pace)
    first = FakeSink()
    execute_run(
        config,
        run_id=RUN_ID,
        sink=first,
        transport=stream,
        should_stop=lambda: len(first.reports) >= 4,
    )
    assert stream._due  # answers still to come, to tasks the stopped coordinator sent
    stream.clock += 1000.0
    before = {w: tasks_of(stream, w) for w in range(WORKERS)}
    resumed = FakeSink()
    execute_run(
        config,
        run_id=RUN_ID,
        sink=resumed,
        transport=stream,
        start_round=5,
        checkpoint=first.checkpoints[4],
    )
    assert [r.round for r in resumed.reports] == [5, 6, 7, 8]
    assert [r.metrics["model_version"] for r in resumed.reports] == [5.0, 6.0, 7.0, 8.0]
    assert not any(r.flagged or r.rejected or r.events for r in resumed.reports)
    assert all(0 <= r.metrics["collected_s"] < 60 for r in resumed.reports)
    # Task counts carry over: no worker computes a data round it computed before.
    resumed_numbers = [t.round for t in stream.sent[sum(before.values()) :]]
    for worker in range(WORKERS):
        mine = [t.round for t in stream.sent if t.worker == worker]
        assert len(mine) == len(set(mine))
    assert resumed_numbers


# --- The Grid transport, on a fake Grid running the real ClientApp ----------------------------


@pytest.fixture(autouse=True)
def _server_task_identity() -> Iterator[None]:
    with server_task_identity():
        yield


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    return patched_transport_clock(monkeypatch)


NODES = {w: NODE_BASE + w for w in range(WORKERS)}


class FakeTimedGrid(FakeGrid):
    """A Grid whose node ``w``'s reply to its ``n``-th message comes ``delay(w, n)`` s after
    the push, on ``clock`` (never: ``None``); ``stored(w)`` false: the node is gone, and the
    Grid stores none of its messages. ``extra`` adds messages to every pull's answer."""

    def __init__(
        self,
        clock: FakeClock,
        delay: Delay,
        rewrite: Rewrite = untouched,
        *,
        stored: Callable[[int], bool] = lambda worker: True,
        extra: Callable[[list[str]], list[Message]] = lambda ids: [],
    ) -> None:
        super().__init__(build_client_app(), NODES.values(), rewrite)
        self.clock = clock
        self.delay = delay
        self.stored = stored
        self.extra = extra
        self.count: dict[int, int] = {}
        self.ready: dict[str, float] = {}
        self.pulls = 0

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        ids = []
        for message in messages:
            worker = self.nodes.index(message.metadata.dst_node_id)
            if not self.stored(worker):
                ids.append("")
                continue
            (mid,) = super().push_messages([message])
            self.count[worker] = number = self.count.get(worker, 0) + 1
            delay = self.delay(worker, number)
            if delay is None:
                del self.replies[mid]
            else:
                self.ready[mid] = self.clock.now + delay
            ids.append(mid)
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        self.pulls += 1
        if self.pulls > 50_000:
            raise AssertionError("the coordinator pulled the Grid 50,000 times")
        asked = list(message_ids)
        due = [i for i in asked if i in self.replies and self.ready[i] <= self.clock.now]
        return [*self.extra(asked), *super().pull_messages(due)]


def grid_run(
    config: RunConfig, grid: FakeGrid, **kw: Any
) -> tuple[list[RoundReport], GridTransport]:
    stream = GridTransport(
        grid,  # type: ignore[arg-type]
        NODES,
        config.model_dump_json(),
        timeout=config.deployment.round_timeout_s,
        poll_interval=0.01,
        max_poll_interval=0.1,
        **kw,
    )
    sink = FakeSink()
    execute_run(config, run_id=RUN_ID, sink=sink, transport=stream)
    return sink.reports, stream


def test_over_the_grid_a_run_goes_by_arrival_times_and_a_silent_node_is_given_up(
    clock: FakeClock,
) -> None:
    def pace(worker: int, number: int) -> float | None:
        return None if worker == 0 else honest_pace(worker, number)

    config = async_config(6, deployment={"round_timeout_s": 20.0})
    grid = FakeTimedGrid(clock, pace)
    reports, stream = grid_run(config, grid)
    assert [r.round for r in reports] == list(range(1, 7))
    assert not any(r.flagged or r.rejected or r.events for r in reports)
    assert clock.now < 20
    assert stream.pulls < 400


def test_a_grid_that_stored_no_message_does_not_make_the_coordinator_spin(
    clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Network: every SuperNode left, so the Grid stores none of the tasks pushed
    # (push_messages answers an empty id). The transport has nothing out and its
    # receive returns at once; the coordinator, which counts those tasks as out,
    # must still wait for its timeout (in time, not by asking again and again), then
    # fail in one line.
    config = async_config(2, deployment={"round_timeout_s": 30.0})
    grid = FakeTimedGrid(clock, honest_pace, stored=lambda worker: False)
    calls = 0
    receive = GridTransport.receive

    def counted(self: GridTransport, timeout: float) -> list[Arrival]:
        nonlocal calls
        calls += 1
        if calls > 10_000:
            raise AssertionError(
                f"receive called {calls} times in {clock.now} s of the transport's clock"
            )
        return receive(self, timeout)

    monkeypatch.setattr(GridTransport, "receive", counted)
    with pytest.raises(RunFailedError, match=r"no worker is at work any more \(5 sent no reply;"):
        grid_run(config, grid)
    assert calls < 1_000


def test_replies_to_message_ids_never_pushed_are_ignored(clock: FakeClock) -> None:
    # Network: every pull also brings replies to ids nobody pushed, one of them a copy
    # of a real reply (another worker's, fully signed) under a made-up id.
    config = async_config(5)
    honest_grid = FakeTimedGrid(clock, honest_pace)
    reference, _ = grid_run(config, honest_grid)
    clock.now = 0.0

    seen: list[Message] = []

    def junk(asked: list[str]) -> list[Message]:
        messages = []
        for original in seen[-2:]:
            request = Message(RecordDict(), dst_node_id=1, message_type="train")
            request.metadata.__dict__["_message_id"] = uuid.uuid4().hex
            request.metadata.__dict__["_src_node_id"] = original.metadata.dst_node_id
            messages.append(Message(original.content, reply_to=request))
        return messages

    class FakeJunkGrid(FakeTimedGrid):
        def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
            pulled = list(super().pull_messages(message_ids))
            seen.extend(m for m in pulled if not m.has_error())
            return pulled

    grid = FakeJunkGrid(clock, honest_pace, extra=junk)
    reports, _ = grid_run(config, grid)
    assert [r.round for r in reports] == list(range(1, 6))
    assert not any(r.flagged or r.rejected or r.events for r in reports)
    assert [r.metrics["arrivals"] for r in reports] == [r.metrics["arrivals"] for r in reference]


def test_a_clientapp_that_fails_is_a_low_severity_fault_once_per_update_never_an_adversary(
    clock: FakeClock,
) -> None:
    broken = 3

    def crash(worker: int, reply: Message) -> Message:
        if worker != broken:
            return reply
        error = Error(code=2, reason="Traceback\nOSError: No space left on device")
        return Message(error, reply_to=request_of(reply))

    def pace(worker: int, number: int) -> float:
        return 0.001 if worker == broken else honest_pace(worker, number)

    config = async_config(5)
    reports, _ = grid_run(config, FakeTimedGrid(clock, pace, crash))
    assert [r.round for r in reports] == list(range(1, 6))
    assert not any(r.flagged for r in reports)
    for report in reports:
        (event,) = report.events
        assert (event.worker, event.kind, event.severity) == (broken, "worker_error", "low")
        assert event.evidence["reason"] == "OSError: No space left on device"


def test_replies_swapped_between_two_nodes_are_admitted_under_neither(clock: FakeClock) -> None:
    # Network: the replies of workers 1 and 2 come back each as the other's message's.
    # Neither is taken as an update of a worker that did not compute it.
    pending: dict[int, Message] = {}

    def swap(worker: int, reply: Message) -> Message:
        if worker not in (1, 2) or reply.has_error():
            return reply
        other = 3 - worker
        mine = pending.pop(other, None)
        if mine is None:
            pending[worker] = reply
            return reply
        fields = dict(mine.content.config_records[REPLY])
        return Message(RecordDict({REPLY: ConfigRecord(fields)}), reply_to=request_of(reply))

    config = async_config(5)
    reports, _ = grid_run(config, FakeTimedGrid(clock, honest_pace, swap))
    assert [r.round for r in reports] == list(range(1, 6))
    assert not any(r.flagged for r in reports)
    for report in reports:
        assert set(report.rejected) <= {1, 2}
        assert {e.worker for e in report.events} <= {1, 2}
