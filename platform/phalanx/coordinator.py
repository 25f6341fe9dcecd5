"""The round loop: assign, dispatch, verify, detect, aggregate, step, evaluate, report.

The coordinator talks to workers through a :class:`Transport` and reports
through a :class:`~phalanx.reports.RoundSink`, so it knows neither Flower nor
the database (ARCHITECTURE.md section 4).
"""

from __future__ import annotations

import functools
import io
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

import torch
from cryptography.hazmat.primitives.asymmetric import ec
from torch import Tensor, nn

from phalanx.aggregation import aggregate, largest_f
from phalanx.assignment import Assignment
from phalanx.channel import Downlink, make_channel
from phalanx.config import RunConfig
from phalanx.data import ImageDataset
from phalanx.detection import Replica, detect, payload_digest
from phalanx.nets import layer_shapes, load_flat_, model_digest
from phalanx.optim import ServerOptimizer
from phalanx.plan import base_assignment, round_assignment
from phalanx.replies import (
    Decoder,
    Rejection,
    Reply,
    ReplyRejectedError,
    Task,
    check_reply,
)
from phalanx.reports import EventReport, RoundReport, RoundSink
from phalanx.training import derive_seed, evaluate


@dataclass(frozen=True)
class Exchange:
    """The replies of one round, as a transport collected them."""

    replies: Sequence[Reply]
    bytes_down: int
    malformed: Sequence[Rejection] = ()


class Transport(Protocol):
    """Carries a round's tasks and the global model to workers and brings replies back."""

    def exchange(self, tasks: Sequence[Task], downlink: Downlink) -> Exchange:
        """Send every task with the downlink; return the replies that arrived in time."""
        ...


@dataclass(frozen=True)
class Member:
    """A worker of the run: its stable index, client id and public key."""

    worker: int
    client_id: str
    public_key: ec.EllipticCurvePublicKey


class Coordinator:
    """Drives a run round by round.

    Parameters
    ----------
    config : RunConfig
        The run.
    run_id : str
        Identifier written into every task and signed into every reply.
    transport : Transport
        How tasks reach workers.
    members : Mapping[int, Member]
        Worker index -> identity, for every worker of the run.
    model : nn.Module
        The model architecture; its parameters are overwritten from ``params``.
    params : Tensor
        Initial (or restored) flat global parameters.
    test_set : ImageDataset
        Held-out data evaluated after every round.
    sink : RoundSink
        Receives each finished round with its checkpoint.
    decode : Decoder, optional
        Turns a payload into an update; defaults to the run's channel (raw
        float32, or the codec when ``config.codec.enabled``).
    """

    def __init__(
        self,
        config: RunConfig,
        *,
        run_id: str,
        transport: Transport,
        members: Mapping[int, Member],
        model: nn.Module,
        params: Tensor,
        test_set: ImageDataset,
        sink: RoundSink,
        decode: Decoder | None = None,
    ) -> None:
        self.config = config
        self.run_id = run_id
        self.transport = transport
        self.members = dict(members)
        self.model = model
        self.test_set = test_set
        self.sink = sink
        self.channel = make_channel(config.codec, layer_shapes(model), params, config.seed)
        self.decode = decode or self.channel.decoder
        t = config.training
        self.optimizer = ServerOptimizer(
            params, kind=t.optimizer, lr=t.server_lr, momentum=t.momentum
        )
        self._base = base_assignment(config)
        # Worker -> last round it gets no work (detection.exclude_flagged_for).
        self._benched: dict[int, int] = {}
        missing = set(range(config.assignment.num_workers)) - set(self.members)
        if missing:
            raise ValueError(f"no identity for workers {sorted(missing)}")

    @property
    def params(self) -> Tensor:
        """The current global parameters."""
        return self.optimizer.params

    def restore(self, checkpoint: bytes) -> None:
        """Continue from a checkpoint written by an earlier run of the same config."""
        state = torch.load(io.BytesIO(checkpoint), weights_only=True)
        self.optimizer.load_state_dict(state["optimizer"])
        self._benched = {int(w): int(t) for w, t in state.get("benched", {}).items()}
        channel = {k: v.numpy() for k, v in state["channel"].items()}
        self.channel.restore(channel, self.params)

    def checkpoint(self) -> bytes:
        """Serialise everything the next round depends on."""
        buffer = io.BytesIO()
        channel = {k: torch.from_numpy(v) for k, v in self.channel.state().items()}
        torch.save(
            {
                "optimizer": self.optimizer.state_dict(),
                "channel": channel,
                "benched": dict(self._benched),
            },
            buffer,
        )
        return buffer.getvalue()

    def run(
        self,
        *,
        start_round: int = 1,
        on_round: Callable[[RoundReport], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> list[RoundReport]:
        """Run rounds ``start_round .. config.rounds``; stop early if ``should_stop()``."""
        reports = []
        for t in range(start_round, self.config.rounds + 1):
            if should_stop is not None and should_stop():
                break
            report = self.run_round(t)
            reports.append(report)
            if on_round is not None:
                on_round(report)
        return reports

    def run_round(self, t: int) -> RoundReport:
        """Run round ``t`` end to end and hand it to the sink."""
        started = datetime.now(UTC)
        timings: dict[str, float] = {}
        clock = time.perf_counter()

        def lap(name: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            timings[name] = now - clock
            clock = now

        assignment = round_assignment(self.config, t, self._base)
        nonce = secrets.token_hex(16)
        self._benched = {w: until for w, until in self._benched.items() if until >= t}
        benched = frozenset(self._benched)
        tasks = {
            w: Task(self.run_id, t, nonce, w, assignment.files_of(w))
            for w in range(assignment.num_workers)
            if assignment.files_of(w) and w not in benched
        }
        lap("assign")

        replies, bytes_down, malformed = self._exchange(tasks)
        lap("exchange")

        replicas, events, rejected = self._verify(replies, tasks)
        for bad in malformed:
            rejected.add(bad.worker)
            events.append(
                EventReport(
                    worker=bad.worker,
                    client_id=self.members[bad.worker].client_id,
                    kind=bad.kind,
                    severity="high",
                    evidence={"reason": bad.reason, "round": t},
                )
            )
        lap("verify")

        verdict = detect(
            assignment,
            replicas,
            mode=self.config.detection.mode,
            tol=self.config.detection.tolerance,
            f=self.config.aggregation.f,
            on_tie=self.config.detection.on_tie,
            outlier_threshold=self.config.detection.outlier_threshold,
        )
        pause = self.config.detection.exclude_flagged_for
        for worker in sorted(verdict.flagged):
            if pause:
                self._benched[worker] = t + pause
            evidence = verdict.evidence[worker]
            events.append(
                EventReport(
                    worker=worker,
                    client_id=self.members[worker].client_id,
                    kind=evidence.kind,
                    severity=evidence.severity,
                    evidence=evidence.to_dict(),
                )
            )
        lap("detect")

        files = sorted(verdict.accepted)
        agg = self.config.aggregation
        # Flagged workers are out, so fewer inputs may remain than the configured f
        # assumes: tolerate as many as the rule can with what is left.
        f_used = largest_f(agg.rule, len(files))
        if f_used is not None:
            f_used = min(agg.f, f_used)
            stacked = torch.stack([verdict.accepted[f] for f in files])
            pre_options = dict(agg.pre_options)
            if agg.pre == "bucketing":
                pre_options.setdefault("seed", derive_seed(self.config.seed, t, -2))
            update = aggregate(
                agg.rule,
                stacked,
                f=f_used,
                pre=agg.pre,
                pre_options=pre_options if agg.pre else None,
                **agg.options,
            )
            self.optimizer.step(update)
        self.optimizer.set_params(self.channel.commit(self.optimizer.params, t))
        lap("aggregate")

        load_flat_(self.model, self.params)
        eval_set = self._eval_set(final=t == self.config.rounds)
        loss, accuracy = evaluate(self.model, eval_set)
        lap("evaluate")

        report = RoundReport(
            round=t,
            started_at=started,
            finished_at=datetime.now(UTC),
            loss=loss,
            accuracy=accuracy,
            flagged=tuple(sorted(verdict.flagged)),
            rejected=tuple(sorted(rejected)),
            dropped_files=tuple(verdict.dropped),
            events=tuple(events),
            bytes_up=sum(r.num_bytes for r in replies),
            bytes_down=bytes_down,
            timings=timings,
            assignment=_assignment_summary(assignment),
            model_digest=model_digest(self.params),
            metrics={
                "accepted_files": float(len(files)),
                "eval_samples": float(len(eval_set.y)),
                # -1: too few accepted files for the rule; the model did not move.
                "f_used": float(-1 if f_used is None else f_used),
                "benched_workers": float(len(benched)),
            },
        )
        self.sink.round_finished(report, self.checkpoint())
        timings["persist"] = time.perf_counter() - clock
        return report

    def _exchange(self, tasks: Mapping[int, Task]) -> tuple[list[Reply], int, list[Rejection]]:
        """Exchange the round's tasks; workers that lost track get the full state once."""
        first = self.transport.exchange(list(tasks.values()), self.channel.downlink())
        replies = [r for r in first.replies if not r.need_sync]
        bytes_down, malformed = first.bytes_down, list(first.malformed)
        lost = [tasks[r.worker] for r in first.replies if r.need_sync and r.worker in tasks]
        if lost:
            second = self.transport.exchange(lost, self.channel.sync())
            for reply in second.replies:
                if reply.need_sync:
                    malformed.append(
                        Rejection(reply.worker, "malformed_reply", "asked for a sync twice")
                    )
                else:
                    replies.append(reply)
            bytes_down += second.bytes_down
            malformed.extend(second.malformed)
        return replies, bytes_down, malformed

    def _verify(
        self, replies: Sequence[Reply], tasks: Mapping[int, Task]
    ) -> tuple[list[Replica], list[EventReport], set[int]]:
        replicas: list[Replica] = []
        events: list[EventReport] = []
        rejected: set[int] = set()
        seen: set[int] = set()
        # Honest replicas of a file send identical bytes: hash and decode each payload
        # once a round (a repeat costs a dictionary lookup and a comparison of the bytes).
        decode_once = functools.cache(self.decode)
        digest_once = functools.cache(payload_digest)

        for reply in replies:
            member = self.members.get(reply.worker)
            task = tasks.get(reply.worker)
            try:
                if member is None or task is None:
                    raise ReplyRejectedError(
                        "unassigned_file", f"worker {reply.worker} had no task this round"
                    )
                if reply.worker in seen:
                    raise ReplyRejectedError("malformed_reply", "a second reply for the same task")
                seen.add(reply.worker)
                replicas.extend(
                    check_reply(
                        reply,
                        task,
                        client_id=member.client_id,
                        public_key=member.public_key,
                        decode=decode_once,
                        digest=digest_once,
                    )
                )
            except ReplyRejectedError as exc:
                rejected.add(reply.worker)
                events.append(
                    EventReport(
                        worker=reply.worker,
                        client_id=member.client_id if member else None,
                        kind=exc.kind,
                        severity="high",
                        evidence={"reason": exc.reason, "round": reply.round},
                    )
                )
        return replicas, events, rejected

    def _eval_set(self, *, final: bool) -> ImageDataset:
        n = self.config.data.eval_samples
        if final or n is None or n >= len(self.test_set.y):
            return self.test_set
        return ImageDataset(
            x=self.test_set.x[:n],
            y=self.test_set.y[:n],
            num_classes=self.test_set.num_classes,
            name=self.test_set.name,
        )


def _assignment_summary(assignment: Assignment) -> dict[str, object]:
    loads = [len(assignment.files_of(w)) for w in range(assignment.num_workers)]
    return {
        "scheme": assignment.scheme,
        "num_workers": assignment.num_workers,
        "r": assignment.replication,
        "num_files": assignment.num_files,
        "files_per_worker": [min(loads, default=0), max(loads, default=0)],
    }
