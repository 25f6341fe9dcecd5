"""What a round of a local-data run records of each client, for the run page's per-client view.

Per worker given work: its claimed sample count, how far its update sits from
the round's aggregate, and its federated evaluation report as it counted
(:mod:`phalanx.federated_evaluation`). The distance is relative: the L2 distance
of its update to the applied aggregate divided by the median of that distance
over every update the round checked (:func:`distance_ratios`), so 1 is a typical
client; an honest client with unusual data sits at a few, a crafted update
usually far beyond (and a flagged one is shown with its flag).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import torch
from torch import Tensor

from phalanx.detection import Replica
from phalanx.federated_evaluation import FederatedResult
from phalanx.reports import ClientRound


def distance_ratios(rows: Tensor, aggregate: Tensor) -> tuple[list[float], list[float | None]]:
    """Return each row's L2 distance to ``aggregate``, and it over their median.

    Parameters
    ----------
    rows : Tensor
        Shape ``(n, d)``, finite.
    aggregate : Tensor
        Shape ``(d,)``, finite.

    Returns
    -------
    tuple of lists
        The distances, and each divided by their median (lower median for even
        ``n``); a ratio is ``None`` when the median is 0 (most updates equal the
        aggregate) and the distance is not, and 1 when both are 0.
    """
    if rows.dim() != 2 or aggregate.dim() != 1 or rows.shape[1] != aggregate.shape[0]:
        raise ValueError(
            f"rows {tuple(rows.shape)} and aggregate {tuple(aggregate.shape)} do not match"
        )
    if rows.shape[0] == 0:
        return [], []
    distances = torch.linalg.vector_norm(
        rows.to(torch.float64) - aggregate.to(torch.float64), dim=1
    )
    median = float(distances.median())
    values = [float(d) for d in distances]
    ratios: list[float | None] = []
    for d in values:
        if median > 0 and math.isfinite(d / median):
            ratios.append(d / median)
        else:
            ratios.append(1.0 if d == 0 else None)
    return values, ratios


def client_rounds(
    workers: Iterable[int],
    client_ids: Mapping[int, str],
    *,
    replicas: Sequence[Replica],
    aggregate: Tensor | None,
    samples: Mapping[int, int],
    evaluation: FederatedResult | None,
) -> tuple[ClientRound, ...]:
    """Build the round's row of every worker in ``workers`` (those given work).

    ``replicas`` are the round's checked updates (accepted or not); ``aggregate``
    the update the round applied (``None``: none, and no distance); ``samples``
    the counts accepted replies claimed.
    """
    distance: dict[int, tuple[float | None, float | None]] = {}
    if aggregate is not None and replicas:
        rows = torch.stack([r.value.flatten() for r in replicas])
        values, ratios = distance_ratios(rows, aggregate.flatten())
        for replica, value, share in zip(replicas, values, ratios, strict=True):
            distance.setdefault(replica.worker, (value, share))
    judged = {j.worker: j for j in evaluation.judged} if evaluation is not None else {}
    failed = {f.worker for f in evaluation.failures} if evaluation is not None else set()
    silent = set(evaluation.silent) if evaluation is not None else set()
    out = []
    for w in sorted(workers):
        d, ratio = distance.get(w, (None, None))
        j = judged.get(w)
        status = (
            j.status
            if j is not None
            else "failed"
            if w in failed
            else "silent"
            if w in silent
            else None
        )
        out.append(
            ClientRound(
                worker=w,
                client_id=client_ids.get(w),
                samples=samples.get(w),
                distance=d,
                distance_ratio=ratio,
                eval_status=status,
                eval_loss=None if j is None else j.loss,
                eval_accuracy=None if j is None else j.accuracy,
                eval_samples=None if j is None else j.num_samples,
            )
        )
    return tuple(out)
