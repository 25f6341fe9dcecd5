"""Screening a round's replies: what cannot be aggregated is rejected, outliers are flagged.

Pure functions over Flower messages and tensors; `~phalanx.flower.strategy.RobustStrategy`
is a thin strategy around them.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

import torch
from flwr.app import Message, RecordDict
from torch import Tensor

from phalanx.assignment import none_assignment
from phalanx.detection import (
    DEFAULT_OUTLIER_THRESHOLD,
    LOCAL_OUTLIER_RATIO,
    Evidence,
    FileDispute,
    Replica,
    detect,
    payload_digest,
)
from phalanx.flower.array_layout import ArrayLayout
from phalanx.flower.flags import FlaggedNode, MalformedReplyError, rejection

T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class AcceptedReply:
    """A reply that can be aggregated: its node, its flat vector and its content."""

    node_id: int
    vector: Tensor
    content: RecordDict


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


def screen_replies(
    replies: Sequence[Message],
    *,
    layout: ArrayLayout | None,
    weighted_by_key: str,
    need_arrays: bool,
) -> tuple[list[AcceptedReply], list[FlaggedNode], ArrayLayout | None]:
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
            rejected[node] = rejection(node, "malformed", f"it sent {counts[node]} replies")
        elif msg.has_error():
            error = msg.error
            rejected[node] = rejection(node, "error", f"code {error.code}, {error.reason!r}")
        elif not msg.has_content():
            rejected[node] = rejection(node, "malformed", "it carries no content")
        elif need_arrays and len(msg.content.array_records) != 1:
            found = len(msg.content.array_records)
            rejected[node] = rejection(
                node, "malformed", f"expected one ArrayRecord, found {found}"
            )
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
            rejected[node] = rejection(node, exc.kind, exc.reason)
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

    accepted: list[AcceptedReply] = []
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
            accepted.append(AcceptedReply(node, vector, content))
        except MalformedReplyError as exc:
            rejected[node] = rejection(node, exc.kind, exc.reason)
    return accepted, [rejected[n] for n in sorted(rejected)], layout


def flag_outliers(
    updates: Tensor,
    node_ids: Sequence[int],
    *,
    f: int = 0,
    threshold: float | None = DEFAULT_OUTLIER_THRESHOLD,
    ratio: float = LOCAL_OUTLIER_RATIO,
) -> list[FlaggedNode]:
    """Flag the nodes whose update is an outlier, with detection's evidence.

    Each node computes its own data, so each update is the one replica of its own file
    (`phalanx.assignment.none_assignment`) and `phalanx.detection.detect` falls back to
    its outlier score: the distance to the coordinate-wise median of the updates, as a
    robust z-score (median and MAD over the nodes), flagged only where the distance is
    also ``ratio`` times the median distance (nodes' data differ, and a few nodes' MAD is
    noise); ``O(n d)``, no matrix of all pairs.

    Parameters
    ----------
    updates : Tensor
        Shape ``(n, d)``, float32, finite, one row per node.
    node_ids : sequence of int
        Flower node id of each row.
    f : int
        Byzantine nodes tolerated. Nothing is scored when ``n < f + 3``; the score itself
        does not depend on it (colluders sending one update are as far from the median
        as each of them alone).
    threshold : float or None
        Robust z-score above which a node is flagged; ``None`` disables detection.
    ratio : float
        How many times the median distance a flagged node's distance must also be.

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
    verdict = detect(
        none_assignment(n), replicas, outlier_threshold=threshold, outlier_ratio=ratio, f=f
    )
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
            f"over the threshold {threshold:.3g}, and {evidence.distance_ratio or 0.0:.3g} "
            f"times the typical distance to the median update (over "
            f"{evidence.ratio_threshold or 0.0:.3g}). Each node trains on its own data, so no "
            "replicas could be compared; this flag rests on distance alone (low severity)."
        ),
        score=score,
        threshold=threshold,
        evidence=evidence,
    )


def total_weight(contents: Sequence[RecordDict], weighted_by_key: str) -> float:
    """Sum of the replies' weights (``weighted_by_key`` of their one ``MetricRecord``)."""
    total = 0.0
    for content in contents:
        value = next(iter(content.metric_records.values()))[weighted_by_key]
        total += float(value) if not isinstance(value, list) else 0.0
    return total


def stack_updates(accepted: Sequence[AcceptedReply], origin: Tensor | None) -> Tensor:
    """Stack the accepted vectors, as differences from ``origin`` when one is given."""
    if not accepted:
        return torch.zeros((0, 0))
    stacked = torch.stack([a.vector for a in accepted])
    return stacked if origin is None else stacked - origin
