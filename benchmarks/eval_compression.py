"""Uplink bytes against accuracy: Phalanx's predictive coding beside standard compressors.

Fashion-MNIST, the small CNN (421,642 parameters), K = 15 workers, no attack
(q = 0, so accuracy differences come from compression alone), the mean rule,
Adam on the server. Two assignments: r = 1 (scheme ``none``, 15 files a round)
and r = 3 (scheme ``bibd``, the Steiner triple system STS(15): 35 files, each
computed by 3 workers, 7 files per worker). Every method of one r runs from the
same seed, the same rounds' samples and the same initial model.

Methods (uplink; the downlink is what the channel sends, counted as it is):

- ``fp32``: raw float32 updates (the platform's ``PlainChannel``).
- ``zstd``: zstd level 3 on the float32 bytes, lossless (the final model must
  equal fp32's bit for bit).
- ``qsgd``: s levels per bucket of 512, stochastic rounding seeded from (run
  seed, round, file), the signed levels ANS-coded with their frequency table.
- ``top-k + EF``: the 0.5 % largest magnitudes with error feedback, r = 1 only:
  a worker's error memory is private, so with replicas honest workers would
  send different bytes for the same file and detection would flag them.
- ``signsgd``: one bit per coordinate plus one float32 scale per layer.
- ``predictive coding``: the platform's codec (``CodecChannel`` and
  ``ModelReplica`` through ``config.codec``) at several rate weights lambda; its
  downlink is the compressed global delta. ``lambda`` is ``codec.rd_lambda``;
  ``downlink_lambda`` is ``codec.downlink_rd_lambda``, the broadcast's own rate
  weight (unset: the broadcast is coded at ``rd_lambda`` too); ``unbiased``
  is ``codec.unbiased`` (stochastic rounding of the uplink); ``extra_step``
  adds a coarser step to ``codec.step_sizes``; ``rd_distortion`` is
  ``codec.rd_distortion``; ``low_rank`` is ``codec.low_rank`` (fully connected
  weights may go as two quantized factors of that rank), which the r = 1
  candidate pairs with ``codec.error_feedback``. Every row is a plain run
  config.

Baselines plug into the same coordinator and workers (``compression_baselines``:
a ``BaselineReplica`` encodes, a ``BaselineChannel`` decodes). Runs go through
the in-process transport (``phalanx_clients.inprocess``, a test double of
Flower's runtime: the same coordinator, workers and training code in one
process); one predictive-coding case also runs through Flower's simulation
engine, and its bytes and model digests are compared round by round with the
in-process run of the same config.

Bytes: ``uplink_bytes`` is the sum over rounds of the round reports'
``bytes_up`` (payloads, their SHA-256 digests and the ECDSA signatures);
``bits_per_param`` counts payload bytes only (8 x payload bytes / (payloads x
parameters)). ``reduction_vs_fp32`` is ``1 - uplink_bytes / fp32's`` at the same r.

Writes ``benchmarks/results/compression.json``, ``compression.md`` and
``compression_r1.png`` / ``compression_r3.png``. ``--only LABEL`` (repeatable)
reruns just those methods and merges their rows into an existing
``compression.json`` (replacing the rows of the same method and r), so one
method can be rerun without the whole grid; ``--only`` also accepts the
methods of ``EXTRA_METHODS``, which the full grid leaves out.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import multiprocessing  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from concurrent.futures import ProcessPoolExecutor, as_completed  # noqa: E402
from dataclasses import asdict, dataclass, replace  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Literal  # noqa: E402

import torch  # noqa: E402

from phalanx.channel import Downlink  # noqa: E402
from phalanx.codec import LayerSpec  # noqa: E402
from phalanx.config import CodecSettings, RunConfig  # noqa: E402
from phalanx.coordinator import Exchange  # noqa: E402
from phalanx.data import ImageDataset, load_dataset  # noqa: E402
from phalanx.nets import build_model, layer_shapes, num_params  # noqa: E402
from phalanx.replies import Task  # noqa: E402
from phalanx.roster import simulated_roster  # noqa: E402
from phalanx.runs import build_coordinator, execute_run  # noqa: E402
from phalanx_clients.inprocess import InProcessTransport  # noqa: E402
from phalanx_clients.worker import Worker  # noqa: E402

if not __package__:  # run as `python benchmarks/NAME.py`: import `benchmarks` from this checkout
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.lib.compression_baselines import (  # noqa: E402
    QSGD,
    BaselineChannel,
    BaselineReplica,
    Compressor,
    ScaledSign,
    TopK,
    Zstd,
    layer_sizes,
)
from benchmarks.lib.inprocess_sharing import (  # noqa: E402
    ReportSink,
    SharedUpdates,
    SharingWorker,
)

RESULTS = Path(__file__).parent / "results"
K = 15
SEED = 2026
IN_PROCESS = "in-process (test double of Flower's runtime)"
FLOWER = "flower-simulation"
SERVER_LR = 0.004
"""Adam's step on the server: fp32's best of 0.002, 0.004 and 0.008 over seeds 2026 to 2028.

At r = 1 fp32 ended at 78.45, 80.26 and 77.75 % (means over the three seeds),
at r = 3 at 78.40, 80.01 and 77.97 %; reproduce one with ``--only fp32 --seeds 3
--server-lr LR --out DIR``.
"""
GOAL_REDUCTION = 0.99
GOAL_ACCURACY_DROP = 0.01
LATE_WINDOW = 5
Kind = Literal["fp32", "zstd", "qsgd", "top-k + EF", "signsgd", "predictive coding"]


# --------------------------------------------------------------------------- the grid


@dataclass(frozen=True)
class Method:
    """A compressor and its settings."""

    kind: Kind
    params: tuple[tuple[str, float | int | bool | str], ...] = ()
    r_one_only: bool = False

    @property
    def label(self) -> str:
        """Short name with the settings, for tables and logs."""
        settings = ", ".join(f"{k}={v}" for k, v in self.params)
        return f"{self.kind} ({settings})" if settings else self.kind

    @property
    def key(self) -> str:
        """File-name-safe identifier."""
        settings = "-".join(f"{k}{v}" for k, v in self.params)
        return "".join(c if c.isalnum() else "-" for c in f"{self.kind}-{settings}".lower())

    def setting(self, name: str) -> float | int | bool | str:
        """One of ``params``."""
        return dict(self.params)[name]

    def compressor(self, layers: LayerSpec) -> Compressor | None:
        """The baseline compressor, or ``None`` for the platform's own channels."""
        sizes = layer_sizes(layers)
        dim = sum(sizes)
        if self.kind == "zstd":
            return Zstd(dim, level=int(self.setting("level")))
        if self.kind == "qsgd":
            return QSGD(dim, levels=int(self.setting("s")), bucket=int(self.setting("bucket")))
        if self.kind == "top-k + EF":
            return TopK(dim, fraction=float(self.setting("fraction")))
        if self.kind == "signsgd":
            return ScaledSign(sizes)
        return None

    @property
    def error_feedback(self) -> bool:
        """Whether the worker carries its compression error (r = 1 only)."""
        return self.kind == "top-k + EF" or bool(dict(self.params).get("error_feedback", False))


def predictive(
    rd_lambda: float,
    *,
    error_feedback: bool = False,
    downlink_lambda: float | None = None,
    unbiased: bool = False,
    extra_step: float | None = None,
    layer_distortion: bool = False,
    correlated: bool = False,
    low_rank: int = 0,
) -> Method:
    """The platform's codec at ``rd_lambda``.

    ``downlink_lambda`` sets ``codec.downlink_rd_lambda``, the rate weight of
    the coordinator's broadcast; workers encode their uplink at ``rd_lambda``.
    ``unbiased`` sets ``codec.unbiased`` (stochastic rounding of the uplink).
    ``extra_step`` adds a coarser step (in units of the residual's RMS) to the
    default ``codec.step_sizes``. ``layer_distortion`` sets
    ``codec.rd_distortion = "layer"`` (each layer's error relative to its own
    energy, as Adam on the server sees it). ``correlated`` sets
    ``codec.rounding = "correlated"`` (the files of a round share their
    rounding draws, so the errors partly cancel in the mean). ``low_rank`` sets
    ``codec.low_rank`` (2-D layers may go as two quantized factors of that
    rank).
    """
    params: tuple[tuple[str, float | int | bool | str], ...] = (("lambda", rd_lambda),)
    if downlink_lambda is not None:
        params += (("downlink_lambda", downlink_lambda),)
    if unbiased:
        params += (("unbiased", True),)
    if extra_step is not None:
        params += (("extra_step", extra_step),)
    if layer_distortion:
        params += (("rd_distortion", "layer"),)
    if correlated:
        params += (("rounding", "correlated"),)
    if low_rank:
        params += (("low_rank", low_rank),)
    if error_feedback:
        params += (("error_feedback", True),)
    return Method("predictive coding", params, r_one_only=error_feedback)


DOWNLINK_LAMBDA = 0.03


def adam_coded(rd_lambda: float, *, correlated: bool = True, low_rank: int = 0) -> Method:
    """The codec as set for Adam on the server: unbiased, per-layer distortion, a 16x step.

    ``correlated``: correlated rounding draws across the round's files.
    ``low_rank``: fully connected weights may go as rank-``low_rank`` factors,
    their truncation carried by error feedback (so ``r = 1`` only).
    """
    return predictive(
        rd_lambda,
        downlink_lambda=DOWNLINK_LAMBDA,
        unbiased=True,
        extra_step=16.0,
        layer_distortion=True,
        correlated=correlated,
        low_rank=low_rank,
        error_feedback=low_rank > 0,
    )


FP32 = Method("fp32")
ZSTD = Method("zstd", (("level", 3),))
LAMBDAS = (0.03, 0.1, 0.3, 1.0)
LOW_RANK = 8
"""Rank of the r = 1 candidate's fully connected weights (with error feedback)."""
GOAL_METHODS = (
    *(adam_coded(lam, correlated=c) for lam in (20.0, 30.0) for c in (True, False)),
    adam_coded(20.0, low_rank=LOW_RANK),
)
"""Run under every seed: the goal's candidates, with and without correlated rounding, and,
for r = 1, with low-rank fully connected weights and error feedback."""
METHODS = (
    FP32,
    ZSTD,
    Method("qsgd", (("s", 4), ("bucket", 512))),
    Method("qsgd", (("s", 16), ("bucket", 512))),
    Method("top-k + EF", (("fraction", 0.005),), r_one_only=True),
    Method("signsgd"),
    *(predictive(lam) for lam in LAMBDAS),
    predictive(0.3, error_feedback=True),
    *(predictive(lam, downlink_lambda=DOWNLINK_LAMBDA) for lam in (0.3, 1.0)),
    *GOAL_METHODS,
)
EXTRA_METHODS = (
    # Unbiased (stochastically rounded) uplink at about the rate of lambda=0.3: left out of
    # the full grid, run with --only.
    predictive(10.0, downlink_lambda=DOWNLINK_LAMBDA, unbiased=True),
    predictive(3.0, downlink_lambda=DOWNLINK_LAMBDA, unbiased=True),
    # The same with a 16x-RMS step on offer, to go below 0.32 bits per parameter.
    predictive(3.0, downlink_lambda=DOWNLINK_LAMBDA, unbiased=True, extra_step=16.0),
    predictive(10.0, downlink_lambda=DOWNLINK_LAMBDA, unbiased=True, extra_step=16.0),
    adam_coded(10.0, correlated=False),
    adam_coded(10.0),
)
QUICK_METHODS = (
    FP32,
    Method("qsgd", (("s", 16), ("bucket", 512))),
    Method("top-k + EF", (("fraction", 0.005),), r_one_only=True),
    predictive(0.1),
    predictive(0.3),
    predictive(1.0, downlink_lambda=DOWNLINK_LAMBDA),
)


@dataclass(frozen=True)
class Settings:
    """What every run of one invocation shares."""

    rounds: int
    flower_rounds: int
    eval_samples: int
    samples_per_file: dict[int, int]
    optimizer: Literal["sgd", "adam", "amsgrad"] = "adam"
    server_lr: float = SERVER_LR
    seed: int = SEED
    seeds: int = 1


@dataclass(frozen=True)
class Case:
    """One run: a method at one replication, on one transport."""

    method: Method
    r: int
    transport: str = IN_PROCESS
    rounds: int | None = None
    seed: int | None = None

    @property
    def run_id(self) -> str:
        """Run id (it also derives the simulated workers' keys)."""
        suffix = "" if self.seed is None else f"-s{self.seed}"
        return f"compression-r{self.r}-{self.method.key}{suffix}"

    def config(self, settings: Settings) -> RunConfig:
        """The run configuration of this case."""
        codec: dict[str, Any] = {"enabled": False}
        if self.method.kind == "predictive coding":
            codec = {
                "enabled": True,
                "rd_lambda": self.method.setting("lambda"),
                "downlink_rd_lambda": dict(self.method.params).get("downlink_lambda"),
                "unbiased": bool(dict(self.method.params).get("unbiased", False)),
                "rd_distortion": dict(self.method.params).get("rd_distortion", "update"),
                "rounding": dict(self.method.params).get("rounding", "independent"),
                "low_rank": int(dict(self.method.params).get("low_rank", 0)),
                "error_feedback": self.method.error_feedback,
            }
            extra = dict(self.method.params).get("extra_step")
            if extra is not None:
                codec["step_sizes"] = (*CodecSettings().step_sizes, float(extra))
        return RunConfig.model_validate(
            {
                "name": self.run_id,
                "seed": settings.seed if self.seed is None else self.seed,
                "rounds": self.rounds or settings.rounds,
                "data": {
                    "dataset": "fashion-mnist",
                    "model": "cnn",
                    "samples_per_file": settings.samples_per_file[self.r],
                    "eval_samples": settings.eval_samples,
                },
                "assignment": {
                    "scheme": "none" if self.r == 1 else "bibd",
                    "num_workers": K,
                    "r": self.r,
                },
                "aggregation": {"rule": "mean", "f": 0},
                "training": {"optimizer": settings.optimizer, "server_lr": settings.server_lr},
                "codec": codec,
            }
        )


def grid(methods: Sequence[Method], rs: Sequence[int]) -> list[Case]:
    """Every method at every r it supports."""
    return [Case(m, r) for r in rs for m in methods if r == 1 or not m.r_one_only]


def seed_grid(methods: Sequence[Method], rs: Sequence[int], seeds: int) -> list[Case]:
    """fp32 and the goal's candidates among ``methods`` again under ``seeds - 1`` more seeds.

    Seeds ``SEED + 1`` to ``SEED + seeds - 1``; the main grid ran ``SEED``.
    """
    repeated = [m for m in methods if m == FP32 or m in GOAL_METHODS]
    return [replace(case, seed=SEED + i) for i in range(1, seeds) for case in grid(repeated, rs)]


def select(
    methods: Sequence[Method], only: Sequence[str], extra: Sequence[Method] = ()
) -> list[Method]:
    """The methods ``--only`` names, by label or key, in grid order (all if none named).

    ``extra`` methods are left out unless named.

    Raises
    ------
    ValueError
        For a name that is no method's label or key; the message lists the labels.
    """
    if not only:
        return list(methods)
    pool = [*methods, *(m for m in extra if m not in methods)]
    known = {m.label: m for m in pool} | {m.key: m for m in pool}
    unknown = [name for name in only if name not in known]
    if unknown:
        raise ValueError(
            f"unknown method {', '.join(map(repr, unknown))}; choose from: "
            + "; ".join(m.label for m in pool)
        )
    wanted = {known[name] for name in only}
    return [m for m in pool if m in wanted]


# --------------------------------------------------------------------------- running a case


class MeteredTransport:
    """Wraps a transport and counts the payload bytes and payloads of every reply."""

    def __init__(self, inner: InProcessTransport) -> None:
        self.inner = inner
        self.payload_bytes = 0
        self.payloads = 0

    def exchange(self, tasks: Sequence[Task], downlink: Downlink) -> Exchange:
        """Exchange through the wrapped transport, counting what comes back."""
        exchange = self.inner.exchange(tasks, downlink)
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
            execute_run(config, run_id=case.run_id, sink=sink)
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
    parameters = _parameters()
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
def _parameters() -> int:
    return num_params(build_model("cnn", in_channels=1, image_size=28, num_classes=10))


def _run_in_process(job: tuple[Case, Settings]) -> Row:
    return run_case(*job)


def _cost(case: Case) -> int:
    """Rough work of a case: payloads encoded per round."""
    return (35 * 3 if case.r == 3 else K) * (3 if case.method.kind == "predictive coding" else 1)


def run_grid(
    cases: Sequence[Case], settings: Settings, jobs: int, log: Callable[[Row], None]
) -> list[Row]:
    """Run every case on the in-process transport, ``jobs`` processes at a time."""
    if jobs <= 1:
        rows = []
        for case in cases:
            rows.append(run_case(case, settings))
            log(rows[-1])
        return rows
    done: dict[Case, Row] = {}
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = {
            pool.submit(_run_in_process, (case, settings)): case
            for case in sorted(cases, key=_cost, reverse=True)
        }
        for future in as_completed(futures):
            done[futures[future]] = future.result()
            log(done[futures[future]])
    return [done[case] for case in cases]


def merge(old: Sequence[Row], new: Sequence[Row]) -> list[Row]:
    """``old`` with each row of the same label, r, transport, rounds and seed as a new row replaced.

    New rows of cases ``old`` does not have are appended.
    """

    def case_of(x: Row) -> tuple[str, int, str, int, int]:
        return (x.label, x.r, x.transport, x.rounds, x.seed)

    fresh = {case_of(x): x for x in new}
    merged = [fresh.pop(case_of(x), x) for x in old]
    return [*merged, *fresh.values()]


# --------------------------------------------------------------------------- judging


def _reference(rows: Sequence[Row], r: int, seed: int = SEED) -> Row | None:
    return next(
        (
            x
            for x in rows
            if x.method == "fp32"
            and x.r == r
            and x.seed == seed
            and x.transport == IN_PROCESS
            and x.error is None
        ),
        None,
    )


def with_references(rows: Sequence[Row], full_rounds: int) -> list[Row]:
    """Fill ``reduction_vs_fp32`` and ``accuracy_drop_vs_fp32`` against fp32 at the same r and seed.

    A shorter run (the Flower comparison) is compared with fp32's first rounds;
    its accuracy, read on the evaluation subset, is not compared.
    """
    out = []
    for row in rows:
        ref = _reference(rows, row.r, row.seed)
        if ref is None or row.error is not None or not row.rounds:
            out.append(row)
            continue
        fp32_up = sum(ref.uplink_by_round[: row.rounds])
        drop = None
        if row.rounds == full_rounds and row.final_accuracy is not None:
            assert ref.final_accuracy is not None
            drop = ref.final_accuracy - row.final_accuracy
        out.append(
            replace(
                row, reduction_vs_fp32=1 - row.uplink_bytes / fp32_up, accuracy_drop_vs_fp32=drop
            )
        )
    return out


@dataclass(frozen=True)
class Outcome:
    """One method at one r, over the seeds it ran with (means of the per-seed comparisons)."""

    label: str
    r: int
    seeds: tuple[int, ...]
    reduction: float
    drop: float
    drops: tuple[float, ...]


def outcomes(rows: Sequence[Row], full_rounds: int) -> list[Outcome]:
    """Each predictive-coding method at each r, averaged over its seeds.

    A seed counts if its run finished and fp32 ran under it too (each seed's
    drop is against fp32 of the same seed).
    """
    groups: dict[tuple[int, str], list[Row]] = {}
    for x in rows:
        if (
            x.method == "predictive coding"
            and x.transport == IN_PROCESS
            and x.rounds == full_rounds
            and x.reduction_vs_fp32 is not None
            and x.accuracy_drop_vs_fp32 is not None
        ):
            groups.setdefault((x.r, x.label), []).append(x)
    out = []
    for (r, label), runs in groups.items():
        runs.sort(key=lambda x: x.seed)
        drops = tuple(x.accuracy_drop_vs_fp32 or 0.0 for x in runs)
        out.append(
            Outcome(
                label=label,
                r=r,
                seeds=tuple(x.seed for x in runs),
                reduction=statistics.fmean(x.reduction_vs_fp32 or 0.0 for x in runs),
                drop=statistics.fmean(drops),
                drops=drops,
            )
        )
    return out


@dataclass(frozen=True)
class Goal:
    """The issue's goal at one r: >= 99 % less uplink than fp32, <= 1 point less accuracy."""

    r: int
    met: bool
    detail: str


def goals(rows: Sequence[Row], full_rounds: int) -> list[Goal]:
    """Check the goal on the predictive-coding rows of each r.

    A method is judged on its mean over the seeds it ran with; only methods
    that ran with the most seeds any method of that r ran with can meet it (a
    single seed moves fp32's final accuracy by a point or two).
    """
    out = []
    everything = outcomes(rows, full_rounds)
    for r in sorted({o.r for o in everything}):
        mine = [o for o in everything if o.r == r]
        most = max(len(o.seeds) for o in mine)
        passing = [
            o
            for o in mine
            if len(o.seeds) == most
            and o.reduction >= GOAL_REDUCTION
            and o.drop <= GOAL_ACCURACY_DROP
        ]
        parts = [
            f"{o.label}: {100 * o.reduction:.2f} % less uplink, final accuracy "
            f"{_points(o.drop)} points against fp32"
            + (
                f" (mean over seeds {', '.join(map(str, o.seeds))}: "
                f"{', '.join(_points(d) for d in o.drops)}; standard error "
                f"{_spread(o.drops)})"
                if len(o.seeds) > 1
                else ""
            )
            for o in mine
        ]
        where = ", ".join(o.label for o in passing) if passing else "no lambda"
        judged = f"judged on the mean over {most} seeds" if most > 1 else "one seed"
        out.append(Goal(r, bool(passing), f"met by {where} ({judged}). " + "; ".join(parts)))
    return out


# --------------------------------------------------------------------------- reporting


def _mb(n: float) -> str:
    return f"{n / 1e6:,.2f}"


def _num(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def _points(drop: float | None) -> str:
    """Accuracy minus fp32's, in points, signed (a drop is negative)."""
    return "—" if drop is None else f"{-100 * drop + 0.0:+.2f}"


def _pct(x: float | None, digits: int = 2) -> str:
    return "—" if x is None else f"{100 * x:.{digits}f}"


def _table(rows: Sequence[Row]) -> list[str]:
    lines = [
        f"| method | final accuracy % | vs fp32 (points) | rounds {LATE_WINDOW} before the last, "
        "mean accuracy % | uplink MB | uplink KB / worker-round | reduction vs fp32 % "
        "| bits / param | downlink MB | flagged | seconds |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for x in rows:
        drop = _points(x.accuracy_drop_vs_fp32)
        bits = _num(x.bits_per_param)
        accuracy = "failed" if x.final_accuracy is None else _pct(x.final_accuracy)
        lines.append(
            f"| {x.label} | {accuracy} | {drop} | {_pct(x.late_subset_accuracy)} | "
            f"{_mb(x.uplink_bytes)} | "
            f"{x.uplink_bytes_per_worker_round / 1e3:,.1f} | {_pct(x.reduction_vs_fp32)} | "
            f"{bits} | {_mb(x.downlink_bytes)} | {x.flagged} | {x.seconds:.0f} |"
        )
    return lines


def _broadcast_section(rows: Sequence[Row], full_rounds: int) -> list[str]:
    """How large the coordinator's compressed broadcast is, per predictive-coding run."""
    coded = [
        x
        for x in rows
        if x.method == "predictive coding"
        and x.transport == IN_PROCESS
        and x.rounds == full_rounds
        and x.error is None
        and x.seed == SEED
    ]
    if not coded:
        return []
    lines = [
        "## The predictive-coding downlink",
        "",
        "Round 1 sends the full weights; afterwards each task carries the compressed global "
        "delta. Bytes per task (K tasks a round), median over rounds 2 to the last:",
        "",
        "| method | r | broadcast bytes per task | bits / param | final accuracy % |",
        "|---|---|---|---|---|",
    ]
    for x in coded:
        per_task = statistics.median(d / K for d in x.downlink_by_round[1:])
        lines.append(
            f"| {x.label} | {x.r} | {per_task:,.0f} | {8 * per_task / x.parameters:.4f} | "
            f"{_pct(x.final_accuracy)} |"
        )
    starved = [x for x in coded if statistics.median(x.downlink_by_round[1:]) / K < 1000]
    if starved:
        lines += [
            "",
            f"{', '.join(f'{x.label} at r = {x.r}' for x in starved)}: a broadcast under a "
            "kilobyte carries next to nothing (the rate-distortion search found sending almost "
            "all zeros cheapest), so the global model barely moves and accuracy stalls; the "
            "workers' gradients then stay large and unpredictable, which is why such a run can "
            "spend more uplink bits than one at a lower lambda.",
        ]
    return [*lines, ""]


def standard_error(values: Sequence[float]) -> float | None:
    """Standard error of the mean of ``values`` (``None`` for fewer than two)."""
    if len(values) < 2:
        return None
    return statistics.stdev(values) / math.sqrt(len(values))


def _spread(drops: Sequence[float]) -> str:
    error = standard_error(drops)
    return "—" if error is None else f"{100 * error:.2f}"


def _seeds_section(rows: Sequence[Row], full_rounds: int) -> list[str]:
    """Final accuracy per seed of every method that ran with more than one seed."""
    runs: dict[tuple[int, str], dict[int, Row]] = {}
    for x in rows:
        if x.transport == IN_PROCESS and x.rounds == full_rounds and x.error is None:
            runs.setdefault((x.r, x.label), {})[x.seed] = x
    repeated = {key: by_seed for key, by_seed in runs.items() if len(by_seed) > 1}
    if not repeated:
        return []
    seeds = sorted({seed for by_seed in repeated.values() for seed in by_seed})
    lines = [
        "## Seeds",
        "",
        "fp32 and the goal's candidates again under more seeds (each seed draws its own initial "
        "model, samples and codec draws; every method of one r and seed sees the same). *vs "
        "fp32*: the mean over seeds of the final accuracy minus fp32's under the same seed; "
        "*standard error*: of that mean, from the spread of the per-seed differences.",
        "",
        f"| method | r | {' | '.join(f'final accuracy %, seed {s}' for s in seeds)} | mean % "
        "| vs fp32 (points) | standard error (points) | reduction vs fp32 % | bits / param |",
        f"|---|---|{'---|' * len(seeds)}---|---|---|---|---|",
    ]
    for (r, label), by_seed in sorted(repeated.items()):
        finals = [by_seed[s].final_accuracy for s in seeds if s in by_seed]
        mean = statistics.fmean(f for f in finals if f is not None)
        drops = [
            x.accuracy_drop_vs_fp32 for x in by_seed.values() if x.accuracy_drop_vs_fp32 is not None
        ]
        reductions = [
            x.reduction_vs_fp32 for x in by_seed.values() if x.reduction_vs_fp32 is not None
        ]
        bits = [x.bits_per_param for x in by_seed.values() if x.bits_per_param is not None]
        cells = [_pct(by_seed[s].final_accuracy) if s in by_seed else "—" for s in seeds]
        lines.append(
            f"| {label} | {r} | {' | '.join(cells)} | {_pct(mean)} | "
            f"{_points(statistics.fmean(drops)) if drops else '—'} | {_spread(drops)} | "
            f"{_pct(statistics.fmean(reductions)) if reductions else '—'} | "
            f"{_num(statistics.fmean(bits)) if bits else '—'} |"
        )
    return [*lines, ""]


def _flower_section(rows: Sequence[Row], settings: Settings) -> list[str]:
    flower = next((x for x in rows if x.transport == FLOWER), None)
    if flower is None:
        return []
    twin = next(
        (
            x
            for x in rows
            if x.transport == IN_PROCESS
            and x.label == flower.label
            and x.r == flower.r
            and x.rounds == len(flower.uplink_by_round)
            and x is not flower
        ),
        None,
    )
    lines = [
        f"## Flower's simulation engine against the in-process test double ({flower.label}, "
        f"r = {flower.r}, {flower.rounds} rounds)",
        "",
    ]
    if flower.error is not None:
        return [*lines, f"The Flower run failed: {flower.error}", ""]
    if twin is None:
        return [*lines, "No in-process run of the same config to compare with.", ""]
    lines += [
        "| round | uplink bytes, Flower | uplink bytes, in-process | difference | downlink bytes, "
        "Flower | downlink bytes, in-process | difference | same model digest |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for t, (fu, iu, fd, id_, fg, ig) in enumerate(
        zip(
            flower.uplink_by_round,
            twin.uplink_by_round,
            flower.downlink_by_round,
            twin.downlink_by_round,
            flower.digest_by_round,
            twin.digest_by_round,
            strict=False,
        ),
        start=1,
    ):
        lines.append(
            f"| {t} | {fu:,} | {iu:,} | {fu - iu:+,} | {fd:,} | {id_:,} | {fd - id_:+,} | "
            f"{'yes' if fg == ig else 'NO'} |"
        )
    same = flower.digest_by_round == twin.digest_by_round
    config_bytes = len(
        Case(predictive(float(flower.params["lambda"])), flower.r, rounds=flower.rounds)
        .config(settings)
        .model_dump_json()
    )
    lines += [
        "",
        f"Same model after every round: **{'yes' if same else 'NO'}** (so the same payloads "
        "went up: the codec is deterministic and the next model is a function of them). "
        "Uplink differences come from the ECDSA signatures alone: DER-encoded P-256 signatures "
        "are randomised and 70 to 72 bytes long. Downlink differences are the run config "
        f"that Flower's transport sends (and counts) with every task ({config_bytes:,} bytes "
        "here) and the in-process double does not. Final accuracy: Flower "
        f"{_pct(flower.final_accuracy)} %, in-process {_pct(twin.final_accuracy)} %.",
        "",
    ]
    return lines


def markdown(
    rows: Sequence[Row], settings: Settings, notes: Sequence[str], full_rounds: int
) -> str:
    """compression.md: settings, the goal, one table and one plot per r, Flower agreement."""
    lines = [
        "# Uplink compression against accuracy (Fashion-MNIST CNN, K = 15)",
        "",
        *notes,
        "",
        "## Goal: at least 99 % less uplink than fp32, at most 1 point lower final accuracy",
        "",
    ]
    for g in goals(rows, full_rounds):
        lines.append(f"- r = {g.r}: **{'met' if g.met else 'NOT met'}**, {g.detail}.")
    for r, title in ((1, "r = 1 (scheme `none`)"), (3, "r = 3 (scheme `bibd`, STS(15))")):
        mine = [
            x
            for x in rows
            if x.r == r and x.transport == IN_PROCESS and x.rounds == full_rounds and x.seed == SEED
        ]
        mine += [x for x in rows if x.r == r and x.error is not None and x not in mine]
        if not mine:
            continue
        lines += ["", f"## {title}", "", *_table(mine), "", f"![{title}](compression_r{r}.png)"]
    lines += [
        "",
        *_seeds_section(rows, full_rounds),
        *_broadcast_section(rows, full_rounds),
        *_flower_section(rows, settings),
    ]
    return "\n".join(lines).rstrip() + "\n"


def plot(rows: Sequence[Row], r: int, path: Path, full_rounds: int) -> None:
    """Accuracy against cumulative uplink bytes (log scale) and against rounds, one line a run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mine = [
        x
        for x in rows
        if x.r == r
        and x.transport == IN_PROCESS
        and x.rounds == full_rounds
        and x.error is None
        and x.seed == SEED
    ]
    if not mine:
        return
    # The labels spell out every setting: two legend columns below, as tall as they need.
    legend_height = 0.18 * math.ceil(len(mine) / 2) + 0.3
    figure, (by_bytes, by_round) = plt.subplots(1, 2, figsize=(14, 6.0 + legend_height))
    cmap = plt.get_cmap("tab20")
    for i, x in enumerate(mine):
        cumulative = [sum(x.uplink_by_round[: t + 1]) for t in range(x.rounds)]
        style = {
            "color": cmap(i % 20),
            "linestyle": "-" if x.method == "predictive coding" else "--",
            "marker": "o" if x.method == "predictive coding" else ".",
            "markersize": 3,
            "linewidth": 1.4,
            "label": x.label,
        }
        by_bytes.plot(cumulative, [100 * a for a in x.accuracy_by_round], **style)
        by_round.plot(range(1, x.rounds + 1), [100 * a for a in x.accuracy_by_round], **style)
    by_bytes.set_xscale("log")
    by_bytes.set_xlabel("cumulative uplink bytes (all workers)")
    by_round.set_xlabel("round")
    for axis in (by_bytes, by_round):
        axis.set_ylabel("test accuracy %")
        axis.grid(True, which="both", alpha=0.3)
    handles, labels = by_round.get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=2, fontsize=7)
    scheme = "none" if r == 1 else "bibd, STS(15)"
    figure.suptitle(
        f"Fashion-MNIST CNN, K = {K}, r = {r} ({scheme}): accuracy on the evaluation subset "
        "each round, on the full test set at the last round"
    )
    figure.tight_layout(rect=(0, legend_height / (6.0 + legend_height), 1, 1))
    figure.savefig(path, dpi=110)
    plt.close(figure)


def describe(
    settings: Settings,
    rows: Sequence[Row],
    jobs: int,
    minutes: float,
    quick: bool,
    *,
    rewritten: bool = False,
    rerun: Sequence[str] = (),
) -> list[str]:
    """The settings and caveats that head compression.md.

    ``rerun`` lists the labels that ``--only`` ran and merged into the rows of
    an earlier compression.json (``minutes`` is then the rerun's time).
    """
    zstd_same = [
        (x.r, x.digest_by_round[-1:] == ref.digest_by_round[-1:])
        for x in rows
        if x.method == "zstd" and (ref := _reference(rows, x.r)) is not None and x.error is None
    ]
    flagged = {
        (x.r, x.label): x.flagged
        for x in rows
        if x.flagged and x.transport == IN_PROCESS and x.seed == SEED
    }
    command = f"python benchmarks/eval_compression.py{' --quick' if quick else ''}"
    machine = (
        f"({jobs} process{'es' if jobs > 1 else ''}, one torch thread each) on "
        f"{platform.machine()} with {os.cpu_count()} cores shared with other work (load average "
        f"{os.getloadavg()[0]:.1f} at the end). Python {platform.python_version()}, torch "
        f"{torch.__version__}."
    )
    if rewritten:
        head = (
            f"Rewritten from compression.json by `--report-only`; its runs took "
            f"{minutes:.1f} minutes of run time in all."
        )
    elif rerun:
        only = " ".join(f"--only '{label}'" for label in rerun)
        head = (
            f"Rows of {'; '.join(rerun)} rerun by `{command} {only} --jobs {jobs}` in "
            f"{minutes:.1f} minutes {machine} The other rows come from the previous "
            f"compression.json; all runs took {sum(x.seconds for x in rows) / 60:.1f} minutes "
            "of run time in all."
        )
    else:
        head = f"Generated by `{command} --jobs {jobs}` in {minutes:.1f} minutes {machine}"
    lines = [
        head,
        "",
        f"**Setup.** Fashion-MNIST, the small CNN ({_parameters():,} parameters), K = {K} "
        f"workers, no attack, {settings.rounds} rounds, seed {settings.seed}; each file's update "
        f"is the gradient over its samples ({settings.samples_per_file[1]} per file at r = 1: "
        f"15 files, {15 * settings.samples_per_file[1]} samples a round; "
        f"{settings.samples_per_file[3]} per file at r = 3: 35 files, "
        f"{35 * settings.samples_per_file[3]} samples a round); the mean of the accepted files "
        f"goes to Adam on the server (lr {settings.server_lr}"
        + (
            ", fp32's best of 0.002, 0.004 and 0.008 over three seeds at r = 1 and at r = 3"
            if settings.server_lr == SERVER_LR
            else ""
        )
        + f"). Accuracy is measured on the first {settings.eval_samples} test images each round "
        "and on all 10,000 after the last round (*final accuracy*). Every run of one r and "
        "seed starts from the same model and sees the same samples. At this stage of training "
        "fp32's accuracy still moves by a point or two from one round to the next (see the "
        "plots) and from one seed to another: a difference of about a point in final accuracy "
        "is within the noise of a single run. "
        + (
            f"The tables and plots show seed {settings.seed}; fp32 and the goal's candidates ran "
            "under more seeds (section *Seeds*), and the goal is judged on each method's mean "
            "over its seeds, among the methods that ran with the most seeds. "
            if settings.seeds > 1
            else ""
        )
        + f"The column *rounds {LATE_WINDOW} before the last* averages the subset accuracy of "
        "those rounds.",
        "",
        "**Transport.** All table rows run on the in-process transport "
        "(`phalanx_clients.inprocess.InProcessTransport`, a test double of Flower's runtime: "
        "the same coordinator, workers, signatures, detection and codec in one process). "
        "Shortcut: the r workers of a file share one computation of its gradient (a pure "
        "function of model, round and file), but each worker encodes, signs and sends its own "
        "payload. The Flower section below checks one predictive-coding run against Flower's "
        "simulation engine, which takes no shortcut.",
        "",
        "**Bytes.** *uplink MB*: the sum over rounds and workers of the round reports' "
        "`bytes_up` (payloads plus a 64-byte hex SHA-256 digest per payload and a 70 to 72 "
        "byte ECDSA signature per reply). *uplink KB / worker-round*: that divided by "
        f"{K} x rounds (at r = 3 a worker sends 7 payloads a round). *bits / param*: payload "
        "bytes only, 8 x payload bytes / (payloads x parameters). *reduction vs fp32*: 1 - "
        "uplink / fp32's uplink at the same r. *downlink*: the full float32 weights to every "
        "worker every round for the baselines (their channel is the plain one), the compressed "
        "global delta for predictive coding (after a full first round).",
        "",
        "**Methods.** *zstd*: level 3 on the float32 bytes (lossless; final model equal to "
        "fp32's bit for bit: "
        + (", ".join(f"r = {r} {'yes' if ok else 'NO'}" for r, ok in zstd_same) or "not run")
        + "). *qsgd*: s levels of each 512-coordinate bucket's L2 norm, stochastic rounding "
        "seeded from (run seed, round, file) so that replicas agree, the signed levels "
        "ANS-coded (`constriction`) under their empirical frequencies; the bucket norms and the "
        "frequency table are in the payload. *top-k + EF*: the 0.5 % largest magnitudes of "
        "update + carried error, float32 values and Elias-gamma-coded index gaps. **r = 1 "
        "only**: with error feedback a worker's payload depends on its private error memory "
        "(the files it computed before), so honest replicas of a file would send different "
        "bytes, disagree, and be flagged; the same holds for the codec's own "
        "`error_feedback`, which the run config refuses with r > 1. *signsgd*: one bit per "
        "coordinate plus each layer's mean magnitude (float32), aggregated by the mean rule "
        "(not majority vote). *predictive coding*: `config.codec` with `enabled = true`, "
        "`rd_lambda` = *lambda* and, where the row gives one, `downlink_rd_lambda` = "
        "*downlink_lambda*, `unbiased` = *unbiased* (stochastic rounding of the uplink), "
        "`step_sizes` = the default steps plus *extra_step* (in multiples of the residual's "
        "RMS) and `rd_distortion` = *rd_distortion* (`layer`: each layer's error against its "
        "own energy, as Adam on the server sees it, instead of against the whole update's) "
        "and `rounding` = *rounding* (`correlated`: the files of a round share their "
        "stochastic-rounding draws, each file shifted by its index along a golden-ratio "
        "sequence, so that the rounding errors partly cancel in the mean; each payload stays "
        "unbiased and replicas still agree byte for byte), `low_rank` = *low_rank* (a 2-D "
        "layer, here `classifier.1.weight`, 128 x 3136, may go as its top singular directions: "
        "two factors of that rank, each rounded to a quarter of its RMS and ANS-coded, when "
        "that costs less in J) and `error_feedback` = *error_feedback* (the worker carries "
        "what the low-rank truncation left out into its next update; layers rounded "
        "stochastically carry nothing), every other codec setting at its "
        "default. The workers code their updates at "
        "`rd_lambda`, the coordinator its broadcast of the global delta at "
        "`downlink_rd_lambda` (at `rd_lambda` too where the row gives none); decoding does "
        "not depend on lambda. Every row is a plain run config.",
    ]
    if flagged:
        lines += [
            "",
            "**Flagged honest workers.** With r = 1 detection can only score outliers "
            "(robust z-score, `detection.mode = auto`); honest workers it flagged were left "
            "out of those rounds: "
            + ", ".join(f"{label} (r = {r}): {n}" for (r, label), n in flagged.items())
            + ". At r = 3 any flag would mean honest replicas disagreed.",
        ]
    return lines


# --------------------------------------------------------------------------- main


def _log(row: Row) -> None:
    sys.stderr.write(
        f"{'flower' if row.transport == FLOWER else 'local':<6} r={row.r} {row.label:<42} "
        f"rounds={row.rounds:<3} acc={_pct(row.final_accuracy)} "
        f"up={_mb(row.uplink_bytes)}MB bits={_num(row.bits_per_param)} "
        f"flagged={row.flagged} {row.seconds:.0f}s{' ' + row.error if row.error else ''}\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and methods")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per run")
    parser.add_argument("--flower-rounds", type=int, default=None, help="rounds of the Flower run")
    parser.add_argument("--eval-samples", type=int, default=500)
    parser.add_argument(
        "--seeds",
        type=int,
        default=None,
        help="run fp32 and the goal's candidates under this many seeds (default 5; 1 with "
        "--quick); the goal is judged on their means",
    )
    parser.add_argument("--server-lr", type=float, default=SERVER_LR, help="Adam's step")
    parser.add_argument("--r", default="1,3", help="replications to run, e.g. 1 or 1,3")
    parser.add_argument("--jobs", type=int, default=1, help="in-process runs at a time")
    parser.add_argument("--no-flower", action="store_true", help="skip the Flower comparison")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--report-only", action="store_true", help="rewrite compression.md from compression.json"
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="LABEL",
        help="run only this method (its label, e.g. 'predictive coding (lambda=0.3)', or key; "
        "repeatable) without the Flower comparison, and merge its rows into the existing "
        "compression.json of --out",
    )
    args = parser.parse_args(argv)

    settings = Settings(
        rounds=args.rounds or (4 if args.quick else 30),
        flower_rounds=args.flower_rounds or (2 if args.quick else 5),
        eval_samples=args.eval_samples,
        samples_per_file={1: 32, 3: 14},
        server_lr=args.server_lr,
        seeds=args.seeds or (1 if args.quick else 5),
    )
    rs = [int(r) for r in args.r.split(",")]
    try:
        methods = select(QUICK_METHODS if args.quick else METHODS, args.only, EXTRA_METHODS)
    except ValueError as exc:
        parser.error(str(exc))
    flower = not (args.no_flower or args.only)
    flower_case = Case(predictive(0.1), max(rs), FLOWER, rounds=settings.flower_rounds)
    twin = replace(flower_case, transport=IN_PROCESS)
    results = args.out / "compression.json"
    previous: list[Row] = []
    if args.report_only:
        rows = [Row(**x) for x in json.loads(results.read_text(encoding="utf-8"))]
        minutes = sum(x.seconds for x in rows) / 60
        settings = replace(
            settings,
            rounds=max(x.rounds for x in rows),
            seeds=len({x.seed for x in rows}),
        )
    else:
        if args.only and results.exists():
            previous = [Row(**x) for x in json.loads(results.read_text(encoding="utf-8"))]
            held = max(x.rounds for x in previous)
            if held != settings.rounds:
                parser.error(
                    f"{results} holds {held}-round runs; rerun with --rounds {held} to merge, "
                    "or write elsewhere with --out"
                )
        started = time.perf_counter()
        cases = grid(methods, rs) + seed_grid(methods, rs, settings.seeds)
        if flower:
            cases.append(twin)
        rows = run_grid(cases, settings, args.jobs, _log)
        if flower:
            rows.append(run_case(flower_case, settings))
            _log(rows[-1])
        rows = with_references(merge(previous, rows), settings.rounds)
        minutes = (time.perf_counter() - started) / 60
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        document = [asdict(x) for x in rows]
        results.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    for r in rs:
        plot(rows, r, args.out / f"compression_r{r}.png", settings.rounds)
    notes = describe(
        settings,
        rows,
        args.jobs,
        minutes,
        args.quick,
        rewritten=args.report_only,
        rerun=[m.label for m in methods] if previous else (),
    )
    text = markdown(rows, settings, notes, settings.rounds)
    (args.out / "compression.md").write_text(text, encoding="utf-8")
    sys.stdout.write(text)
    return 0 if all(x.error is None for x in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
