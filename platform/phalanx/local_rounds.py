"""What a round does differently with local data (``data.mode = "local"``).

The round loop is the same for both data modes (tasks, transport, checks,
detection, aggregation); with local data, :class:`LocalRounds` adds three things:

* every task carries the run's :class:`~phalanx.data_mode.ModelShape` and no
  sample index: the client builds the model from it and trains on its own data;
* every accepted reply's sample count (signed with its digests, checked by
  :func:`phalanx.replies.check_reply`) weighs its update in the ``mean`` rule,
  FedAvg's weighting (:func:`~phalanx.aggregation.weighting.weighted_mean`),
  when no pre-aggregator mixes the rows first; the robust rules and the
  pre-aggregators take no weights (see :mod:`phalanx.aggregation.weighting`);
* a claimed count is capped (:func:`count_cap`): counts are what clients say.

The cap. When the coordinator made the partition (simulation), a claim counts for
at most the largest part it gave any client: no honest client is ever cut, and a
client that claims more weighs no more than the largest honest one. When it
cannot know the sizes (a deployed client's own data), a claim counts for at most
:data:`MEDIAN_MULTIPLE` times the round's median claim: the median stays among
honest claims while fewer than half of the accepted replies lie about their
counts, and honest clients up to four times the typical size keep their full
weight.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from phalanx.aggregation.weighting import weighted_mean
from phalanx.config import AggregationConfig
from phalanx.data_mode import ModelShape
from phalanx.detection import Replica
from phalanx.local_evaluation import split_sizes
from phalanx.partitions import PartitionReport
from phalanx.replies import Task

MEDIAN_MULTIPLE = 4
"""Without a known partition, a claim counts for at most this many times the median claim."""


def count_cap(claims: Sequence[int], largest_part: int | None) -> int:
    """Return the most samples one client's claim counts for in a round.

    Parameters
    ----------
    claims : sequence of int
        The sample counts of the round's accepted replies, each ``>= 1``.
    largest_part : int, optional
        The largest part of the run's partition, when the coordinator made it.

    Returns
    -------
    int
        ``largest_part`` when known, else :data:`MEDIAN_MULTIPLE` times the median
        claim (rounded down, at least 1); 1 when there are no claims.
    """
    if largest_part is not None:
        return max(1, largest_part)
    if not claims:
        return 1
    return max(1, int(MEDIAN_MULTIPLE * statistics.median(claims)))


@dataclass(frozen=True)
class Weights:
    """The sample weights of a round's accepted updates, in the order of their files."""

    counts: Tensor
    """int64, one capped count per accepted file."""
    cap: int
    capped: int
    """How many claims were above the cap."""

    def metrics(self) -> dict[str, float]:
        """Return what the round reports of its weights."""
        return {
            "samples_weighted": float(self.counts.sum()),
            "count_cap": float(self.cap),
            "capped_claims": float(self.capped),
        }


@dataclass(frozen=True)
class LocalRounds:
    """The local-data side of a run's rounds.

    Parameters
    ----------
    shape : ModelShape
        The run's model, as every task names it.
    largest_part : int, optional
        The largest part of the run's partition (simulation); ``None`` when the
        clients' data sizes are unknown to the coordinator.
    """

    shape: ModelShape
    largest_part: int | None = None

    @classmethod
    def of(
        cls,
        shape: ModelShape,
        partition: PartitionReport | None,
        test_fraction: float | None = None,
    ) -> LocalRounds:
        """Build the local side of a run whose model is ``shape``, partitioned as reported.

        With ``test_fraction`` (federated evaluation on) each client trains on what
        its local test split leaves (:func:`phalanx.local_evaluation.split_sizes`),
        so the cap is the largest such part.
        """
        if partition is None or not partition.samples:
            return cls(shape=shape)
        trained = [split_sizes(n, test_fraction)[0] for n in partition.samples]
        return cls(shape=shape, largest_part=max(trained))

    def task(self, task: Task) -> Task:
        """Return ``task`` as a local-data task: the model's shape, a signed count expected."""
        return dataclasses.replace(task, model_shape=self.shape)

    @staticmethod
    def weighs(aggregation: AggregationConfig) -> bool:
        """Whether the run's rule takes sample weights: ``mean`` with no pre-aggregator."""
        return aggregation.rule == "mean" and aggregation.pre is None

    def weights(
        self, files: Sequence[int], replicas: Sequence[Replica], samples: Mapping[int, int]
    ) -> Weights:
        """Return the capped sample count of each accepted file's update.

        ``samples`` maps a worker to the count its accepted reply reports; with r = 1
        each file has the one replica of the worker that sent it.

        Raises
        ------
        ValueError
            When an accepted file has no replica with a reported count (the checks
            let no such reply through: the coordinator's bug).
        """
        sender = {r.file: r.worker for r in replicas}
        claims = []
        for f in files:
            worker = sender.get(f)
            if worker is None or worker not in samples:
                raise ValueError(f"accepted file {f} has no sample count")
            claims.append(samples[worker])
        cap = count_cap(claims, self.largest_part)
        counts = torch.tensor([min(c, cap) for c in claims], dtype=torch.int64)
        return Weights(counts=counts, cap=cap, capped=sum(c > cap for c in claims))

    @staticmethod
    def aggregate(rows: Tensor, counts: Tensor) -> Tensor:
        """FedAvg's mean of ``rows`` weighted by their (capped) ``counts``."""
        return weighted_mean(rows, counts)
