"""The one executor: a run driven from its last checkpoint to its end, over any transport.

Every run, simulated or deployed, is executed by :func:`execute`. It takes the
run id and the database, a *roster* (who the workers are: simulated identities
derived from the run id, or enrolled clients mapped to Flower nodes; see
:mod:`phalanx.roster`) and a *transport* (how the coordinator reaches them),
and owns the rest: the lease and its heartbeat, a cancel between rounds,
retried database writes, finishing the run and its one
:class:`~phalanx.runs.summary.RunSummary`.

A transport is either a :class:`~phalanx.exchange.Transport` connected
already (the in-process test double), or a :class:`Federation`: a runtime that
finds the nodes the roster seats and connects a transport to them. Flower's
simulation engine (``phalanx.flower.simulation.SimulationEngine``) and a
ServerApp's Grid (``phalanx.flower.server_app.GridFederation``) are federations;
this module knows neither.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from sqlalchemy.orm import Session, sessionmaker

from phalanx.async_coordinator import AsyncCoordinator
from phalanx.config import RunConfig
from phalanx.coordinator import Coordinator
from phalanx.data import load_dataset
from phalanx.exchange import Transport
from phalanx.faults import failure_cause
from phalanx.local_data import run_partition
from phalanx.nets import flatten_params, init_model
from phalanx.partitions import PartitionReport
from phalanx.reports import RoundReport, RoundSink
from phalanx.roster import Member, Roster, RosterSource, SimulatedRoster
from phalanx.runs.recorder import (
    StoreRecorder,
    finish,
    load_checkpoint,
    record_partition,
    stored_config,
)
from phalanx.runs.summary import RunSummary
from phalanx.store import LeaseLostError, RunStatus
from phalanx.store.retry import DatabaseUnavailableError, RetryPolicy

__all__ = [
    "Connected",
    "Drive",
    "Federation",
    "build_coordinator",
    "execute",
    "execute_run",
    "simulated_partition",
]

Drive = Callable[[Roster, Transport], None]
"""Drives the coordinator over a transport to the seated workers; called once."""


@runtime_checkable
class Federation(Protocol):
    """Where a run's workers are, and how the coordinator reaches them."""

    def connect(self, config: RunConfig, roster: RosterSource, drive: Drive) -> None:
        """Seat the run's workers, connect a transport to them and call ``drive`` once.

        Returns once ``drive`` returned; re-raises what it raised.

        Raises
        ------
        TimeoutError
            When too few workers connected in the run's ``deployment.nodes_timeout_s``.
        """
        ...


@dataclass(frozen=True)
class Connected:
    """A federation whose transport is connected already and reaches every worker.

    The in-process transport is one: workers are addressed by their index, so
    the roster is seated on nodes ``0 .. num_workers - 1``.
    """

    transport: Transport

    def connect(self, config: RunConfig, roster: RosterSource, drive: Drive) -> None:
        """Seat every worker and drive the coordinator over the transport."""
        workers = config.assignment.num_workers
        seated = roster.seat(range(workers), workers)
        if seated is None:
            raise ValueError(f"the roster cannot seat {workers} workers on {workers} nodes")
        drive(seated, self.transport)


def simulated_partition(config: RunConfig) -> PartitionReport | None:
    """Return the report of a simulated local-data run's partition; ``None`` for other runs.

    The coordinator derives the partition from the config, as every simulated client
    derives its own part (:mod:`phalanx.local_data`).

    Raises
    ------
    ValueError
        When the run's data cannot be partitioned as ``data.partition`` says.
    """
    if config.data.mode != "local" or config.deployment.backend != "simulation":
        return None
    train = load_dataset(config.data.dataset, "train", num_classes=config.data.num_classes)
    return run_partition(config, train)[1]


def build_coordinator(
    config: RunConfig,
    run_id: str,
    transport: Transport,
    sink: RoundSink,
    *,
    checkpoint: bytes | None = None,
    members: Mapping[int, Member] | None = None,
    partition: PartitionReport | None = None,
) -> Coordinator:
    """Build a coordinator, restored from ``checkpoint`` when given.

    An :class:`~phalanx.async_coordinator.AsyncCoordinator` when the run's
    ``asynchronous`` section is enabled. ``members`` are the workers' identities: the
    simulated identities of ``run_id`` by default, the seated roster's members otherwise.
    ``partition``: a simulated local-data run's (:func:`simulated_partition`), derived
    when not given.
    """
    test_set = load_dataset(config.data.dataset, "test", num_classes=config.data.num_classes)
    model = init_model(
        config.data.model,
        in_channels=int(test_set.x.shape[1]),
        image_size=int(test_set.x.shape[-1]),
        num_classes=test_set.num_classes,
        seed=config.seed,
    )
    if members is None:
        workers = config.assignment.num_workers
        seated = SimulatedRoster(run_id).seat(range(workers), workers)
        assert seated is not None  # as many nodes as workers
        members = seated.members
    kind = AsyncCoordinator if config.asynchronous.enabled else Coordinator
    coordinator = kind(
        config,
        run_id=run_id,
        transport=transport,
        members=members,
        model=model,
        params=flatten_params(model),
        test_set=test_set,
        sink=sink,
        partition=partition if partition is not None else simulated_partition(config),
    )
    if checkpoint is not None:
        coordinator.restore(checkpoint)
    return coordinator


def execute_run(
    config: RunConfig,
    *,
    run_id: str,
    sink: RoundSink,
    transport: Transport | Federation,
    roster: RosterSource | None = None,
    start_round: int = 1,
    checkpoint: bytes | None = None,
    on_round: Callable[[RoundReport], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    partition: PartitionReport | None = None,
) -> list[RoundReport]:
    """Run rounds ``start_round ..`` of a run and return their reports, recording nothing.

    Parameters
    ----------
    config : RunConfig
        The run.
    run_id : str
        Its id (simulated identities and the round nonces derive from it).
    sink : RoundSink
        Receives each finished round and its checkpoint.
    transport : Transport or Federation
        A transport connected already, or a federation that connects one.
    roster : RosterSource, optional
        Who the workers are; the simulated identities of ``run_id`` by default.
    start_round, checkpoint
        Where to resume.
    on_round, should_stop
        Called after each round; the run stops between rounds once
        ``should_stop`` returns ``True``.
    partition : PartitionReport, optional
        A simulated local-data run's partition (derived from the config when not given).
    """
    federation = transport if isinstance(transport, Federation) else Connected(transport)
    reports: list[RoundReport] = []

    def drive(seated: Roster, connected: Transport) -> None:
        coordinator = build_coordinator(
            config,
            run_id,
            connected,
            sink,
            checkpoint=checkpoint,
            members=seated.members,
            partition=partition,
        )
        reports.extend(
            coordinator.run(start_round=start_round, on_round=on_round, should_stop=should_stop)
        )

    federation.connect(config, roster or SimulatedRoster(run_id), drive)
    return reports


def execute(
    sessions: sessionmaker[Session],
    run_id: str,
    *,
    transport: Transport | Federation,
    roster: RosterSource,
    claimer: str,
    checkpoint_dir: Path,
    on_round: Callable[[RoundReport], None] | None = None,
    retry: RetryPolicy | None = None,
) -> RunSummary:
    """Run (or resume) a claimed run from its last checkpoint to its end; return its summary.

    Parameters
    ----------
    sessions : sessionmaker
        The Phalanx database, where the run is ``running`` under ``claimer``.
    run_id : str
        The run; its config is the one stored with it.
    transport : Transport or Federation
        How the coordinator reaches the workers (see :func:`execute_run`).
    roster : RosterSource
        Who the workers are; its ``backend`` must be the run config's.
    claimer : str
        The lease this process holds (heartbeats between rounds).
    checkpoint_dir : Path
        Checkpoint files go to ``checkpoint_dir / run_id``.
    on_round : callable, optional
        Called after each recorded round.
    retry : RetryPolicy, optional
        How long a write may wait for a locked or unreachable database.

    Returns
    -------
    RunSummary
        The summary stored with the finished run.

    Notes
    -----
    The run ends ``succeeded`` after its last round, ``cancelled`` when an
    operator cancelled it between rounds, and ``failed`` (with the cause in one
    line) when anything else raised: too few workers, a checkpoint that is gone,
    a round that could not go on, or a database that stayed locked or out of
    reach for longer than ``retry`` allows. The exception is re-raised. A run
    interrupted from outside (Ctrl-C, a lost lease) is left ``running`` so that
    it can be resumed or reclaimed; so is a run whose end could not be recorded
    either, until its stale heartbeat lets a coordinator reclaim it.
    """
    retry = retry or RetryPolicy()
    done = 0
    try:
        config = stored_config(sessions, run_id)
        if roster.backend != config.deployment.backend:
            raise ValueError(
                f"the run's deployment.backend is {config.deployment.backend!r}, "
                f"but its workers would be {roster.backend} workers"
            )
        done, checkpoint = load_checkpoint(sessions, run_id)
        partition = simulated_partition(config)
        if partition is not None:  # stored before the first round, kept with the run
            record_partition(sessions, run_id, partition, retry)
        recorder = StoreRecorder(sessions, run_id, checkpoint_dir, claimer, retry)
        reports = execute_run(
            config,
            run_id=run_id,
            sink=recorder,
            transport=transport,
            roster=roster,
            start_round=done + 1,
            checkpoint=checkpoint,
            on_round=on_round,
            should_stop=recorder.should_stop,
            partition=partition,
        )
    except LeaseLostError:
        raise
    except Exception as exc:
        cause = str(exc) if isinstance(exc, DatabaseUnavailableError) else failure_cause(exc)
        finish(sessions, run_id, RunStatus.FAILED, claimer=claimer, error=cause, retry=retry)
        raise
    last = reports[-1].round if reports else done
    status = RunStatus.SUCCEEDED if last >= config.rounds else RunStatus.CANCELLED
    return finish(sessions, run_id, status, claimer=claimer, retry=retry)
