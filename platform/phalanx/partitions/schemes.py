"""How a labelled training split is divided among simulated clients.

Each function returns a :data:`Partition`: one int64 array of sample indices per
client, indices into the labels it was given. The definitions follow Flower
Datasets' partitioners (``flwr_datasets.partitioner``, 0.6), so that a Flower
user finds the partitions they know; each function says which partitioner it
follows and where it differs. ``flwr-datasets`` itself is not a dependency: its
partitioners work on Hugging Face ``datasets.Dataset`` objects and pull in
``datasets``, ``pyarrow``, ``matplotlib`` and ``seaborn``; these are the few
lines of NumPy its definitions need, over a plain label array.

Randomness comes from one ``numpy.random.default_rng(seed)`` per call, drawn in
the order Flower's partitioners draw, so a partition depends only on the labels,
the parameters and the seed (on one NumPy version: NumPy keeps the bit stream of
``PCG64`` stable, not the algorithms of ``Generator.dirichlet`` or
``Generator.permutation``). As in Flower, each client's indices are shuffled
after the assignment.

Every sample is in exactly one client's partition, except where a definition
leaves samples out: :func:`pathological_partition` drops the samples of a label
no client drew, and :func:`sized_partition` leaves unassigned the samples beyond
the sum of the sizes. Bad parameters raise :class:`ValueError` naming the fix.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from numpy.typing import NDArray

Indices = NDArray[np.int64]
Partition = tuple[Indices, ...]
"""One array of sample indices per client, client ``i`` at position ``i``."""

LabelAssignment = Literal["random", "deterministic", "first-deterministic"]

MAX_DRAWS = 11
"""Dirichlet draws tried before giving up on ``min_partition_size`` (Flower: 1 + 10 retries)."""
MAX_SEED = 2**63 - 1


def iid_partition(num_samples: int, num_clients: int, *, seed: int) -> Partition:
    """Shuffle the samples and cut them into ``num_clients`` near-equal contiguous parts.

    Flower Datasets' ``FederatedDataset(shuffle=True, seed=seed)`` with an
    ``IidPartitioner``: a permutation of the samples, then contiguous shards whose
    sizes differ by at most one (the first ``num_samples % num_clients`` hold
    one more), as Hugging Face's ``Dataset.shard(contiguous=True)`` cuts them.

    Parameters
    ----------
    num_samples : int
        Samples in the split.
    num_clients : int
        ``1 .. num_samples``: every client gets at least one sample.
    seed : int
        ``0 .. 2**63 - 1``.
    """
    _check_counts(num_samples, num_clients)
    rng = np.random.default_rng(_checked_seed(seed))
    order = rng.permutation(num_samples).astype(np.int64)
    base, extra = divmod(num_samples, num_clients)
    sizes = [base + (1 if client < extra else 0) for client in range(num_clients)]
    return _cut(order, sizes)


def dirichlet_partition(
    labels: NDArray[np.integer],
    num_clients: int,
    *,
    alpha: float,
    seed: int,
    min_partition_size: int = 10,
    self_balancing: bool = False,
) -> Partition:
    """Split each label's samples among the clients in Dirichlet(``alpha``) proportions.

    Flower Datasets' ``DirichletPartitioner`` (after Yurochkin et al. 2019, as
    in NIID-Bench): for every label, in ascending order, proportions
    ``p ~ Dir(alpha, ..., alpha)`` over the clients are drawn, and the label's
    samples, in dataset order, are cut at ``floor(cumsum(p) * n_label)``. With
    ``self_balancing``, a client that already holds more than ``N / num_clients``
    samples gets no share of the labels that follow (the others' proportions are
    renormalised). The draw is repeated while some client holds fewer than
    ``min_partition_size`` samples, up to :data:`MAX_DRAWS` draws in all.

    Large ``alpha`` gives every client nearly the label histogram of the whole
    split; small ``alpha`` gives each label to few clients.

    Parameters
    ----------
    labels : array of int
        1-D, the label of every sample, ``>= 0``.
    num_clients : int
        ``1 .. len(labels)``.
    alpha : float
        Concentration, finite and ``> 0``.
    seed : int
        ``0 .. 2**63 - 1``.
    min_partition_size : int
        Fewest samples a client may hold, ``0 .. len(labels) // num_clients``.
    self_balancing : bool
        Stop giving samples to clients above the average size.

    Raises
    ------
    ValueError
        On a bad parameter, or when no draw met ``min_partition_size``.
    """
    y = _checked_labels(labels)
    _check_counts(len(y), num_clients)
    _check_alpha(alpha)
    _check_min_size(min_partition_size, len(y), num_clients)
    rng = np.random.default_rng(_checked_seed(seed))
    concentration = np.full(num_clients, float(alpha))
    average = len(y) / num_clients
    by_label = [np.flatnonzero(y == label) for label in np.unique(y)]
    for _ in range(MAX_DRAWS):
        parts: list[list[int]] = [[] for _ in range(num_clients)]
        for members in by_label:
            proportions = rng.dirichlet(concentration)
            if self_balancing:
                proportions = _balanced(proportions, parts, average)
            cuts = (np.cumsum(proportions) * len(members)).astype(int)[:-1]
            for client, chunk in enumerate(np.split(members, cuts)):
                parts[client].extend(chunk.tolist())
        if min(len(part) for part in parts) >= min_partition_size:
            return _shuffled(parts, rng)
    raise ValueError(
        f"no Dirichlet draw with alpha={alpha} gave every one of {num_clients} clients "
        f"min_partition_size={min_partition_size} samples in {MAX_DRAWS} draws; raise alpha, "
        "lower min_partition_size or use fewer clients"
    )


def pathological_partition(
    labels: NDArray[np.integer],
    num_clients: int,
    *,
    labels_per_client: int,
    seed: int,
    assignment: LabelAssignment = "random",
) -> Partition:
    """Give every client the samples of exactly ``labels_per_client`` labels.

    Flower Datasets' ``PathologicalPartitioner`` (NIID-Bench's ``#C = k``): each
    client is given ``labels_per_client`` distinct labels of those present
    (ascending), then each label's samples, in dataset order, are cut into as many
    near-equal parts (``numpy.array_split``) as clients hold it, handed out in
    client order. ``assignment`` chooses the labels:

    - ``"random"``: each client draws its labels without replacement (Flower's default);
    - ``"deterministic"``: client ``i`` holds labels ``(i + j) % L``, ``j < labels_per_client``;
    - ``"first-deterministic"``: client ``i`` holds label ``i % L`` and draws the
      rest at random (the original paper's choice; every label is used when there
      are at least ``L`` clients).

    Samples of a label that no client holds are left out of the partition.

    Parameters
    ----------
    labels : array of int
        1-D, the label of every sample, ``>= 0``.
    num_clients : int
        ``1 .. len(labels)``.
    labels_per_client : int
        ``1 ..`` the number of distinct labels present.
    seed : int
        ``0 .. 2**63 - 1``.
    assignment : {"random", "deterministic", "first-deterministic"}
        How labels are given to clients.

    Raises
    ------
    ValueError
        On a bad parameter, or when a label is held by more clients than it has samples.
    """
    y = _checked_labels(labels)
    _check_counts(len(y), num_clients)
    present = [int(label) for label in np.unique(y)]
    if not _is_int(labels_per_client) or not 1 <= labels_per_client <= len(present):
        raise ValueError(
            f"labels_per_client must be a whole number in 1..{len(present)} (the distinct "
            f"labels present), got {labels_per_client!r}"
        )
    rng = np.random.default_rng(_checked_seed(seed))
    held = _labels_of_clients(present, num_clients, labels_per_client, assignment, rng)
    holders = {label: [c for c in range(num_clients) if label in held[c]] for label in present}
    parts: list[list[int]] = [[] for _ in range(num_clients)]
    for label in present:
        members = np.flatnonzero(y == label)
        if len(holders[label]) > len(members):
            raise ValueError(
                f"label {label} is held by {len(holders[label])} clients but has only "
                f"{len(members)} samples; use fewer clients or labels_per_client, or "
                "assignment='deterministic'"
            )
        if holders[label]:
            chunks = np.array_split(members, len(holders[label]))
            for client, chunk in zip(holders[label], chunks, strict=True):
                parts[client].extend(chunk.tolist())
    return _shuffled(parts, rng)


def sized_partition(num_samples: int, sizes: Sequence[int], *, seed: int) -> Partition:
    """Shuffle the samples and give client ``i`` the next ``sizes[i]`` of them.

    Flower Datasets' ``FederatedDataset(shuffle=True, seed=seed)`` with a
    ``SizePartitioner(sizes)``. Samples beyond ``sum(sizes)`` are left out.

    Parameters
    ----------
    num_samples : int
        Samples in the split.
    sizes : sequence of int
        One size per client, each ``>= 1``, summing to at most ``num_samples``.
    seed : int
        ``0 .. 2**63 - 1``.
    """
    checked = _checked_sizes(sizes, num_samples)
    rng = np.random.default_rng(_checked_seed(seed))
    return _cut(rng.permutation(num_samples).astype(np.int64), checked)


def quantity_skew_sizes(
    num_samples: int,
    num_clients: int,
    *,
    alpha: float,
    seed: int,
    min_partition_size: int = 10,
) -> tuple[int, ...]:
    """Draw client sizes in Dirichlet(``alpha``) proportions (NIID-Bench's quantity skew).

    Proportions ``q ~ Dir(alpha, ..., alpha)`` over the clients give sizes
    ``floor(q * num_samples)``, the samples left by rounding going to the last
    client (as Flower Datasets' size-function partitioners round). The draw is
    repeated while a size is below ``min_partition_size``, up to :data:`MAX_DRAWS`
    draws. The sizes sum to ``num_samples``.

    Parameters
    ----------
    num_samples : int
        Samples in the split.
    num_clients : int
        ``1 .. num_samples``.
    alpha : float
        Concentration, finite and ``> 0``: large is near-equal sizes, small is skewed.
    seed : int
        ``0 .. 2**63 - 1``.
    min_partition_size : int
        Fewest samples a client may hold, ``0 .. num_samples // num_clients``.
    """
    _check_counts(num_samples, num_clients)
    _check_alpha(alpha)
    _check_min_size(min_partition_size, num_samples, num_clients)
    rng = np.random.default_rng(_checked_seed(seed))
    return _quantity_sizes(rng, num_samples, num_clients, alpha, min_partition_size)


def quantity_skew_partition(
    num_samples: int,
    num_clients: int,
    *,
    alpha: float,
    seed: int,
    min_partition_size: int = 10,
) -> Partition:
    """IID samples in sizes drawn by :func:`quantity_skew_sizes` with the same ``seed``.

    The sizes come first from the seeded generator, then the permutation the
    samples are cut from (as :func:`sized_partition` cuts them). Every sample is
    in exactly one client's partition.
    """
    _check_counts(num_samples, num_clients)
    _check_alpha(alpha)
    _check_min_size(min_partition_size, num_samples, num_clients)
    rng = np.random.default_rng(_checked_seed(seed))
    sizes = _quantity_sizes(rng, num_samples, num_clients, alpha, min_partition_size)
    return _cut(rng.permutation(num_samples).astype(np.int64), list(sizes))


# --------------------------------------------------------------------------- internals


def _quantity_sizes(
    rng: np.random.Generator, num_samples: int, num_clients: int, alpha: float, least: int
) -> tuple[int, ...]:
    concentration = np.full(num_clients, float(alpha))
    for _ in range(MAX_DRAWS):
        sizes = (rng.dirichlet(concentration) * num_samples).astype(np.int64)
        sizes[-1] += num_samples - int(sizes.sum())
        if int(sizes.min()) >= least:
            return tuple(int(s) for s in sizes)
    raise ValueError(
        f"no Dirichlet draw with alpha={alpha} gave every one of {num_clients} clients "
        f"min_partition_size={least} of {num_samples} samples in {MAX_DRAWS} draws; raise "
        "alpha, lower min_partition_size or use fewer clients"
    )


def _balanced(
    proportions: NDArray[np.float64], parts: list[list[int]], average: float
) -> NDArray[np.float64]:
    """Zero the shares of clients above ``average`` samples and renormalise (Flower's rule)."""
    kept = np.where([len(part) > average for part in parts], 0.0, proportions)
    # Python's sum, not NumPy's pairwise one: the cuts then round as Flower's do.
    total = sum(kept.tolist())
    # The clients at or below the average can all have drawn a share that underflowed to
    # zero (tiny alpha): Flower would divide by zero here; keep the unbalanced draw instead.
    return kept / total if total > 0 else proportions


def _labels_of_clients(
    present: list[int],
    num_clients: int,
    k: int,
    assignment: LabelAssignment,
    rng: np.random.Generator,
) -> list[list[int]]:
    count = len(present)
    if assignment == "random":
        return [
            [int(v) for v in rng.choice(present, size=k, replace=False)] for _ in range(num_clients)
        ]
    if assignment == "deterministic":
        return [[present[(c + j) % count] for j in range(k)] for c in range(num_clients)]
    if assignment == "first-deterministic":
        held: list[list[int]] = []
        for client in range(num_clients):
            mine = [present[client % count]]
            while len(mine) < k:
                label = int(rng.choice(present, size=1)[0])
                if label not in mine:
                    mine.append(label)
            held.append(mine)
        return held
    raise ValueError(
        f"unknown assignment {assignment!r}; use 'random', 'deterministic' or 'first-deterministic'"
    )


def _shuffled(parts: list[list[int]], rng: np.random.Generator) -> Partition:
    for part in parts:
        rng.shuffle(part)
    return tuple(np.asarray(part, dtype=np.int64) for part in parts)


def _cut(order: Indices, sizes: Sequence[int]) -> Partition:
    ends = np.cumsum(sizes)
    return tuple(order[end - size : end].copy() for size, end in zip(sizes, ends, strict=True))


def _is_int(value: object) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def _checked_seed(seed: int) -> int:
    if not _is_int(seed) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed must be a whole number in 0..2**63 - 1, got {seed!r}")
    return int(seed)


def _check_counts(num_samples: int, num_clients: int) -> None:
    if not _is_int(num_samples) or num_samples < 1:
        raise ValueError(f"there must be at least one sample, got {num_samples!r}")
    if not _is_int(num_clients) or num_clients < 1:
        raise ValueError(f"num_clients must be a whole number >= 1, got {num_clients!r}")
    if num_clients > num_samples:
        raise ValueError(
            f"{num_clients} clients but only {num_samples} samples: every client needs at "
            "least one sample; use fewer clients"
        )


def _check_alpha(alpha: float) -> None:
    if (
        isinstance(alpha, bool)
        or not isinstance(alpha, int | float | np.floating | np.integer)
        or not math.isfinite(alpha)
        or alpha <= 0
    ):
        raise ValueError(f"alpha must be a finite number > 0, got {alpha!r}")


def _check_min_size(least: int, num_samples: int, num_clients: int) -> None:
    most = num_samples // num_clients
    if not _is_int(least) or not 0 <= least <= most:
        raise ValueError(
            f"min_partition_size must be a whole number in 0..{most} ({num_samples} samples "
            f"over {num_clients} clients), got {least!r}"
        )


def _checked_labels(labels: NDArray[np.integer]) -> NDArray[np.int64]:
    y = np.asarray(labels)
    if y.ndim != 1 or y.size == 0:
        raise ValueError(f"labels must be a non-empty 1-D array, got shape {y.shape}")
    if not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"labels must be integers, got {y.dtype}")
    if int(y.min()) < 0:
        raise ValueError(f"labels must be >= 0, got {int(y.min())}")
    return y.astype(np.int64, copy=False)


def _checked_sizes(sizes: Sequence[int], num_samples: int) -> list[int]:
    if not _is_int(num_samples) or num_samples < 1:
        raise ValueError(f"there must be at least one sample, got {num_samples!r}")
    checked = list(sizes)
    if not checked:
        raise ValueError("sizes must name at least one client")
    if not all(_is_int(s) and s >= 1 for s in checked):
        raise ValueError(f"every size must be a whole number >= 1, got {checked[:20]}")
    total = sum(int(s) for s in checked)
    if total > num_samples:
        raise ValueError(f"the sizes sum to {total}, more than the {num_samples} samples")
    return [int(s) for s in checked]
