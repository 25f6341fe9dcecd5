"""Running one case of ``eval_compression.py`` end to end, and many of them in processes.

Baselines plug into the platform's coordinator and workers: a ``BaselineReplica``
encodes each worker's uplink, a ``BaselineChannel`` decodes it on the
coordinator. In-process runs count every payload byte on the way back
(:class:`MeteredTransport`); a failed run becomes a row that says what failed.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from benchmarks.lib.case_pool import run_cases
from benchmarks.lib.compression_baselines import BaselineChannel, BaselineReplica
from benchmarks.lib.compression_grid import FLOWER, SEED, Case, K, Method, Settings
from benchmarks.lib.inprocess_sharing import ReportSink, SharedUpdates, SharingWorker
from phalanx.channel import Downlink
from phalanx.config import RunConfig
from phalanx.data import ImageDataset, load_dataset
from phalanx.exchange import Exchange, Listener
from phalanx.flower.simulation import SimulationEngine
from phalanx.nets import build_model, layer_shapes, num_params
from phalanx.replies import Task
from phalanx.roster import simulated_roster
from phalanx.runs import build_coordinator, execute_run
from phalanx_clients.inprocess import InProcessTransport
from phalanx_clients.worker import Worker


class MeteredTransport:
    """Wraps a transport and counts the payload bytes and payloads of every reply."""

    def __init__(self, inner: InProcessTransport) -> None:
        self.inner = inner
        self.payload_bytes = 0
        self.payloads = 0

    def exchange(
        self, tasks: Sequence[Task], downlink: Downlink, listener: Listener | None = None
    ) -> Exchange:
        """Exchange through the wrapped transport, counting what comes back."""
        exchange = self.inner.exchange(tasks, downlink, listener)
        for reply in exchange.replies:
            self.payload_bytes += sum(len(p) for p in reply.payloads)
            self.payloads += len(reply.payloads)
        return exchange


@functools.lru_cache(maxsize=1)
def _train_set() -> ImageDataset:
    return load_dataset("fashion-mnist", "train")


def in_process_transport(config: RunConfig, run_id: str, method: Method) -> MeteredTransport:
    """Honest workers sharing each round's updates, with the method's uplink encoder."""
    shared = SharedUpdates()
    workers: dict[int, Worker] = {}
    for ident in simulated_roster(run_id, config.assignment.num_workers):
        worker = SharingWorker(
            config=config,
            train_set=_train_set(),
            client_id=ident.client_id,
            private_key=ident.private_key,
            shared=shared,
        )
        compressor = method.compressor(worker.replica.layers)
        if compressor is not None:
            if method.error_feedback and config.assignment.r > 1:
                raise ValueError(f"{method.label} carries error feedback: it needs r = 1")
            worker.replica = BaselineReplica(
                compressor, worker.replica.layers, config.seed, error_feedback=method.error_feedback
            )
        workers[ident.worker] = worker
    return MeteredTransport(InProcessTransport(workers))


LATE_WINDOW = 5


@dataclass(frozen=True)
class Row:
    """One line of compression.json (the first nine keys are the documented ones).

    A run that failed has ``None`` metrics and its error in ``error``.
    """

    method: str
    params: dict[str, float | int | bool | str]
    final_accuracy: float | None
    uplink_bytes: int
    downlink_bytes: int
    reduction_vs_fp32: float | None
    bits_per_param: float | None
    r: int
    rounds: int
    label: str
    scheme: str
    transport: str
    samples_per_file: int
    parameters: int
    payloads: int | None
    payload_bytes: int | None
    uplink_bytes_per_worker_round: float
    downlink_bytes_per_worker_round: float
    accuracy_drop_vs_fp32: float | None
    late_subset_accuracy: float | None
    accuracy_by_round: list[float]
    uplink_by_round: list[int]
    downlink_by_round: list[int]
    digest_by_round: list[str]
    flagged: int
    rejected: int
    dropped_files: int
    seconds: float
    error: str | None = None
    note: str | None = None
    seed: int = SEED


def late_accuracy(by_round: Sequence[float], window: int = LATE_WINDOW) -> float | None:
    """Mean accuracy of the ``window`` rounds before the last (read on the evaluation subset).

    The last round is read on the whole test set, so it is left out; the mean
    shows how much of a difference in final accuracy is round-to-round noise.
    """
    before = list(by_round[-window - 1 : -1])
    return sum(before) / len(before) if len(before) == window else None


def run_case(case: Case, settings: Settings) -> Row:
    """Run one case end to end; a failure becomes a row too."""
    torch.set_num_threads(1)  # as the ClientApp does: one thread, so replicas agree bit for bit
    config = case.config(settings)
    sink = ReportSink()
    metered: MeteredTransport | None = None
    started = time.perf_counter()
    error = None
    try:
        if case.transport == FLOWER:
            execute_run(config, run_id=case.run_id, sink=sink, transport=SimulationEngine())
        else:
            metered = in_process_transport(config, case.run_id, case.method)
            coordinator = build_coordinator(config, case.run_id, metered, sink)
            compressor = case.method.compressor(layer_shapes(coordinator.model))
            if compressor is not None:
                coordinator.channel = BaselineChannel(coordinator.params, compressor)
                coordinator.decode = coordinator.channel.decoder
            coordinator.run()
    except Exception as exc:  # the grid goes on; the row says what failed
        error = f"round {len(sink.reports) + 1}: {type(exc).__name__}: {exc}"
    reports = sink.reports
    uplink = [r.bytes_up for r in reports]
    downlink = [r.bytes_down for r in reports]
    worker_rounds = max(1, K * len(reports))
    parameters = model_parameters()
    payloads = metered.payloads if metered else None
    payload_bytes = metered.payload_bytes if metered else None
    return Row(
        method=case.method.kind,
        params=dict(case.method.params),
        final_accuracy=reports[-1].accuracy if reports and error is None else None,
        uplink_bytes=sum(uplink),
        downlink_bytes=sum(downlink),
        reduction_vs_fp32=None,
        bits_per_param=(
            8 * payload_bytes / (payloads * parameters)
            if payloads and payload_bytes is not None
            else None
        ),
        r=case.r,
        rounds=len(reports),
        label=case.method.label,
        scheme=config.assignment.scheme,
        transport=case.transport,
        samples_per_file=config.data.samples_per_file,
        parameters=parameters,
        payloads=payloads,
        payload_bytes=payload_bytes,
        uplink_bytes_per_worker_round=sum(uplink) / worker_rounds,
        downlink_bytes_per_worker_round=sum(downlink) / worker_rounds,
        accuracy_drop_vs_fp32=None,
        late_subset_accuracy=late_accuracy([r.accuracy for r in reports]),
        accuracy_by_round=[r.accuracy for r in reports],
        uplink_by_round=uplink,
        downlink_by_round=downlink,
        digest_by_round=[r.model_digest for r in reports],
        flagged=sum(len(r.flagged) for r in reports),
        rejected=sum(len(r.rejected) for r in reports),
        dropped_files=sum(len(r.dropped_files) for r in reports),
        seconds=round(time.perf_counter() - started, 1),
        error=error,
        seed=config.seed,
    )


@functools.lru_cache(maxsize=1)
def model_parameters() -> int:
    """Parameters of the CNN every compression run trains."""
    return num_params(build_model("cnn", in_channels=1, image_size=28, num_classes=10))


def _cost(case: Case) -> int:
    """Rough work of a case: payloads encoded per round."""
    return (35 * 3 if case.r == 3 else K) * (3 if case.method.kind == "predictive coding" else 1)


def run_grid(
    cases: Sequence[Case], settings: Settings, jobs: int, log: Callable[[Row], None]
) -> list[Row]:
    """Run every case on the in-process transport, ``jobs`` processes at a time."""
    run = functools.partial(run_case, settings=settings)
    return run_cases(cases, run, jobs=jobs, cost=_cost, log=log)


def merge(old: Sequence[Row], new: Sequence[Row]) -> list[Row]:
    """``old`` with each row of the same label, r, transport, rounds and seed as a new row replaced.

    New rows of cases ``old`` does not have are appended.
    """

    def case_of(x: Row) -> tuple[str, int, str, int, int]:
        return (x.label, x.r, x.transport, x.rounds, x.seed)

    fresh = {case_of(x): x for x in new}
    merged = [fresh.pop(case_of(x), x) for x in old]
    return [*merged, *fresh.values()]
