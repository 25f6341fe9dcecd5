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

Steps 1 and 2 are pure functions of :mod:`phalanx.flower.screening` (over
:mod:`~phalanx.flower.array_layout`, which maps an ``ArrayRecord`` to one vector, and
:mod:`~phalanx.flower.flags`, the record of an exclusion); this class carries the
settings, calls them, aggregates and reports, as Flower's own strategies do.

Flower node ids are unsigned 64-bit integers; ``MetricRecord`` stores them exactly (as
``uint64`` on the wire), so ``"phalanx.flagged_node_ids"`` holds the ids themselves.
JSON for browsers (`FlaggedNode.to_dict`) writes them as strings, as the database does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from logging import INFO, WARNING
from typing import Any

import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.common.logger import log
from flwr.serverapp import Grid
from flwr.serverapp.strategy import FedAvg
from torch import Tensor

from phalanx.aggregation import RobustAggregator
from phalanx.detection import DEFAULT_OUTLIER_THRESHOLD, LOCAL_OUTLIER_RATIO, check_screening
from phalanx.flower.array_layout import ArrayLayout
from phalanx.flower.flags import FlaggedNode, FlagKind, MalformedReplyError
from phalanx.flower.screening import flag_outliers, screen_replies, stack_updates, total_weight

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

FlaggedCallback = Callable[[int, list["FlaggedNode"]], None]


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
    outlier_ratio : float
        How many times the typical distance to the median update a flagged node's must
        also be (at least 1; 5 by default: nodes train on their own, differing data).
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
        outlier_ratio: float = LOCAL_OUTLIER_RATIO,
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
        check_screening(outlier_threshold, outlier_ratio)
        self.aggregator = RobustAggregator(
            rule=rule,
            f=f,
            pre=pre,
            options=dict(rule_options or {}),
            pre_options=dict(pre_options or {}),
        )
        self.outlier_threshold = outlier_threshold
        self.outlier_ratio = outlier_ratio
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
        log(
            INFO,
            "\t│\t├── Outlier threshold: %s, %s times the typical distance",
            self.outlier_threshold,
            self.outlier_ratio,
        )
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
        accepted, rejected, layout = screen_replies(
            replies,
            layout=None if sent is None else sent.layout,
            weighted_by_key=self.weighted_by_key,
            need_arrays=True,
        )
        origin = sent.vector if sent is not None and self.aggregate_updates else None
        updates = stack_updates(accepted, origin)
        outliers = flag_outliers(
            updates,
            [a.node_id for a in accepted],
            f=self.f,
            threshold=self.outlier_threshold,
            ratio=self.outlier_ratio,
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
        accepted, rejected, _ = screen_replies(
            list(replies), layout=None, weighted_by_key=self.weighted_by_key, need_arrays=False
        )
        for node in rejected:
            log(WARNING, "aggregate_evaluate: %s", node.summary)
        contents = [a.content for a in accepted if a.node_id not in excluded]
        if not contents or total_weight(contents, self.weighted_by_key) <= 0:
            return None
        return self.evaluate_metrics_aggr_fn(contents, self.weighted_by_key)

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
        if not contents or total_weight(contents, self.weighted_by_key) <= 0:
            return MetricRecord()
        return self.train_metrics_aggr_fn(contents, self.weighted_by_key)

    def _report(self, server_round: int, flagged: list[FlaggedNode]) -> None:
        self.flagged[server_round] = flagged
        for node in flagged:
            log(WARNING, "aggregate_train: round %d: %s", server_round, node.summary)
        if flagged and self.on_flagged is not None:
            self.on_flagged(server_round, list(flagged))
