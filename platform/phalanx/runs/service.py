"""Executing a run that lives in the database, from its last finished round to its end."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from phalanx.config import RunConfig
from phalanx.coordinator import Transport
from phalanx.faults import failure_cause
from phalanx.reports import RoundReport
from phalanx.runs.execute import execute_run
from phalanx.runs.recorder import StoreRecorder, finish, load_checkpoint
from phalanx.runs.summary import RunSummary
from phalanx.store import LeaseLostError, RunStatus
from phalanx.store.retry import DatabaseUnavailableError, RetryPolicy


def run_recorded(
    sessions: sessionmaker[Session],
    run_id: str,
    config: RunConfig,
    *,
    claimer: str,
    checkpoint_dir: Path,
    on_round: Callable[[RoundReport], None] | None = None,
    transport: Transport | None = None,
    ray_address: str | None = None,
    retry: RetryPolicy | None = None,
) -> RunSummary:
    """Run (or resume) a claimed run, recording every round; return its summary.

    The run continues after its last checkpoint. It ends ``succeeded`` after its
    last round, ``cancelled`` when an operator cancelled it between rounds, and
    ``failed`` (with the error) when the round loop raised, including when the
    database stayed locked or out of reach for longer than ``retry`` allows
    while a round or a heartbeat was being recorded (the error then says so in
    one line). A run interrupted from outside (Ctrl-C, a lost lease) is left
    ``running`` so that it can be resumed or reclaimed; so is a run whose end
    could not be recorded either, until its stale heartbeat lets a coordinator
    reclaim it.
    """
    retry = retry or RetryPolicy()
    done, checkpoint = load_checkpoint(sessions, run_id)
    recorder = StoreRecorder(sessions, run_id, checkpoint_dir, claimer, retry)
    try:
        reports = execute_run(
            config,
            run_id=run_id,
            sink=recorder,
            start_round=done + 1,
            checkpoint=checkpoint,
            on_round=on_round,
            should_stop=recorder.should_stop,
            transport=transport,
            ray_address=ray_address,
        )
    except LeaseLostError:
        raise
    except Exception as exc:
        error = str(exc) if isinstance(exc, DatabaseUnavailableError) else None
        finish(
            sessions,
            run_id,
            RunStatus.FAILED,
            claimer=claimer,
            error=error or failure_cause(exc),
            retry=retry,
        )
        raise
    last = reports[-1].round if reports else done
    status = RunStatus.SUCCEEDED if last >= config.rounds else RunStatus.CANCELLED
    return finish(sessions, run_id, status, claimer=claimer, retry=retry)
