"""Recording a run in the database, with its checkpoints on disk.

A round counts as done once its checkpoint file is written and the round row,
its detection events, its workers' response times and the checkpoint row are
committed in one transaction;
a killed coordinator therefore resumes after the last such round.

The coordinator's writes (rounds, heartbeats, the run's end) are tried again
while the database is locked or out of reach, within a
:class:`~phalanx.store.retry.RetryPolicy`; past it they raise
:class:`~phalanx.store.retry.DatabaseUnavailableError`, which says what could
not be recorded. Its reads are read-only transactions, which never wait for a
writer.
"""

from __future__ import annotations

import hashlib
import os
import socket
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from phalanx.config import RunConfig
from phalanx.event_kinds import FLAG_KINDS
from phalanx.identity import public_key_fingerprint, public_key_to_pem
from phalanx.partitions import PartitionReport
from phalanx.reports import RoundReport
from phalanx.roster import simulated_roster
from phalanx.runs.summary import RunSummary, build_summary
from phalanx.store import ClientStatus, RunStatus, Severity, checkpoints, rounds, runs
from phalanx.store.models import Client, DetectionEvent, Round
from phalanx.store.retry import RetryPolicy, retry_transient
from phalanx.store.transactions import read_session


def claimer_name() -> str:
    """Name this process as it signs its lease on a run."""
    return f"{socket.gethostname()}:{os.getpid()}"


class CheckpointError(RuntimeError):
    """A checkpoint is missing or does not match its recorded digest."""


@dataclass
class StoreRecorder:
    """The :class:`~phalanx.reports.RoundSink` that writes to the database.

    Parameters
    ----------
    sessions : sessionmaker
        Opens a session per round.
    run_id : str
        The run being recorded.
    checkpoint_dir : Path
        Checkpoint files go to ``checkpoint_dir / run_id``.
    claimer : str
        The lease this process holds on the run.
    retry : RetryPolicy
        How long to keep trying a write while the database is locked or out of reach.
    """

    sessions: sessionmaker[Session]
    run_id: str
    checkpoint_dir: Path
    claimer: str
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    _last_round: int | None = field(default=None, init=False, repr=False)

    def round_finished(self, report: RoundReport, checkpoint: bytes) -> None:
        """Write the checkpoint file, then the round, its events, responses and checkpoint row.

        Raises
        ------
        phalanx.store.retry.DatabaseUnavailableError
            When the database stayed locked or out of reach for the retry budget.
        """
        folder = self.checkpoint_dir / self.run_id
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"round-{report.round:06d}.pt"
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(checkpoint)
        with tmp.open("rb") as handle:
            os.fsync(handle.fileno())
        tmp.replace(path)
        digest = hashlib.sha256(checkpoint).hexdigest()

        def record() -> None:
            with self.sessions.begin() as session:
                last = checkpoints.latest_checkpoint(session, self.run_id)
                if last is not None and (last.round, last.digest) == (report.round, digest):
                    return  # an earlier attempt committed, but its answer was lost
                rounds.record_round(
                    session,
                    self.run_id,
                    _round_data(report),
                    _event_data(report),
                    responses=report.responses,
                    late_responses=report.late_responses,
                    seen_clients=report.seen_clients,
                    clients=report.clients,
                )
                checkpoints.save_checkpoint(
                    session, self.run_id, report.round, path=str(path.resolve()), digest=digest
                )

        retry_transient(record, what=f"recording round {report.round}", policy=self.retry)
        self._last_round = report.round
        for old in folder.glob("round-*.pt"):
            if old != path and old.name < path.name:
                old.unlink(missing_ok=True)

    def should_stop(self) -> bool:
        """Heartbeat between rounds; ``True`` once an operator asked to cancel the run.

        Raises
        ------
        phalanx.store.LeaseLostError
            When another coordinator took the run over.
        phalanx.store.retry.DatabaseUnavailableError
            When the database stayed locked or out of reach for the retry budget.
        """

        def beat() -> bool:
            with self.sessions.begin() as session:
                return runs.heartbeat(session, self.run_id, self.claimer).cancel_requested

        after = "" if self._last_round is None else f" after round {self._last_round}"
        return retry_transient(beat, what=f"sending the heartbeat{after}", policy=self.retry)


def _round_data(report: RoundReport) -> rounds.RoundData:
    return rounds.RoundData(
        number=report.round,
        started_at=report.started_at,
        finished_at=report.finished_at,
        duration_s=report.duration_s,
        timings=report.timings,
        bytes_up=report.bytes_up,
        bytes_down=report.bytes_down,
        metrics={"accuracy": report.accuracy, "loss": report.loss, **report.metrics},
        num_flagged=len(report.flagged),
        num_rejected=len(report.rejected),
        assignment=report.assignment,
        model_digest=report.model_digest,
        agreement=report.agreement.to_dict() if report.agreement is not None else None,
    )


def _event_data(report: RoundReport) -> list[rounds.EventData]:
    return [
        rounds.EventData(
            kind=e.kind,
            severity=Severity(e.severity),
            worker=e.worker,
            client_id=e.client_id,
            evidence=e.evidence,
        )
        for e in report.events
    ]


def create_simulated_run(sessions: sessionmaker[Session], config: RunConfig, claimer: str) -> str:
    """Create a run held by ``claimer`` and register its virtual clients; return the run id."""
    with sessions.begin() as session:
        run = runs.create_run(
            session, name=config.name, config=config.model_dump(mode="json"), seed=config.seed
        )
        run_id = run.id
        runs.start_run(session, run_id, claimer)
    register_simulated_clients(sessions, run_id, config)
    return run_id


def register_simulated_clients(
    sessions: sessionmaker[Session], run_id: str, config: RunConfig
) -> None:
    """Store the virtual clients of a simulated run, as its own (those already stored are kept).

    Each belongs to the run (``run_id``): it is not a client of the registry, and a
    second run of the same config has workers of its own, stored with that run.
    """
    with sessions.begin() as session:
        for ident in simulated_roster(run_id, config.assignment.num_workers):
            if session.get(Client, ident.client_id) is not None:
                continue
            session.add(
                Client(
                    id=ident.client_id,
                    name=f"{config.name}/worker-{ident.worker}",
                    public_key=public_key_to_pem(ident.public_key),
                    fingerprint=public_key_fingerprint(ident.public_key),
                    status=ClientStatus.APPROVED,
                    run_id=run_id,
                )
            )


def last_round(sessions: sessionmaker[Session], run_id: str) -> int:
    """Return the last round of a run with a checkpoint, where a resume goes on from (0: none)."""
    with read_session(sessions) as session:
        row = checkpoints.latest_checkpoint(session, run_id)
        return 0 if row is None else row.round


def load_checkpoint(sessions: sessionmaker[Session], run_id: str) -> tuple[int, bytes | None]:
    """Return the last finished round of a run and its checkpoint (``0, None`` if none).

    Raises
    ------
    CheckpointError
        When the checkpoint file is gone or its digest does not match.
    """
    with read_session(sessions) as session:
        row = checkpoints.latest_checkpoint(session, run_id)
        if row is None:
            return 0, None
        path, digest, number = Path(row.path), row.digest, row.round
    if not path.is_file():
        raise CheckpointError(f"checkpoint of round {number} is missing: {path}")
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != digest:
        raise CheckpointError(f"checkpoint of round {number} does not match its digest: {path}")
    return number, data


def stored_summary(sessions: sessionmaker[Session], run_id: str) -> RunSummary:
    """Summarise a run from its rows in the database (the same way for every backend)."""
    with read_session(sessions) as session:
        run = runs.get_run(session, run_id)
        config = RunConfig.model_validate(run.config)
        rows = list(rounds.list_rounds(session, run_id))
        of_run = DetectionEvent.run_id == run_id
        flagged = session.scalars(
            select(DetectionEvent.client_id)
            .where(of_run, DetectionEvent.kind.in_(FLAG_KINDS))
            .where(DetectionEvent.client_id.is_not(None))
            .distinct()
        ).all()
        refused = session.execute(
            select(DetectionEvent.kind, func.count())
            .where(of_run, DetectionEvent.kind.not_in(FLAG_KINDS))
            .group_by(DetectionEvent.kind)
        ).all()
        last: Round | None = rows[-1] if rows else None
        return build_summary(
            config,
            run_id,
            rounds=len(rows),
            final_accuracy=float(last.metrics.get("accuracy", 0.0)) if last else 0.0,
            flagged=[c for c in flagged if c is not None],
            refused={kind: count for kind, count in refused},
            bytes_up=sum(r.bytes_up for r in rows),
            bytes_down=sum(r.bytes_down for r in rows),
            model_digest=(last.model_digest or "") if last else "",
        )


def take_over(sessions: sessionmaker[Session], run_id: str, claimer: str) -> None:
    """Claim a run to resume it now, whatever the age of its last heartbeat."""
    with sessions.begin() as session:
        runs.start_run(session, run_id, claimer, stale_after=timedelta(0))


def finish(
    sessions: sessionmaker[Session],
    run_id: str,
    status: RunStatus,
    *,
    claimer: str,
    error: str | None = None,
    retry: RetryPolicy | None = None,
) -> RunSummary:
    """Mark a run finished and store its summary.

    Raises
    ------
    phalanx.store.retry.DatabaseUnavailableError
        When the database stayed locked or out of reach for the retry budget.
    """
    attempts = 0

    def end() -> RunSummary:
        nonlocal attempts
        attempts += 1
        summary = stored_summary(sessions, run_id)
        with sessions.begin() as session:
            if attempts > 1 and _finished_as(session, run_id, status, claimer, error):
                return summary  # an earlier attempt committed, but its answer was lost
            runs.finish_run(
                session,
                run_id,
                status,
                claimer=claimer,
                error=error,
                summary=summary.to_dict(),
                final_model_digest=summary.model_digest or None,
            )
        return summary

    what = f"recording that the run {status.value}"
    return retry_transient(end, what=what, policy=retry or RetryPolicy())


def record_partition(
    sessions: sessionmaker[Session],
    run_id: str,
    report: PartitionReport,
    retry: RetryPolicy | None = None,
) -> None:
    """Store the report of the run's partition before its first round (a resumed run: again).

    Raises
    ------
    phalanx.store.retry.DatabaseUnavailableError
        When the database stayed locked or out of reach for the retry budget.
    """

    def write() -> None:
        with sessions.begin() as session:
            runs.record_partition(session, run_id, report.to_dict())

    retry_transient(write, what="recording the run's partition", policy=retry or RetryPolicy())


def _finished_as(
    session: Session, run_id: str, status: RunStatus, claimer: str, error: str | None
) -> bool:
    run = runs.get_run(session, run_id)
    return (run.status, run.claimed_by, run.error) == (status, claimer, error)


def stored_config(sessions: sessionmaker[Session], run_id: str) -> RunConfig:
    """Return the config a run was started with."""
    with read_session(sessions) as session:
        return RunConfig.model_validate(runs.get_run(session, run_id).config)
