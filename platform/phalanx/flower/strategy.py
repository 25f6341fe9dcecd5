"""A drop-in Flower strategy that detects, reports and excludes Byzantine nodes.

`RobustStrategy` samples and configures rounds exactly like Flower's ``FedAvg`` and
replaces its averaging with Phalanx's detection and robust aggregation. Each round it

1. rejects replies that cannot be aggregated: error messages, missing or extra records,
   arrays whose keys or shapes differ from the global model's, NaN or Inf, a missing
   or negative weight (``weighted_by_key``). Flower's own strategies raise on any
   inconsistent reply and so let one node end the run; here only that reply goes;
2. scores the remaining updates with `phalanx.detection.detect` (each node computes its
   own data, so there are no replicas to compare and the distance-based outlier score
   is the evidence, of low severity) and excludes the outliers;
3. aggregates what is left with a rule of `phalanx.aggregation.AGGREGATORS`, on the
   updates (reply minus the model sent this round) when the strategy configured the
   round itself, and rebuilds an ``ArrayRecord`` with the original keys, shapes and
   dtypes;
4. reports every excluded node: `RobustStrategy.flagged` (per round), the log, the
   optional ``on_flagged`` callback and the round's ``MetricRecord``.

Flower node ids are unsigned 64-bit integers; ``MetricRecord`` stores them exactly (as
``uint64`` on the wire), so ``"phalanx.flagged_node_ids"`` holds the ids themselves.
JSON for browsers (`FlaggedNode.to_dict`) writes them as strings, as the database does.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from logging import INFO, WARNING
from typing import Any, Literal, TypeVar

import numpy as np
import numpy.typing as npt
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.common.logger import log
from flwr.serverapp import Grid
from flwr.serverapp.strategy import FedAvg
from torch import Tensor

from phalanx.aggregation import RobustAggregator
from phalanx.assignment import none_assignment
from phalanx.detection import (
    DEFAULT_OUTLIER_THRESHOLD,
    Evidence,
    FileDispute,
    Replica,
    detect,
    payload_digest,
)

__all__ = [
    "METRIC_ACCEPTED",
    "METRIC_FLAGGED",
    "METRIC_FLAGGED_NODE_IDS",
    "ArrayLayout",
    "FlagKind",
    "FlaggedNode",
    "MalformedReplyError",
    "RobustStrategy",
    "flag_outliers",
]

METRIC_FLAGGED = "phalanx.flagged"
"""Key of the round's ``MetricRecord`` entry: how many nodes were excluded."""

METRIC_FLAGGED_NODE_IDS = "phalanx.flagged_node_ids"
"""Key of the round's ``MetricRecord`` entry: the excluded nodes' ids, in increasing order."""

METRIC_ACCEPTED = "phalanx.accepted"
"""Key of the round's ``MetricRecord`` entry: how many replies were aggregated."""

FlagKind = Literal["outlier", "error", "malformed", "layout", "nonfinite"]
"""Why a node was excluded.

``"outlier"``: its update lies far from the others (detection); ``"error"``: it replied
with an error message; ``"malformed"``: records missing, extra, undecodable or with a
bad weight; ``"layout"``: array keys or shapes differ from the model's; ``"nonfinite"``:
NaN or Inf in its arrays or metrics.
"""

T = TypeVar("T")
FlaggedCallback = Callable[[int, list["FlaggedNode"]], None]


@dataclass(frozen=True)
class FlaggedNode:
    """A node excluded from one round's aggregation, and why.

    Attributes
    ----------
    node_id : int
        Flower node id (unsigned 64-bit).
    kind : str
        One of `FlagKind`.
    summary : str
        One plain-English sentence or two explaining the exclusion.
    score, threshold : float or None
        Outlier score (robust standard deviations beyond the typical update) and the
        threshold it exceeded; ``None`` unless ``kind == "outlier"``.
    evidence : Evidence or None
        Detection's record, as the coordinator stores it, with ``worker`` set to the
        node id; ``None`` unless ``kind == "outlier"``.
    """

    node_id: int
    kind: FlagKind
    summary: str
    score: float | None = None
    threshold: float | None = None
    evidence: Evidence | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form; the node id as a string (JavaScript numbers lose uint64 ids)."""
        return {
            "node_id": str(self.node_id),
            "kind": self.kind,
            "summary": self.summary,
            "score": self.score,
            "threshold": self.threshold,
            "evidence": None if self.evidence is None else self.evidence.to_dict(),
        }


class MalformedReplyError(ValueError):
    """A reply that cannot be aggregated; ``kind`` says how (see `FlagKind`)."""

    def __init__(self, kind: FlagKind, reason: str) -> None:
        super().__init__(reason)
        self.kind: FlagKind = kind
        self.reason = reason


# ---------------------------------------------------------------------------------------
# ArrayRecord <-> one float32 vector


@dataclass(frozen=True)
class ArrayLayout:
    """Keys, shapes and dtypes of an ``ArrayRecord``, in order: how it maps to one vector.

    Attributes
    ----------
    keys : tuple of str
        Array keys, in the record's order (the order of the flat vector).
    shapes : tuple of tuple of int
        Shape of each array.
    dtypes : tuple of str
        NumPy dtype of each array, restored by `rebuild`.
    """

    keys: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]

    @classmethod
    def of(cls, record: ArrayRecord) -> ArrayLayout:
        """Read the layout of ``record``.

        Raises
        ------
        MalformedReplyError
            When an array cannot be decoded or is not numeric.
        """
        arrays = _decode(record)
        return cls(
            keys=tuple(arrays),
            shapes=tuple(a.shape for a in arrays.values()),
            dtypes=tuple(a.dtype.str for a in arrays.values()),
        )

    @property
    def signature(self) -> frozenset[tuple[str, tuple[int, ...]]]:
        """What two records must share to be aggregated together: keys and shapes."""
        return frozenset(zip(self.keys, self.shapes, strict=True))

    @property
    def size(self) -> int:
        """Number of values in the flat vector."""
        return sum(math.prod(s) for s in self.shapes)

    def flatten(self, record: ArrayRecord) -> Tensor:
        """Concatenate the arrays of ``record``, in this layout's order, as float32.

        Raises
        ------
        MalformedReplyError
            ``"layout"`` when keys or shapes differ, ``"nonfinite"`` on NaN or Inf
            (including float64 values beyond float32's range), ``"malformed"`` when an
            array cannot be decoded.
        """
        arrays = _decode(record)
        shapes = dict(zip(self.keys, self.shapes, strict=True))
        if set(arrays) != set(shapes):
            missing, extra = sorted(set(shapes) - set(arrays)), sorted(set(arrays) - set(shapes))
            raise MalformedReplyError(
                "layout", f"array keys differ from the model's (missing {missing}, extra {extra})"
            )
        for key, shape in shapes.items():
            if arrays[key].shape != shape:
                raise MalformedReplyError(
                    "layout",
                    f"array {key!r} has shape {arrays[key].shape}, the model's is {shape}",
                )
        with np.errstate(over="ignore", invalid="ignore"):
            parts = [arrays[key].astype(np.float32, copy=False).ravel() for key in self.keys]
        flat = np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
        if not bool(np.isfinite(flat).all()):
            raise MalformedReplyError("nonfinite", "its arrays hold NaN or Inf")
        return torch.from_numpy(np.ascontiguousarray(flat))

    def rebuild(self, vector: Tensor) -> ArrayRecord:
        """Inverse of `flatten`: arrays with this layout's keys, shapes and dtypes.

        Integer arrays are rounded to the nearest integer, boolean ones thresholded at 1/2.
        """
        if tuple(vector.shape) != (self.size,):
            raise ValueError(
                f"vector has shape {tuple(vector.shape)}, the layout needs ({self.size},)"
            )
        flat = vector.detach().cpu().numpy()
        arrays: dict[str, Array] = {}
        start = 0
        for key, shape, dtype in zip(self.keys, self.shapes, self.dtypes, strict=True):
            stop = start + math.prod(shape)
            arrays[key] = Array(_cast(flat[start:stop].reshape(shape), np.dtype(dtype)))
            start = stop
        return ArrayRecord(arrays)


def _decode(record: ArrayRecord) -> dict[str, npt.NDArray[Any]]:
    arrays: dict[str, npt.NDArray[Any]] = {}
    for key, array in record.items():
        try:
            value = array.numpy()
        except Exception as exc:  # adversarial bytes: any failure to decode is a rejection
            raise MalformedReplyError(
                "malformed", f"array {key!r} cannot be decoded ({exc})"
            ) from exc
        if value.dtype.kind not in "biuf":
            raise MalformedReplyError(
                "malformed", f"array {key!r} has non-numeric dtype {value.dtype}"
            )
        arrays[key] = value
    return arrays


def _cast(values: npt.NDArray[np.float32], dtype: np.dtype[Any]) -> npt.NDArray[Any]:
    if dtype.kind == "b":
        return values >= 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.clip(np.rint(values), info.min, info.max).astype(dtype)
    return values.astype(dtype)


# ---------------------------------------------------------------------------------------
# Screening replies


@dataclass(frozen=True, eq=False)
class _Accepted:
    node_id: int
    vector: Tensor
    content: RecordDict


def _reject(node_id: int, kind: FlagKind, reason: str) -> FlaggedNode:
    what = {
        "error": "replied with an error",
        "malformed": "sent a malformed reply",
        "layout": "sent arrays that do not fit the model",
        "nonfinite": "sent non-finite values",
        "outlier": "sent an outlying update",
    }[kind]
    summary = f"Node {node_id} {what}: {reason}; reply rejected."
    if kind == "error":
        summary += " Not proof of an attack: a crashed or unreachable ClientApp replies so too."
    return FlaggedNode(node_id=node_id, kind=kind, summary=summary)


def _metric_keys(content: RecordDict, weighted_by_key: str) -> frozenset[str]:
    """Check the reply's one MetricRecord and its weight; return its keys."""
    if len(content.metric_records) != 1:
        raise MalformedReplyError(
            "malformed", f"expected one MetricRecord, found {len(content.metric_records)}"
        )
    metrics = next(iter(content.metric_records.values()))
    weight = metrics.get(weighted_by_key)
    if weight is None:
        raise MalformedReplyError("malformed", f"its MetricRecord lacks {weighted_by_key!r}")
    if isinstance(weight, list):
        raise MalformedReplyError("malformed", f"{weighted_by_key!r} is a list, not a number")
    for key, value in metrics.items():
        values = value if isinstance(value, list) else [value]
        if not all(math.isfinite(v) for v in values):
            raise MalformedReplyError("nonfinite", f"metric {key!r} is NaN or Inf")
    if weight < 0:
        raise MalformedReplyError("malformed", f"{weighted_by_key!r} is negative ({weight})")
    return frozenset(metrics.keys())


def _most_common(items: Mapping[int, T], key: Callable[[T], Hashable]) -> T | None:
    """Return the item whose key most nodes share; ties go to the smallest node id's group."""
    if not items:
        return None
    counts = Counter(key(item) for item in items.values())
    best = max(counts.values())
    return next(items[n] for n in sorted(items) if counts[key(items[n])] == best)


def _screen(
    replies: Sequence[Message],
    *,
    layout: ArrayLayout | None,
    weighted_by_key: str,
    need_arrays: bool,
) -> tuple[list[_Accepted], list[FlaggedNode], ArrayLayout | None]:
    """Split replies into aggregatable ones and rejections.

    Without a known ``layout`` (the strategy did not send this round's model), the
    layout most nodes replied with is the reference, so that no single node decides it.
    Metric keys likewise follow the majority.
    """
    rejected: dict[int, FlaggedNode] = {}
    counts = Counter(msg.metadata.src_node_id for msg in replies)
    candidates: dict[int, RecordDict] = {}
    for msg in replies:
        node = msg.metadata.src_node_id
        if counts[node] > 1:
            rejected[node] = _reject(node, "malformed", f"it sent {counts[node]} replies")
        elif msg.has_error():
            error = msg.error
            rejected[node] = _reject(node, "error", f"code {error.code}, {error.reason!r}")
        elif not msg.has_content():
            rejected[node] = _reject(node, "malformed", "it carries no content")
        elif need_arrays and len(msg.content.array_records) != 1:
            found = len(msg.content.array_records)
            rejected[node] = _reject(node, "malformed", f"expected one ArrayRecord, found {found}")
        else:
            candidates[node] = msg.content

    metric_keys: dict[int, frozenset[str]] = {}
    layouts: dict[int, ArrayLayout] = {}
    for node, content in candidates.items():
        try:
            keys = _metric_keys(content, weighted_by_key)
            if need_arrays and layout is None:
                layouts[node] = ArrayLayout.of(next(iter(content.array_records.values())))
            metric_keys[node] = keys
        except MalformedReplyError as exc:
            rejected[node] = _reject(node, exc.kind, exc.reason)
    reference_keys = _most_common(metric_keys, lambda keys: keys)
    if need_arrays and layout is None:
        # Keys and shapes from the majority, then key order and dtypes from the majority
        # of those nodes: the node with the smallest id cannot impose its float64.
        shared = _most_common(layouts, lambda found: found.signature)
        agreeing = {
            n: found
            for n, found in layouts.items()
            if shared and found.signature == shared.signature
        }
        layout = _most_common(agreeing, lambda found: found)

    accepted: list[_Accepted] = []
    for node in sorted(metric_keys):
        content = candidates[node]
        try:
            if metric_keys[node] != reference_keys:
                raise MalformedReplyError(
                    "malformed",
                    f"its metric keys {sorted(metric_keys[node])} differ from the "
                    f"{sorted(reference_keys or ())} most nodes sent",
                )
            vector = torch.zeros(0)
            if need_arrays and layout is not None:
                vector = layout.flatten(next(iter(content.array_records.values())))
            accepted.append(_Accepted(node, vector, content))
        except MalformedReplyError as exc:
            rejected[node] = _reject(node, exc.kind, exc.reason)
    return accepted, [rejected[n] for n in sorted(rejected)], layout


# ---------------------------------------------------------------------------------------
# Detection


def flag_outliers(
    updates: Tensor,
    node_ids: Sequence[int],
    *,
    f: int = 0,
    threshold: float | None = DEFAULT_OUTLIER_THRESHOLD,
) -> list[FlaggedNode]:
    """Flag the nodes whose update is an outlier, with detection's evidence.

    Each node computes its own data, so each update is the one replica of its own file
    (`phalanx.assignment.none_assignment`) and `phalanx.detection.detect` falls back to
    its outlier score: the mean distance to the ``n - f - 2`` nearest other updates, as a
    robust z-score (median and MAD over the nodes).

    Parameters
    ----------
    updates : Tensor
        Shape ``(n, d)``, float32, finite, one row per node.
    node_ids : sequence of int
        Flower node id of each row.
    f : int
        Byzantine nodes tolerated; with colluders sending near-identical updates, pass
        at least their number. Nothing is scored when ``n < f + 3``.
    threshold : float or None
        Robust z-score above which a node is flagged; ``None`` disables detection.

    Returns
    -------
    list of FlaggedNode
        In increasing order of node id.
    """
    n = updates.shape[0]
    if len(node_ids) != n:
        raise ValueError(f"got {n} updates but {len(node_ids)} node ids; give one id per row")
    if n == 0:
        return []
    replicas = [
        Replica(worker=i, file=i, value=row, digest=payload_digest(row.numpy().tobytes()))
        for i, row in enumerate(updates)
    ]
    verdict = detect(none_assignment(n), replicas, outlier_threshold=threshold, f=f)
    flagged = [_outlier(node_ids[w], verdict.evidence[w], n) for w in sorted(verdict.flagged)]
    return sorted(flagged, key=lambda node: node.node_id)


def _outlier(node_id: int, evidence: Evidence, n: int) -> FlaggedNode:
    files = tuple(
        FileDispute(
            file=d.file,
            digests={node_id: d.digests[evidence.worker]},
            distances=d.distances,
            accepted_from=d.accepted_from,
        )
        for d in evidence.files
    )
    evidence = replace(evidence, worker=node_id, files=files)
    score, threshold = evidence.score or 0.0, evidence.threshold or 0.0
    return FlaggedNode(
        node_id=node_id,
        kind="outlier",
        summary=(
            f"Node {node_id}'s update lies far from the other {n - 1} updates: its outlier "
            f"score is {score:.3g} robust standard deviations above the typical update's, "
            f"over the threshold {threshold:.3g}. Each node trains on its own data, so no "
            "replicas could be compared; this flag rests on distance alone (low severity)."
        ),
        score=score,
        threshold=threshold,
        evidence=evidence,
    )


# ---------------------------------------------------------------------------------------
# The strategy


@dataclass(frozen=True, eq=False)
class _SentModel:
    """The global model this strategy sent for one round: the origin of the updates."""

    server_round: int
    layout: ArrayLayout
    vector: Tensor


class RobustStrategy(FedAvg):
    """FedAvg's sampling with Phalanx's detection, robust aggregation and flag reports.

    Parameters
    ----------
    rule : str
        Aggregation rule, a key of `phalanx.aggregation.AGGREGATORS` (``"median"``,
        ``"multi_krum"``, ``"trimmed_mean"``, ``"geometric_median"``, ...). Robust rules
        do not weight the updates: a Byzantine node could claim any number of examples.
    f : int
        Byzantine nodes tolerated, passed to detection and to the rule. Rules need enough
        accepted replies for it (``n > 2 f`` for the median, ``n >= 2 f + 3`` for Krum);
        a round with too few keeps the current model and logs why.
    pre : str, optional
        Pre-aggregator, a key of `phalanx.aggregation.PRE_AGGREGATORS` (``"nnm"``,
        ``"bucketing"``).
    rule_options, pre_options : Mapping, optional
        Keyword options of the rule (e.g. ``{"m": 3}`` for Multi-Krum) and of the
        pre-aggregator.
    outlier_threshold : float or None
        Robust z-score above which a node's update is flagged as an outlier and excluded;
        ``None`` turns detection off (malformed replies are still rejected).
    aggregate_updates : bool
        Aggregate each reply's difference from the model this strategy sent for the
        round, then add the result to that model (default). For rules that are
        translation-equivariant (mean, median, trimmed mean, Krum, Multi-Krum, Bulyan,
        geometric median) this equals aggregating the returned models; for centered
        clipping it is the only meaningful choice. Set ``False`` when clients reply
        with updates rather than models. Replies to a round this strategy did not
        configure are aggregated as they are.
    on_flagged : callable, optional
        Called as ``on_flagged(server_round, flagged)`` after each round in which at
        least one node was excluded.

    Other Parameters
    ----------------
    fraction_train, fraction_evaluate : float
        As in ``flwr.serverapp.strategy.FedAvg``, with the same defaults.
    min_train_nodes, min_evaluate_nodes, min_available_nodes : int
        As in FedAvg.
    weighted_by_key : str
        As in FedAvg, but it weights only the metrics: robust rules ignore it.
    arrayrecord_key, configrecord_key : str
        As in FedAvg.
    train_metrics_aggr_fn, evaluate_metrics_aggr_fn : callable, optional
        As in FedAvg; called on the accepted replies only.

    Attributes
    ----------
    flagged : dict of int to list of FlaggedNode
        Per server round, every node excluded from training aggregation (an empty list
        for a round without one), in increasing order of node id.

    Notes
    -----
    Train metrics are FedAvg's weighted average over the accepted replies only, plus
    `METRIC_ACCEPTED`, `METRIC_FLAGGED` and `METRIC_FLAGGED_NODE_IDS`. Evaluation
    metrics are FedAvg's, except that malformed replies and the nodes excluded from
    this round's training are left out rather than ending the run.
    """

    def __init__(
        self,
        *,
        rule: str = "median",
        f: int = 0,
        pre: str | None = None,
        rule_options: Mapping[str, Any] | None = None,
        pre_options: Mapping[str, Any] | None = None,
        outlier_threshold: float | None = DEFAULT_OUTLIER_THRESHOLD,
        aggregate_updates: bool = True,
        on_flagged: FlaggedCallback | None = None,
        fraction_train: float = 1.0,
        fraction_evaluate: float = 1.0,
        min_train_nodes: int = 2,
        min_evaluate_nodes: int = 2,
        min_available_nodes: int = 2,
        weighted_by_key: str = "num-examples",
        arrayrecord_key: str = "arrays",
        configrecord_key: str = "config",
        train_metrics_aggr_fn: Callable[[list[RecordDict], str], MetricRecord] | None = None,
        evaluate_metrics_aggr_fn: Callable[[list[RecordDict], str], MetricRecord] | None = None,
    ) -> None:
        super().__init__(
            fraction_train=fraction_train,
            fraction_evaluate=fraction_evaluate,
            min_train_nodes=min_train_nodes,
            min_evaluate_nodes=min_evaluate_nodes,
            min_available_nodes=min_available_nodes,
            weighted_by_key=weighted_by_key,
            arrayrecord_key=arrayrecord_key,
            configrecord_key=configrecord_key,
            train_metrics_aggr_fn=train_metrics_aggr_fn,
            evaluate_metrics_aggr_fn=evaluate_metrics_aggr_fn,
        )
        if outlier_threshold is not None and not outlier_threshold > 0:
            raise ValueError(
                f"outlier_threshold must be positive or None (no detection), "
                f"got {outlier_threshold}"
            )
        self.aggregator = RobustAggregator(
            rule=rule,
            f=f,
            pre=pre,
            options=dict(rule_options or {}),
            pre_options=dict(pre_options or {}),
        )
        self.outlier_threshold = outlier_threshold
        self.aggregate_updates = aggregate_updates
        self.on_flagged = on_flagged
        self.flagged: dict[int, list[FlaggedNode]] = {}
        self._sent: _SentModel | None = None

    @property
    def f(self) -> int:
        """Byzantine nodes tolerated."""
        return self.aggregator.f

    def summary(self) -> None:
        """Log summary configuration of the strategy."""
        log(INFO, "\t├──> Phalanx robust aggregation:")
        pre = f" after {self.aggregator.pre}" if self.aggregator.pre else ""
        log(INFO, "\t│\t├── Rule: %s%s, f = %d", self.aggregator.rule, pre, self.f)
        log(INFO, "\t│\t├── Outlier threshold: %s", self.outlier_threshold)
        log(INFO, "\t│\t└── Aggregates updates: %s", self.aggregate_updates)
        super().summary()

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """Configure the next round of training, and remember the model sent."""
        try:
            layout = ArrayLayout.of(arrays)
            vector = layout.flatten(arrays)
        except MalformedReplyError as exc:
            raise ValueError(
                f"RobustStrategy aggregates finite numeric arrays only: the global "
                f"model's {exc.reason}"
            ) from exc
        self._sent = _SentModel(server_round, layout, vector)
        return super().configure_train(server_round, arrays, config, grid)

    def aggregate_train(
        self,
        server_round: int,
        replies: Iterable[Message],
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Reject malformed replies, exclude outliers, aggregate the rest robustly."""
        replies = list(replies)
        sent = self._sent if self._sent and self._sent.server_round == server_round else None
        accepted, rejected, layout = _screen(
            replies,
            layout=None if sent is None else sent.layout,
            weighted_by_key=self.weighted_by_key,
            need_arrays=True,
        )
        origin = sent.vector if sent is not None and self.aggregate_updates else None
        updates = self._stack(accepted, origin)
        outliers = flag_outliers(
            updates,
            [a.node_id for a in accepted],
            f=self.f,
            threshold=self.outlier_threshold,
        )
        if self.outlier_threshold is not None and 0 < len(accepted) < self.f + 3:
            log(
                WARNING,
                "aggregate_train: %d replies are too few to score outliers with f = %d "
                "(needs f + 3); nobody was screened",
                len(accepted),
                self.f,
            )
        excluded = {node.node_id for node in outliers}
        kept = [i for i, a in enumerate(accepted) if a.node_id not in excluded]
        flagged = sorted(rejected + outliers, key=lambda node: node.node_id)
        log(
            INFO,
            "aggregate_train: %d replies, %d aggregated, %d flagged",
            len(replies),
            len(kept),
            len(flagged),
        )
        self._report(server_round, flagged)

        arrays = None
        if kept and layout is not None:
            arrays = self._aggregate(updates[kept], origin, layout)
        metrics = self._train_metrics([accepted[i].content for i in kept])
        metrics[METRIC_ACCEPTED] = len(kept) if arrays is not None else 0
        metrics[METRIC_FLAGGED] = len(flagged)
        metrics[METRIC_FLAGGED_NODE_IDS] = [node.node_id for node in flagged]
        return arrays, metrics

    def aggregate_evaluate(
        self,
        server_round: int,
        replies: Iterable[Message],
    ) -> MetricRecord | None:
        """Aggregate evaluation metrics like FedAvg, without malformed or flagged nodes."""
        excluded = {node.node_id for node in self.flagged.get(server_round, [])}
        accepted, rejected, _ = _screen(
            list(replies), layout=None, weighted_by_key=self.weighted_by_key, need_arrays=False
        )
        for node in rejected:
            log(WARNING, "aggregate_evaluate: %s", node.summary)
        contents = [a.content for a in accepted if a.node_id not in excluded]
        if not contents or _total_weight(contents, self.weighted_by_key) <= 0:
            return None
        return self.evaluate_metrics_aggr_fn(contents, self.weighted_by_key)

    # -----------------------------------------------------------------------------------

    @staticmethod
    def _stack(accepted: Sequence[_Accepted], origin: Tensor | None) -> Tensor:
        if not accepted:
            return torch.zeros((0, 0))
        stacked = torch.stack([a.vector for a in accepted])
        return stacked if origin is None else stacked - origin

    def _aggregate(
        self, updates: Tensor, origin: Tensor | None, layout: ArrayLayout
    ) -> ArrayRecord | None:
        try:
            result = self.aggregator(updates)
        except ValueError as exc:  # too few replies for f: keep the model, say why
            log(WARNING, "aggregate_train: %s; the global model is left unchanged", exc)
            return None
        if origin is not None:
            result = origin + result
        return layout.rebuild(result.to(torch.float32))

    def _train_metrics(self, contents: list[RecordDict]) -> MetricRecord:
        if not contents or _total_weight(contents, self.weighted_by_key) <= 0:
            return MetricRecord()
        return self.train_metrics_aggr_fn(contents, self.weighted_by_key)

    def _report(self, server_round: int, flagged: list[FlaggedNode]) -> None:
        self.flagged[server_round] = flagged
        for node in flagged:
            log(WARNING, "aggregate_train: round %d: %s", server_round, node.summary)
        if flagged and self.on_flagged is not None:
            self.on_flagged(server_round, list(flagged))


def _total_weight(contents: Sequence[RecordDict], weighted_by_key: str) -> float:
    total = 0.0
    for content in contents:
        value = next(iter(content.metric_records.values()))[weighted_by_key]
        total += float(value) if not isinstance(value, list) else 0.0
    return total
