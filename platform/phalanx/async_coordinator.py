"""The asynchronous loop: buffered asynchronous aggregation at r = 1, on the simulated clock.

:class:`AsyncCoordinator` drives a run whose ``asynchronous.enabled`` is set. Every
worker computes on the model version it was given and replies when done; the
coordinator takes arrivals one at a time in the order of the systems model's clock
(each job comes back at its start plus its simulated download, compute and upload;
nothing sleeps), refuses what the checks refuse, drops and counts an update more than
``asynchronous.max_staleness`` versions old, and buffers the rest. When the buffer
holds ``asynchronous.buffer_size`` updates it screens them for outliers, applies
their robust aggregate with the learning rate scaled for their staleness
(:mod:`phalanx.asynchronous.stepsize`), and reports the model update as one round,
with the usual :class:`~phalanx.reports.RoundReport` fields. A worker that finished
pulls the newest model and starts again: at once when the buffer is not full yet,
right after the update otherwise.

Detection is outlier screening per buffer: each buffered update is a file of its own
with one holder (replicas computed on different model versions cannot be compared,
so the config refuses ``r > 1``), scored by :func:`~phalanx.detection.judge`'s r = 1
rule, each among the updates computed on the same model version only. Honest updates
of different versions differ as honest clients' data do: a buffer of 100 MLP updates,
80 computed on one version and 20 on the next, had 19 of the 20 flagged when scored
together, and scoring the few stale updates of a buffer together flagged 26 honest
ones in 20 buffers of 50. A version with fewer than :data:`SCREENING_CROWD` updates
in the buffer is scored among the most recent accepted updates of that version from
earlier buffers as well (judged are only the buffer's own): the robust z-score of
four updates is mostly noise (on digits, one honest buffer of 4 in 19 had an update
scored above the threshold on its own, none of 300 among 15). A version with fewer
than ``f + 3`` updates even so is not screened: the robust rule and the
staleness-scaled step bound what it brings. In this mode a round's "files" are its
buffer's slots in arrival order.

A worker holds at most one slot of a buffer: once its update is buffered (or refused,
or its task failed) it waits for the model the buffer makes. On real time a worker
sets its own pace; one that answers at once must not fill a buffer alone.

In simulation everything goes through the :class:`~phalanx.exchange.Transport`
protocol, one exchange per batch of workers starting at the same simulated moment,
so the in-process double and Flower's simulation engine run it alike. In a
deployment (the systems model off) the same loop runs on real arrival times over a
:class:`~phalanx.exchange.Stream`: tasks go out as workers become free, and each
answer is taken as it comes, timed by the stream's clock. A task out longer than
``deployment.round_timeout_s`` is given up on (its worker counts as gone); should
its answer come after all, it is counted late, never checked, and the worker, alive
after all, is given the newest model.

A resumed run continues from the checkpoint's model, version and simulated time with
every worker starting afresh on that model: work in flight when the coordinator
stopped is lost, as it would be in a deployment (its replies would carry nonces the
restarted coordinator never issued). Each worker's task count carries over, so no
worker computes the same data twice.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections import Counter, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import torch
from torch import Tensor

from phalanx.agreement_record import AgreementRecord
from phalanx.arrivals import simulated_arrivals
from phalanx.assignment import Assignment
from phalanx.asynchronous.jobs import Job, JobQueue
from phalanx.asynchronous.staleness import StalenessSummary, is_too_stale, staleness
from phalanx.asynchronous.stepsize import buffer_scale, default_threshold
from phalanx.coordinator import Coordinator
from phalanx.detection import Replica, compare_round, judge
from phalanx.event_kinds import EventKind
from phalanx.exchange import Arrival, Stream
from phalanx.faults import RunFailedError, common_failure
from phalanx.intake import RoundChecks
from phalanx.nets import model_digest
from phalanx.plan import round_assignment, round_samples, task_samples
from phalanx.replies import Rejection, Reply, Task
from phalanx.reports import EventReport, RoundReport, rejection_event
from phalanx.response_times import WorkerResponse
from phalanx.systems.clock import arrival_time, is_available

log = logging.getLogger(__name__)

SCREENING_CROWD = 15
"""Updates of one model version its outlier scores are taken among, at least: the
buffer's, then recent accepted ones. The r = 1 threshold was calibrated on rounds of
15 workers (:data:`~phalanx.detection.outliers.DEFAULT_OUTLIER_THRESHOLD`)."""
RECENT_KEPT = 2 * SCREENING_CROWD
"""Recent accepted updates kept, with their model versions, to fill small crowds."""

PLANS_KEPT = 8
"""Data rounds whose plan (assignment and files' samples) the coordinator keeps at once."""

_ALWAYS_THERE = {
    "availability": "always",
    "dropout_probability": None,
    "mean_rounds_on": None,
    "mean_rounds_off": None,
}


@dataclass(frozen=True)
class _Outcome:
    """What a job brings back: a reply, a fault, or nothing (the worker was away)."""

    task: Task | None
    reply: Reply | None = None
    fault: Rejection | None = None


@dataclass
class _Round:
    """What one model update gathers while its buffer fills."""

    started_s: float
    slots: list[Replica] = field(default_factory=list)
    stalenesses: list[int] = field(default_factory=list)
    events: list[EventReport] = field(default_factory=list)
    rejected: set[int] = field(default_factory=set)
    buffered: set[int] = field(default_factory=set)
    faults: list[str] = field(default_factory=list)
    responses: dict[int, tuple[float, str]] = field(default_factory=dict)
    stale: int = 0
    late: int = 0
    away: int = 0
    arrivals: int = 0
    bytes_up: int = 0


class AsyncCoordinator(Coordinator):
    """Drives a run asynchronously, one buffered model update per round.

    Takes the parameters of :class:`~phalanx.coordinator.Coordinator`; the run's
    ``asynchronous`` section must be enabled (which the config allows only with
    ``assignment.r = 1``, without the codec, and in simulation only with the systems
    model). Without the systems model the transport must be a
    :class:`~phalanx.exchange.Stream`: the run goes by real arrival times.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        config = self.config
        settings = config.asynchronous
        if not settings.enabled:
            raise ValueError("AsyncCoordinator drives runs with asynchronous.enabled only")
        workers = config.assignment.num_workers
        self._settings = settings
        self._threshold = (
            settings.delay_threshold
            if settings.delay_threshold is not None
            else default_threshold(workers, settings.buffer_size)
        )
        self._always = config.systems.model_copy(update=_ALWAYS_THERE)
        self._queue: JobQueue[_Outcome] = JobQueue()
        # Tasks given to each worker so far: the next one computes data round count + 1.
        self._tasks_given = [0] * workers
        self._waiting: set[int] = set(range(workers))  # finished, to be given the newest model
        self._vanished: set[int] = set()  # sent no reply and no fault: never heard of again
        self._stray: list[Rejection] = []
        self._stale_total = 0
        # The most recent accepted updates, the crowd a small buffer is scored among.
        self._recent: deque[tuple[int, Tensor]] = deque(maxlen=RECENT_KEPT)
        self._version = 0
        self._bytes_down = 0
        self._dispatched = 0
        self._plans: dict[int, tuple[Assignment, list[tuple[int, ...]]]] = {}
        self._stream: Stream | None = None
        if not config.systems.enabled:
            if not isinstance(self.transport, Stream):
                raise ValueError(
                    "asynchronous mode on real arrival times needs a transport that keeps "
                    f"tasks out while others come back; {type(self.transport).__name__} "
                    "cannot: simulate with systems.enabled = true instead"
                )
            self._stream = self.transport
        self._origin = 0.0 if self._stream is None else self._stream.now()
        # Tasks out on the stream, by nonce: (task, model version, when sent).
        self._in_flight: dict[str, tuple[Task, int, float]] = {}
        self._given_up: dict[str, int] = {}  # nonce -> worker, of tasks given up on

    def _plan(self, number: int) -> tuple[Assignment, list[tuple[int, ...]]]:
        """Return data round ``number``'s assignment and files' samples, drawn once each.

        Workers move through data rounds at their own pace, so the plans of the few
        most recent numbers are kept (:data:`PLANS_KEPT`), the oldest forgotten first.
        """
        plan = self._plans.get(number)
        if plan is None:
            assignment = round_assignment(self.config, number, self._base)
            samples = round_samples(self.config, self._train_size, number, assignment.num_files)
            plan = self._plans[number] = (assignment, samples)
            while len(self._plans) > PLANS_KEPT:
                del self._plans[min(self._plans)]
        return plan

    def _checkpoint_state(self) -> dict[str, Any]:
        state = super()._checkpoint_state()
        state["asynchronous"] = {
            "tasks_given": list(self._tasks_given),
            "stale_total": self._stale_total,
            "recent": [update for _, update in self._recent],
            "recent_versions": [version for version, _ in self._recent],
        }
        return state

    def _restore_state(self, state: dict[str, Any]) -> None:
        saved = state.get("asynchronous")
        if not isinstance(saved, dict):
            raise ValueError(
                "this checkpoint was not written by an asynchronous run; resume it with the "
                "config it was written with"
            )
        given = [int(n) for n in saved.get("tasks_given", [])]
        if len(given) != self.config.assignment.num_workers or min(given, default=0) < 0:
            raise ValueError(
                f"the checkpoint counts tasks for {len(given)} workers; the run has "
                f"{self.config.assignment.num_workers}"
            )
        recent = saved.get("recent", [])
        dim = int(self.params.numel())
        if not all(isinstance(u, Tensor) and u.shape == (dim,) for u in recent):
            raise ValueError("the checkpoint's recent updates do not fit the model")
        # Written before updates kept their versions: none can join a crowd then.
        versions = saved.get("recent_versions", [-1] * len(recent))
        if len(versions) != len(recent) or not all(type(v) is int for v in versions):
            raise ValueError("the checkpoint's recent updates do not say their model versions")
        super()._restore_state(state)
        self._tasks_given = given
        self._stale_total = int(saved.get("stale_total", 0))
        self._recent = deque(
            ((v, u.to(torch.float32)) for v, u in zip(versions, recent, strict=True)),
            maxlen=RECENT_KEPT,
        )

    def run_round(self, t: int) -> RoundReport:
        """Fill a buffer (on the simulated clock, or the stream's), apply it as version ``t``."""
        started = datetime.now(UTC)
        clock = time.perf_counter()
        self._version = t - 1
        self._benched = {w: until for w, until in self._benched.items() if until >= t}
        self._bytes_down = self._dispatched = 0
        gathered = _Round(started_s=self._now())
        waiting, self._waiting = self._waiting, set()
        self._dispatch(waiting)
        while len(gathered.slots) < self._settings.buffer_size:
            self._take(self._next_job(t, gathered), t, gathered)
        collected = time.perf_counter()
        report = self._apply(t, gathered, started, {"exchange": collected - clock})
        persist = time.perf_counter()
        self.sink.round_finished(report, self.checkpoint())
        report.timings["persist"] = time.perf_counter() - persist
        return report

    def _now(self) -> float:
        """Seconds since the run began: on the simulated clock, or the stream's."""
        if self._stream is None:
            return self._simulated_s
        return self._stream.now() - self._origin

    def _next_job(self, t: int, gathered: _Round) -> Job[_Outcome]:
        if self._stream is not None:
            self._await_arrivals(self._stream, gathered)
        if not self._queue:
            raise RunFailedError(self._nobody_at_work(t, gathered))
        job = self._queue.pop()
        if self._stream is None:
            self._simulated_s = job.returns_s
        return job

    def _nobody_at_work(self, t: int, gathered: _Round) -> str:
        """Say why no update can come: who vanished, who failed or was refused, and why."""
        refused = gathered.rejected & self._waiting
        counts = (
            (len(self._vanished), "sent no reply"),
            (len(refused), "failed or were refused since the last update"),
            (len(self._benched), "benched"),
            (len(gathered.buffered), "hold a slot of this buffer already"),
        )
        who = ", ".join(f"{n} {what}" for n, what in counts if n)
        said = (
            f"round {t}: no worker is at work any more ({who}; "
            f"{self.config.assignment.num_workers} workers), with {len(gathered.slots)} of "
            f"{self._settings.buffer_size} updates buffered"
        )
        if not refused:
            return said
        cause = common_failure(gathered.faults, len(refused)) or "see the round's detection events"
        return f"{said}: {cause}"

    def _await_arrivals(self, stream: Stream, gathered: _Round) -> None:
        """Wait on the stream until an answer is queued or no task is out any more.

        A task out longer than ``deployment.round_timeout_s`` is given up on.
        """
        limit = self.config.deployment.round_timeout_s
        while not self._queue and self._in_flight:
            now = self._now()
            due = min(sent for _, _, sent in self._in_flight.values()) + limit
            if due <= now:
                for nonce, (task, _, sent) in list(self._in_flight.items()):
                    if sent + limit <= now:
                        del self._in_flight[nonce]
                        self._given_up[nonce] = task.worker
                        self._vanished.add(task.worker)
                continue
            for arrival in stream.receive(due - now):
                self._arrive(arrival, gathered)

    def _arrive(self, arrival: Arrival, gathered: _Round) -> None:
        """Queue a streamed answer as the job it ends; one given up on is late."""
        task, outcome = arrival.task, arrival.outcome
        entry = self._in_flight.pop(task.nonce, None)
        if entry is None:
            worker = self._given_up.pop(task.nonce, None)
            if worker is not None:
                # Slow is not lying: counted, never checked; alive, so it works again.
                self._vanished.discard(worker)
                gathered.late += 1
                gathered.responses[worker] = (arrival.seconds, "late")
                self._dispatch([worker])
            return
        task, version, sent = entry  # what was sent, by the coordinator's own record
        returns = max(sent + arrival.seconds, sent)
        if isinstance(outcome, Rejection):
            result = _Outcome(task, fault=outcome)
        elif outcome.need_sync:
            result = _Outcome(task, fault=_sync_refused(task.worker))
        else:
            result = _Outcome(task, outcome)
        self._queue.push(Job(task.worker, version, task.round, sent, returns, result))

    def _take(self, job: Job[_Outcome], t: int, gathered: _Round) -> None:
        """Take one arrival: away, a fault, refused, stale or buffered; then give new work."""
        worker, outcome = job.worker, job.outcome
        gathered.arrivals += 1
        for stray in self._stray:
            gathered.events.append(rejection_event(stray, self._client_ids.get(stray.worker), t))
        self._stray.clear()
        if outcome.task is None:
            gathered.away += 1
        elif outcome.fault is not None:
            gathered.events.append(rejection_event(outcome.fault, self._client_ids[worker], t))
            gathered.faults.append(outcome.fault.reason)
            gathered.rejected.add(worker)
            gathered.responses[worker] = (job.duration_s, "kept")
        elif outcome.reply is not None:
            self._take_reply(job, outcome.task, outcome.reply, t, gathered)
        done_here = worker in gathered.rejected or worker in gathered.buffered
        if len(gathered.slots) < self._settings.buffer_size and not done_here:
            self._dispatch([worker])
        else:
            # It pulls the model this buffer makes: a worker holds at most one slot of a
            # buffer, and one whose answer failed or was refused waits too. On real time
            # a worker sets its own pace: one that answers at once, lies or garbage, must
            # not fill a buffer alone, nor be sent a model per answer.
            self._waiting.add(worker)

    def _take_reply(
        self, job: Job[_Outcome], task: Task, reply: Reply, t: int, gathered: _Round
    ) -> None:
        worker = job.worker
        gathered.bytes_up += reply.num_bytes
        tau = staleness(self._version, job.version)
        if is_too_stale(tau, self._settings.max_staleness):
            # Slow is not lying: counted, never checked or judged.
            gathered.stale += 1
            gathered.responses[worker] = (job.duration_s, "late")
            return
        gathered.responses[worker] = (job.duration_s, "kept")
        checks = RoundChecks({worker: task}, self.members, self.decode, t)
        replicas = checks.admit(reply)
        if not replicas:
            gathered.events.extend(checks.events)
            gathered.rejected.add(worker)
            return
        gathered.buffered.add(worker)
        for replica in replicas:
            slot = len(gathered.slots)
            gathered.slots.append(Replica(worker, slot, replica.value, replica.digest))
            gathered.stalenesses.append(tau)

    def _dispatch(self, workers: Iterable[int]) -> None:
        """Give each of ``workers`` a task on the current model, at the current time.

        A benched worker waits for its bench to end; one the systems model has away for
        this task is back when the task would have ended, with nothing. A worker that
        answers with neither a reply nor a fault is never heard of again. On a stream
        the tasks go out now and their answers are awaited in :meth:`_next_job`.
        """
        now = self._now()
        tasks: list[Task] = []
        for worker in sorted(set(workers)):
            if worker in self._benched:
                self._waiting.add(worker)
                continue
            self._tasks_given[worker] += 1
            number = self._tasks_given[worker]
            assignment, samples = self._plan(number)
            files = assignment.files_of(worker)
            # Only the systems model sends a worker away; a deployment's are there or not.
            systems, seed = self.config.systems, self.config.seed
            if self._stream is not None or is_available(systems, seed, worker, number):
                tasks.append(
                    Task(
                        self.run_id,
                        number,
                        secrets.token_hex(16),
                        worker,
                        files,
                        samples=task_samples(samples, files),
                    )
                )
            else:
                back = now + self._busy_s(worker, number, 0, len(files))
                self._queue.push(Job(worker, self._version, number, now, back, _Outcome(None)))
        if not tasks:
            return
        if self._stream is not None:
            self._bytes_down += self._stream.send(tasks, self.channel.downlink())
            self._dispatched += len(tasks)
            self._in_flight.update((task.nonce, (task, self._version, now)) for task in tasks)
            return
        exchange = self.transport.exchange(tasks, self.channel.downlink())
        self._bytes_down += exchange.bytes_down
        self._dispatched += len(tasks)
        per_task = exchange.bytes_down // len(tasks)
        by_worker = {task.worker: task for task in tasks}
        answered: set[int] = set()
        for reply in exchange.replies:
            if reply.worker not in by_worker:
                self._stray.append(
                    Rejection(reply.worker, "unassigned_file", "a reply nobody asked for")
                )
            elif reply.worker in answered:
                self._stray.append(
                    Rejection(reply.worker, "malformed_reply", "a second reply for the same task")
                )
            elif reply.need_sync:
                answered.add(reply.worker)
                self._push_fault(by_worker[reply.worker], _sync_refused(reply.worker), per_task)
            else:
                answered.add(reply.worker)
                self._push_reply(by_worker[reply.worker], reply, per_task)
        for fault in exchange.malformed:
            if fault.worker in by_worker and fault.worker not in answered:
                answered.add(fault.worker)
                self._push_fault(by_worker[fault.worker], fault, per_task)
        self._vanished.update(w for w in by_worker if w not in answered)

    def _push_reply(self, task: Task, reply: Reply, bytes_down: int) -> None:
        now = self._simulated_s
        (timed,) = simulated_arrivals(
            [reply],
            profiles=self._profiles,
            systems=self.config.systems,
            seed=self.config.seed,
            round_=task.round,
            bytes_down=bytes_down,
            samples_per_file=self.config.data.samples_per_file,
        )
        back = now + max(timed.files_at.values(), default=timed.seconds)
        self._queue.push(
            Job(task.worker, self._version, task.round, now, back, _Outcome(task, reply))
        )

    def _push_fault(self, task: Task, fault: Rejection, bytes_down: int) -> None:
        now = self._simulated_s
        back = now + self._busy_s(task.worker, task.round, bytes_down, len(task.files))
        self._queue.push(
            Job(task.worker, self._version, task.round, now, back, _Outcome(task, fault=fault))
        )

    def _busy_s(self, worker: int, number: int, bytes_down: int, files: int) -> float:
        """Seconds a task keeps ``worker`` busy when nothing comes of it (away, or failed)."""
        return arrival_time(
            self._always,
            self._profiles[worker],
            seed=self.config.seed,
            worker=worker,
            round_=number,
            bytes_down=bytes_down,
            work=[self.config.data.samples_per_file] * files,
            bytes_up=0,
        )

    def _crowds(self, counts: Mapping[int, int]) -> dict[int, Tensor]:
        """Each version's recent accepted updates that fill its crowd to SCREENING_CROWD."""
        crowds = {}
        for version, count in counts.items():
            wanted = SCREENING_CROWD - count
            mine = [update for v, update in self._recent if v == version]
            if wanted > 0 and mine:
                crowds[version] = torch.stack(mine[-wanted:])
        return crowds

    def _apply(
        self, t: int, gathered: _Round, started: datetime, timings: dict[str, float]
    ) -> RoundReport:
        """Screen the buffer, step with its staleness-scaled learning rate, evaluate, report."""
        clock = time.perf_counter()
        workers = self.config.assignment.num_workers
        slots = gathered.slots
        buffer = Assignment(workers, tuple((r.worker,) for r in slots), "none")
        detection = self.config.detection
        f = self.config.aggregation.f
        versions = {slot: t - 1 - tau for slot, tau in enumerate(gathered.stalenesses)}
        verdict = judge(
            compare_round(buffer, slots, mode=detection.mode, tol=detection.tolerance),
            f=0 if f == "auto" else f,
            outlier_threshold=detection.outlier_threshold,
            outlier_ratio=detection.ratio_for(self.config.data.mode),
            reference=self._crowds(Counter(versions.values())),
            strata=versions,
        )
        self._recent.extend(
            (versions[slot], verdict.accepted[slot]) for slot in sorted(verdict.accepted)
        )
        events = list(gathered.events)
        for worker, evidence in sorted(verdict.evidence.items()):
            events.append(
                EventReport(
                    worker,
                    self._client_ids[worker],
                    evidence.kind,
                    evidence.severity,
                    evidence.to_dict(),
                )
            )
        timings["detect"] = time.perf_counter() - clock
        clock = time.perf_counter()
        accepted = [gathered.stalenesses[slot] for slot in sorted(verdict.accepted)]
        settings = self._settings
        scale = (
            buffer_scale(
                settings.step_size,
                accepted,
                threshold=self._threshold,
                exponent=settings.exponent,
            )
            if accepted
            else 1.0
        )
        with self.optimizer.scaled_lr(scale):
            step = self._step(t, verdict, slots, verdict.accepted, {})
        for worker, evidence_dict in sorted(step.overflowed.items()):
            events.append(
                EventReport(
                    worker, self._client_ids[worker], EventKind.OVERFLOW, "high", evidence_dict
                )
            )
        flagged = set(verdict.flagged) | set(step.overflowed)
        if detection.exclude_flagged_for:
            for worker in flagged:
                self._benched[worker] = t + detection.exclude_flagged_for
        self._idle_rounds = 0 if step.applied else self._idle_rounds + 1
        self.optimizer.set_params(self.channel.commit(self.optimizer.params, t))
        self._stale_total += gathered.stale
        timings["aggregate"] = time.perf_counter() - clock
        clock = time.perf_counter()
        loss, accuracy, evaluated = self._evaluate(t)
        timings["evaluate"] = time.perf_counter() - clock
        summary = StalenessSummary.of(gathered.stalenesses)
        now = self._now()
        elapsed = (
            {"simulated_s": now - gathered.started_s, "simulated_total_s": now}
            if self._stream is None
            else {"collected_s": now - gathered.started_s}
        )
        return RoundReport(
            round=t,
            started_at=started,
            finished_at=datetime.now(UTC),
            loss=loss,
            accuracy=accuracy,
            flagged=tuple(sorted(flagged)),
            rejected=tuple(sorted(gathered.rejected)),
            dropped_files=tuple(sorted({*verdict.dropped, *step.left_out})),
            events=tuple(events),
            bytes_up=gathered.bytes_up,
            bytes_down=self._bytes_down,
            timings=timings,
            assignment=_buffer_summary(buffer, self.config.assignment.scheme),
            model_digest=model_digest(self.params),
            metrics={
                **step.metrics(),
                "eval_samples": float(evaluated),
                "benched_workers": float(len(self._benched)),
                "model_version": float(t),
                "buffered_updates": float(len(slots)),
                "staleness_mean": summary.mean,
                "staleness_max": float(summary.max),
                "stale_dropped": float(gathered.stale),
                "stale_dropped_total": float(self._stale_total),
                # Stale updates are this mode's late replies: came too late to count, as
                # do answers to tasks given up on.
                "late_replies": float(gathered.stale + gathered.late),
                "step_scale": scale,
                "away_tasks": float(gathered.away),
                "arrivals": float(gathered.arrivals),
                "dispatched_workers": float(self._dispatched),
                **elapsed,
            },
            agreement=AgreementRecord.from_verdict(verdict, left_out=step.left_out),
            responses=_responses(gathered.responses, self._client_ids),
            seen_clients=tuple(
                sorted({self._client_ids[w] for w in gathered.responses if w in self._client_ids})
            ),
        )


def _sync_refused(worker: int) -> Rejection:
    """Refuse a reply that asked for the full model: a fault of its worker."""
    return Rejection(
        worker, EventKind.MALFORMED_REPLY, "asked for the full model, which every task carries"
    )


def _responses(
    responses: Mapping[int, tuple[float, str]], clients: Mapping[int, str]
) -> tuple[WorkerResponse, ...]:
    """Each worker that came back during the round: its task's duration, kept or late (stale)."""
    return tuple(
        WorkerResponse(
            worker,
            seconds,
            "late" if status == "late" else "kept",
            client_id=clients.get(worker),
        )
        for worker, (seconds, status) in sorted(responses.items())
    )


def _buffer_summary(buffer: Assignment, scheme: str) -> dict[str, object]:
    loads = Counter(w for holders in buffer.files for w in holders)
    return {
        "scheme": scheme,
        "mode": "asynchronous",
        "num_workers": buffer.num_workers,
        "r": 1,
        "num_files": buffer.num_files,
        "files_per_worker": [min(loads.values(), default=0), max(loads.values(), default=0)],
    }
