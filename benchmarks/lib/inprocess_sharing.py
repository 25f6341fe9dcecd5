"""Helpers the evaluations share to run many federations in one process.

``ReportSink`` keeps round reports in memory; ``SharingWorker`` is a worker whose
honest file updates come from one computation per round and file
(``SharedUpdates``), since an honest update is a pure function of (model,
round, file). Each worker still encodes, signs and sends its own payload, and the
evaluations check the shortcut against runs through Flower, which take none.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor

from phalanx.config import RunConfig
from phalanx.data import ImageDataset
from phalanx.nets import model_digest
from phalanx.replies import Task
from phalanx.reports import RoundReport
from phalanx_clients.file_updates import compute_file_updates
from phalanx_clients.worker import Worker


class ReportSink:
    """Keeps the rounds in memory (no database needed)."""

    def __init__(self) -> None:
        self.reports: list[RoundReport] = []

    def round_finished(self, report: RoundReport, checkpoint: bytes) -> None:
        """Keep the report; the checkpoint is not needed."""
        self.reports.append(report)


class SharedUpdates:
    """Honest file updates of the current round, computed once for every worker.

    The r workers holding a file would compute the same bits r times; in one
    process one computation serves them all.
    """

    def __init__(self) -> None:
        self._key: tuple[int, str] | None = None
        self._updates: dict[int, Tensor] = {}

    def updates(
        self, config: RunConfig, train_set: ImageDataset, task: Task, params: Tensor
    ) -> dict[int, Tensor]:
        """The honest updates of the task's files."""
        key = (task.round, model_digest(params))
        if key != self._key:
            self._key, self._updates = key, {}
        missing = tuple(f for f in task.files if f not in self._updates)
        if missing:
            samples = task.samples_by_file()
            self._updates.update(
                compute_file_updates(
                    config, train_set, task.round, {f: samples[f] for f in missing}, params
                )
            )
        return {f: self._updates[f] for f in task.files}


@dataclass
class SharingWorker(Worker):
    """A worker whose honest updates come from the round's shared computation."""

    shared: SharedUpdates = field(default_factory=SharedUpdates)

    def honest_updates(self, task: Task, params: Tensor) -> dict[int, Tensor]:
        """Same bits as :meth:`Worker.honest_updates`, computed once per file."""
        return self.shared.updates(self.config, self.train_set, task, params)
