"""Adversary detection: compare replicas, find the largest agreeing group, explain every flag.

Every file is computed by several workers, its *replicas*. Honest workers compute the
same update for the same file, so they agree with one another on every file they share:
in the *agreement graph* (workers joined iff they agree on every file they both replied
for) the honest workers always form a clique. Aspis flags every worker outside the
maximum clique when it is unique and falls back to a per-file majority when several
maximum cliques compete; Aspis+ adds a degree test accumulated over a window of rounds
(`DegreeWindow`). With one replica per file (r = 1) nothing can be compared, and a
distance-based outlier score is the only, weaker, evidence (severity ``"low"``).

Every flag carries an `Evidence` record that says, in data and in plain English, which
replicas disagreed, by how much, and which rule turned that into a flag.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import networkx as nx
import torch
from torch import Tensor

from phalanx.assignment import Assignment
from phalanx.english_list import join_words as _join
from phalanx.english_list import name_numbers as _listing
from phalanx.finite import all_finite

Mode = Literal["exact", "tolerance", "auto"]
Severity = Literal["high", "low"]
EvidenceKind = Literal["outside_max_clique", "majority_minority", "outlier", "low_degree"]
Rule = Literal["unique_clique", "majority", "unanimity", "outlier", "none"]
TiePolicy = Literal["drop_disputed", "majority"]

DEFAULT_TOL = 1e-5
"""Default relative L2 tolerance for two replicas to agree.

Honest replicas computed on different hardware or BLAS builds differ only by float32
rounding: the unit roundoff is about 6e-8 and reductions over a model's parameters
accumulate it to roughly 1e-7 .. 1e-6 relative. 1e-5 sits about two orders of magnitude
above that noise, so honest noise never flags anyone, while a distortion small enough to
pass (under 0.001 % of the update's norm) is dwarfed by the ordinary spread between
honest updates of different files, so it cannot steer training.
"""

DEFAULT_OUTLIER_THRESHOLD = 8.0
"""Robust z-score above which an r = 1 update counts as an outlier.

Iglewicz and Hoaglin's 3.5 assumes normal scores, but an honest update's distance
score follows its gradient norm, whose tail is heavy: at 3.5 one honest update in 30
to 35 was flagged in runs without any attack (Fashion-MNIST, 15 workers, 20 to 30
rounds; MLP and CNN), at 8 one in 450 or none, while the reversed gradient, IPM and
the constant attack scored far above 8 and were flagged in every round. Updates
between the honest spread and this cut-off still meet the robust rule.
"""

MAX_LISTED_CLIQUES = 64
"""`Verdict.max_cliques` lists at most this many maximum cliques (their number is a
product over conflict components and can be exponential); `Verdict.num_max_cliques`
always holds the true count."""

_MAD_TO_SIGMA = 1.4826  # MAD of a normal distribution times this is its standard deviation


def payload_digest(data: bytes) -> str:
    """Hex SHA-256 of a payload, as the worker signed it."""
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, eq=False)
class Replica:
    """One worker's update for one file.

    Parameters
    ----------
    worker : int
        Worker index in this round's `Assignment`.
    file : int
        File index in this round's `Assignment`.
    value : Tensor
        The decoded update: 1-D, float32, finite.
    digest : str
        `payload_digest` of the encoded payload bytes as sent.
    """

    worker: int
    file: int
    value: Tensor
    digest: str

    def __post_init__(self) -> None:
        if self.value.ndim != 1 or self.value.dtype != torch.float32:
            raise ValueError(
                f"replica of worker {self.worker} for file {self.file} must be a 1-D float32 "
                f"tensor, got shape {tuple(self.value.shape)} and {self.value.dtype}; "
                "flatten and cast the decoded update first"
            )
        if not all_finite(self.value):
            raise ValueError(
                f"replica of worker {self.worker} for file {self.file} holds NaN or Inf; "
                "reject such replies before detection"
            )


# ---------------------------------------------------------------------------------------
# Comparing replicas


def relative_distances(values: Tensor) -> Tensor:
    """Pairwise relative L2 distances ``||a - b|| / max(||a||, ||b||)``.

    Computed in float64 (exact enough at tolerances near float32 precision, and no
    overflow on huge adversarial values). Two zero vectors are at distance 0.

    Parameters
    ----------
    values : Tensor
        Shape ``(m, d)``, one replica per row.

    Returns
    -------
    Tensor
        Shape ``(m, m)``, float64, symmetric, zero on the diagonal, at most 2.
    """
    v = values.to(torch.float64)
    # The matmul shortcut loses the small differences a tolerance test needs.
    dist = torch.cdist(v, v, compute_mode="donot_use_mm_for_euclid_dist")
    norms = torch.linalg.vector_norm(v, dim=1)
    scale = torch.maximum(norms[:, None], norms[None, :])
    return torch.where(scale > 0, dist / scale.clamp_min(torch.finfo(torch.float64).tiny), 0.0)


def _check_mode(mode: str, tol: float) -> None:
    if mode not in get_args(Mode):
        raise ValueError(f"mode must be one of {get_args(Mode)}, got {mode!r}")
    if not tol >= 0:
        raise ValueError(f"tol must be a non-negative relative distance, got {tol}")


def replicas_agree(
    a: Replica, b: Replica, *, mode: Mode = "auto", tol: float = DEFAULT_TOL
) -> bool:
    """Whether two replicas agree.

    Parameters
    ----------
    a, b : Replica
        Replicas of the same file.
    mode : {"exact", "tolerance", "auto"}
        ``"exact"``: equal digests. ``"tolerance"``: relative L2 distance at most
        ``tol``. ``"auto"``: equal digests agree at once, otherwise the tolerance test.
    tol : float
        Relative L2 tolerance.
    """
    return bool(compare_file(a.file, (a, b), mode=mode, tol=tol).agree[0, 1])


@dataclass(frozen=True, eq=False)
class FileComparison:
    """All pairwise comparisons between the replicas of one file.

    Attributes
    ----------
    file : int
        File index.
    replicas : tuple of Replica
        The replicas received, sorted by worker.
    agree : Tensor
        ``(m, m)`` bool; ``agree[i, j]`` iff replicas ``i`` and ``j`` agree.
    distances : Tensor or None
        ``(m, m)`` relative distances; ``None`` when every digest matched and the mode
        did not need them.
    """

    file: int
    replicas: tuple[Replica, ...]
    agree: Tensor
    distances: Tensor | None

    @property
    def workers(self) -> tuple[int, ...]:
        """Workers that replied for this file, in increasing order."""
        return tuple(r.worker for r in self.replicas)

    def conflicts(self) -> Iterator[tuple[int, int]]:
        """Pairs of workers ``(a, b)``, ``a < b``, whose replicas disagree."""
        for i, j in itertools.combinations(range(len(self.replicas)), 2):
            if not self.agree[i, j]:
                yield self.replicas[i].worker, self.replicas[j].worker


def compare_file(
    file: int, replicas: Sequence[Replica], *, mode: Mode = "auto", tol: float = DEFAULT_TOL
) -> FileComparison:
    """Compare every pair of replicas of one file (see `replicas_agree` for the modes).

    Distances are computed for the whole file at once, and only when needed: always in
    ``"tolerance"`` mode, and otherwise only when some digests differ (in ``"exact"``
    mode they then serve as evidence).
    """
    _check_mode(mode, tol)
    reps = tuple(sorted(replicas, key=lambda r: r.worker))
    if not reps or any(r.file != file for r in reps):
        raise ValueError(f"compare_file needs at least one replica, all of file {file}")
    digests = [r.digest for r in reps]
    same = torch.tensor([[x == y for y in digests] for x in digests], dtype=torch.bool)
    distances = None
    if mode == "tolerance" or not bool(same.all()):
        distances = relative_distances(torch.stack([r.value for r in reps]))
    within_tol = None if distances is None else distances <= tol
    if mode == "exact" or within_tol is None:
        agree = same
    elif mode == "tolerance":
        agree = within_tol
    else:
        agree = same | within_tol
    return FileComparison(file=file, replicas=reps, agree=agree, distances=distances)


def _group_by_file(assignment: Assignment, replicas: Sequence[Replica]) -> dict[int, list[Replica]]:
    """Replicas per file, after checking each against the assignment."""
    by_file: dict[int, list[Replica]] = {}
    seen: set[tuple[int, int]] = set()
    length: int | None = None
    for r in replicas:
        if not 0 <= r.file < assignment.num_files:
            raise ValueError(f"replica names file {r.file}, outside 0..{assignment.num_files - 1}")
        if r.worker not in assignment.workers_of(r.file):
            raise ValueError(
                f"worker {r.worker} sent a replica for file {r.file}, which is not assigned "
                "to it; reject unassigned files before detection"
            )
        if (r.worker, r.file) in seen:
            raise ValueError(f"worker {r.worker} sent two replicas for file {r.file}")
        seen.add((r.worker, r.file))
        length = r.value.numel() if length is None else length
        if r.value.numel() != length:
            raise ValueError(
                f"replica of worker {r.worker} for file {r.file} has {r.value.numel()} "
                f"values, others have {length}; reject wrongly shaped replies before detection"
            )
        by_file.setdefault(r.file, []).append(r)
    return by_file


def compare_replicas(
    assignment: Assignment,
    replicas: Sequence[Replica],
    *,
    mode: Mode = "auto",
    tol: float = DEFAULT_TOL,
) -> dict[int, FileComparison]:
    """`compare_file` for every file that received at least one replica."""
    by_file = _group_by_file(assignment, replicas)
    return {f: compare_file(f, reps, mode=mode, tol=tol) for f, reps in sorted(by_file.items())}


def conflict_graph(workers: Iterable[int], comparisons: Iterable[FileComparison]) -> nx.Graph:
    """Graph over ``workers`` joining two workers iff they disagree on some shared file.

    It is the complement of the agreement graph and, when most workers agree, far
    sparser: detection works on it so that thousands of workers stay cheap.
    """
    graph = nx.Graph()
    graph.add_nodes_from(workers)
    for comparison in comparisons:
        graph.add_edges_from(comparison.conflicts())
    return graph


def agreement_graph(
    assignment: Assignment,
    replicas: Sequence[Replica],
    *,
    mode: Mode = "auto",
    tol: float = DEFAULT_TOL,
) -> nx.Graph:
    """Agreement graph over the workers that replied.

    Workers ``i`` and ``j`` are joined iff they agree on every file they both replied for
    (workers that share no file are joined: no conflict). Quadratic in the number of
    workers; `detect` uses the sparse `conflict_graph` instead.
    """
    comparisons = compare_replicas(assignment, replicas, mode=mode, tol=tol).values()
    return nx.complement(conflict_graph(sorted({r.worker for r in replicas}), comparisons))


# ---------------------------------------------------------------------------------------
# Maximum cliques of the agreement graph, one conflict component at a time


@dataclass(frozen=True)
class MaximumCliques:
    """The maximum cliques of an agreement graph, in factored form.

    Every maximum clique is ``free`` plus one choice from each entry of ``alternatives``.

    Attributes
    ----------
    free : frozenset of int
        Workers that conflict with nobody; they belong to every maximum clique.
    alternatives : tuple of tuple of frozenset of int
        Per connected component of the conflict graph, its maximum independent sets
        (sets of workers with no conflict among them), sorted.
    """

    free: frozenset[int]
    alternatives: tuple[tuple[frozenset[int], ...], ...]

    @property
    def size(self) -> int:
        """Number of workers in a maximum clique."""
        return len(self.free) + sum(len(options[0]) for options in self.alternatives)

    @property
    def count(self) -> int:
        """Number of maximum cliques."""
        return math.prod(len(options) for options in self.alternatives)

    @property
    def is_unique(self) -> bool:
        """Whether there is exactly one maximum clique."""
        return all(len(options) == 1 for options in self.alternatives)

    @property
    def union(self) -> frozenset[int]:
        """Workers that belong to at least one maximum clique."""
        return self.free.union(*(s for options in self.alternatives for s in options))

    def cliques(self, limit: int | None = None) -> tuple[frozenset[int], ...]:
        """List the maximum cliques themselves, at most ``limit`` of them."""
        combos = itertools.islice(itertools.product(*self.alternatives), limit)
        return tuple(self.free.union(*combo) for combo in combos)


def maximum_cliques(conflicts: nx.Graph) -> MaximumCliques:
    """Maximum cliques of the agreement graph, found from its complement.

    A worker that conflicts with nobody is joined to everyone, so it is in every maximum
    clique. The rest splits into connected components of the conflict graph, and a set
    of workers is a clique of the agreement graph iff it has no conflict inside, that is
    iff its part in each component is an independent set of that component. Hence the
    maximum cliques are exactly the products of the maximum independent sets of the
    components: each component is solved on its own and nothing is enumerated for the
    whole graph. The clique is unique iff every component's maximum is.

    Parameters
    ----------
    conflicts : networkx.Graph
        `conflict_graph` over every worker that replied (isolated nodes included).
    """
    free = frozenset(v for v in conflicts.nodes if conflicts.degree(v) == 0)
    alternatives = []
    for component in sorted(nx.connected_components(conflicts), key=min):
        if len(component) > 1:
            adjacency = {v: frozenset(conflicts.adj[v]) for v in component}
            options = _maximum_independent_sets(adjacency)
            alternatives.append(tuple(sorted(options, key=sorted)))
    return MaximumCliques(free=free, alternatives=tuple(alternatives))


def _maximum_independent_sets(adj: Mapping[int, frozenset[int]]) -> list[frozenset[int]]:
    """Every maximum independent set of a graph given as adjacency sets.

    Branch and bound on "vertex in / vertex out" (which partitions the sets, so none is
    found twice), with two rules that keep it cheap on the sparse conflict graphs of
    detection: a candidate with no neighbour among the candidates joins at once (every
    maximum extension contains it), and a branch is cut when ``|chosen|`` plus an upper
    bound on what the candidates can add falls below the best size known. The search
    starts from a greedy solution, so only ties and improvements are explored. Unlike
    listing all maximal cliques of the complement (exponentially many on large sparse
    components), it only visits branches that can still reach the maximum.
    """
    best = len(_greedy_independent_set(adj))
    found: list[frozenset[int]] = []
    stack: list[tuple[frozenset[int], frozenset[int]]] = [(frozenset(), frozenset(adj))]
    while stack:
        chosen, candidates = stack.pop()
        isolated = frozenset(v for v in candidates if not adj[v] & candidates)
        chosen, candidates = chosen | isolated, candidates - isolated
        if len(chosen) + _independence_bound(adj, candidates) < best:
            continue
        if not candidates:
            if len(chosen) > best:
                best, found = len(chosen), []
            found.append(chosen)
            continue
        v = max(candidates, key=lambda u: (len(adj[u] & candidates), u))
        stack.append((chosen, candidates - {v}))
        stack.append((chosen | {v}, candidates - adj[v] - {v}))
    return found


def _greedy_independent_set(adj: Mapping[int, frozenset[int]]) -> frozenset[int]:
    """Independent set built by repeatedly taking a vertex of least remaining degree."""
    remaining = set(adj)
    chosen: set[int] = set()
    while remaining:
        v = min(remaining, key=lambda u: (len(adj[u] & remaining), u))
        chosen.add(v)
        remaining -= adj[v] | {v}
    return frozenset(chosen)


def _independence_bound(adj: Mapping[int, frozenset[int]], candidates: frozenset[int]) -> int:
    """Upper bound on the independence number of the graph induced on ``candidates``.

    An independent set holds at most one end of each edge of a matching, so
    ``|candidates| - |matching|`` bounds it; the matching is greedy, low degree first.
    """
    matched: set[int] = set()
    order = sorted(candidates, key=lambda u: (len(adj[u] & candidates), u))
    for v in order:
        if v not in matched:
            partner = next((u for u in sorted(adj[v] & candidates) if u not in matched), None)
            if partner is not None:
                matched.update((v, partner))
    return len(candidates) - len(matched) // 2


# ---------------------------------------------------------------------------------------
# Outliers when r = 1


def outlier_scores(values: Tensor, f: int) -> Tensor:
    """Robust z-scores of a Krum-style distance score, for updates that have no replica.

    Each update's raw score is its mean L2 distance to its ``n - f - 2`` nearest other
    updates: Krum's neighbourhood (an update amid the honest crowd has close neighbours,
    one far from it has none), but plain rather than squared distances, whose right-skewed
    spread would push honest updates in the tail past a z-score threshold. Raw scores are
    then centred on their median and divided by ``1.4826 * MAD`` (the standard deviation,
    for normal data), so a score counts robust standard deviations beyond the typical
    update; a few extreme updates move neither the median nor the MAD.

    Parameters
    ----------
    values : Tensor
        Shape ``(n, d)``, one update per row.
    f : int
        Number of Byzantine updates to tolerate; needs ``n >= f + 3``. With colluding
        adversaries that send near-identical updates, pass at least their number, or
        they count one another as close neighbours.

    Returns
    -------
    Tensor
        Shape ``(n,)``, float64; large positive means far from the others.
    """
    n = values.shape[0]
    if values.ndim != 2:
        raise ValueError(f"outlier_scores needs a (n, d) tensor, got shape {tuple(values.shape)}")
    if f < 0 or n < f + 3:
        raise ValueError(f"outlier_scores needs 0 <= f and n >= f + 3, got n={n}, f={f}")
    v = values.to(torch.float64)
    distances = torch.cdist(v, v)
    distances.fill_diagonal_(math.inf)
    raw = distances.topk(n - f - 2, dim=1, largest=False).values.mean(dim=1)
    median = torch.quantile(raw, 0.5)
    deviation = (raw - median).abs()
    scale = _MAD_TO_SIGMA * float(torch.quantile(deviation, 0.5))
    if scale == 0.0:
        # More than half the scores coincide. Iglewicz and Hoaglin then scale by the mean
        # absolute deviation (1.2533 times it estimates sigma for normal data).
        scale = 1.2533 * float(deviation.mean())
    if scale == 0.0:
        return torch.zeros_like(raw)
    return (raw - median) / scale


# ---------------------------------------------------------------------------------------
# Evidence and verdict


@dataclass(frozen=True)
class ReplicaDistance:
    """Relative L2 distance between the replicas of workers ``a`` and ``b`` of one file."""

    a: int
    b: int
    distance: float
    agree: bool


@dataclass(frozen=True)
class FileDispute:
    """What happened to one file that a flagged worker replied for.

    Attributes
    ----------
    file : int
        File index.
    digests : dict of int to str
        Each replica's payload digest, by worker.
    distances : tuple of ReplicaDistance
        Every pair of replicas with its relative distance (empty when not computed).
    accepted_from : int or None
        Worker whose replica became the file's accepted value; ``None`` if dropped.
    """

    file: int
    digests: Mapping[int, str]
    distances: tuple[ReplicaDistance, ...]
    accepted_from: int | None

    def distance_from(self, worker: int) -> float | None:
        """Largest distance between ``worker``'s replica and one it disagreed with."""
        values = [d.distance for d in self.distances if worker in (d.a, d.b) and not d.agree]
        return max(values, default=None)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {
            "file": self.file,
            "replicas": [{"worker": w, "digest": d} for w, d in sorted(self.digests.items())],
            "distances": [
                {"a": d.a, "b": d.b, "distance": _json_float(d.distance), "agree": d.agree}
                for d in self.distances
            ],
            "accepted_from": self.accepted_from,
        }


@dataclass(frozen=True)
class Evidence:
    """Why one worker was flagged, for the record and for a person reviewing it.

    Attributes
    ----------
    worker : int
        The flagged worker.
    kind : str
        ``"outside_max_clique"`` (outside the unique maximum clique),
        ``"majority_minority"`` (maximum cliques tie, so the majority rule decides; the
        worker is in none of them),
        ``"outlier"`` (r = 1 distance score) or ``"low_degree"`` (Aspis+ window).
    severity : {"high", "low"}
        ``"high"`` rests on replicas that disagree; ``"low"`` on distance alone.
    clique : tuple of int
        The agreeing workers the flag is measured against: the unique maximum clique,
        or the union of the tied maximum cliques. Empty for outliers and low degree.
    disagreed_with : tuple of int
        Workers whose replicas disagreed with this worker's.
    files : tuple of FileDispute
        Per disputed file (or, for outliers, per outlying update): digests and distances.
    mode : str
        Comparison mode used.
    tol : float
        Relative tolerance used.
    num_max_cliques : int
        Number of maximum cliques (1 when unique; 0 when not applicable).
    score, threshold : float or None
        Outlier score and its threshold, or summed degree and its threshold.
    rounds : int or None
        Rounds the summed degree covers (``"low_degree"`` only).
    on_tie : {"drop_disputed", "majority"}
        How files were decided when maximum cliques tied (``"majority_minority"`` only).
    """

    worker: int
    kind: EvidenceKind
    severity: Severity
    clique: tuple[int, ...] = ()
    disagreed_with: tuple[int, ...] = ()
    files: tuple[FileDispute, ...] = ()
    mode: Mode = "auto"
    tol: float = DEFAULT_TOL
    num_max_cliques: int = 0
    score: float | None = None
    threshold: float | None = None
    rounds: int | None = None
    on_tie: TiePolicy = "drop_disputed"

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (lists, strings, numbers, ``None``), summary included."""
        return {
            "worker": self.worker,
            "kind": self.kind,
            "severity": self.severity,
            "clique": list(self.clique),
            "disagreed_with": list(self.disagreed_with),
            "files": [f.to_dict() for f in self.files],
            "mode": self.mode,
            "tolerance": self.tol,
            "num_max_cliques": self.num_max_cliques,
            "score": _json_float(self.score),
            "threshold": _json_float(self.threshold),
            "rounds": self.rounds,
            "on_tie": self.on_tie,
            "summary": self.summary(),
        }

    def summary(self) -> str:
        """One plain-English paragraph explaining the flag."""
        w = self.worker
        if self.kind == "outlier":
            files = _listing("file", "files", [d.file for d in self.files])
            return (
                f"Worker {w}'s update for {files} lies far from the other updates: its "
                f"outlier score is {_num(self.score)} robust standard deviations above the "
                f"typical update's, over the threshold {_num(self.threshold)}. Every file had "
                "a single replica, so no replicas could be compared; this flag rests on "
                "distance alone and is of low severity."
            )
        if self.kind == "low_degree":
            per_round = (self.threshold or 0.0) / max(self.rounds or 1, 1)
            rounds = f"{self.rounds} round{'' if self.rounds == 1 else 's'}"
            return (
                f"Worker {w} agreed with too few workers over the last {rounds}: its "
                f"degrees in the agreement graph sum to {_num(self.score)}, "
                f"below {_num(per_round)} per round, {_num(self.threshold)} in all. An honest "
                "worker agrees with every other honest worker, so its degree never falls "
                "below that bound (K - q - 1 per round when all K workers reply)."
            )
        disputes = self._disputes_sentence()
        clique = _listing("worker", "workers", self.clique)
        if self.kind == "outside_max_clique":
            return (
                f"{disputes}; the {len(self.clique)} {clique} agree with one another on every "
                f"shared file, so worker {w} is outside the unique largest group of mutually "
                "agreeing workers."
            )
        decided = (
            "each file's value came from the strict majority of its unflagged replicas"
            if self.on_tie == "majority"
            else "a file kept a value only where its unflagged replicas all agreed, and "
            "disputed files were left out"
        )
        return (
            f"{disputes}; {self.num_max_cliques} groups of mutually agreeing workers tie for "
            f"largest (together {clique}) and worker {w} belongs to none of them. As the "
            f"largest group is not unique, {decided}."
        )

    def _disputes_sentence(self) -> str:
        distances = [d.distance_from(self.worker) for d in self.files]
        shown = _distance_range([x for x in distances if x is not None])
        if self.mode == "exact":
            how = f"digests differ; relative distance {shown}"
        else:
            how = f"relative distance {shown}, tolerance {self.tol:g}"
        return (
            f"Worker {self.worker} disagreed with "
            f"{_listing('worker', 'workers', self.disagreed_with)} on "
            f"{_listing('file', 'files', [d.file for d in self.files])} ({how})"
        )


def _distance_range(distances: Sequence[float]) -> str:
    """``"1.98 and 2.01"`` for a few distances, ``"0.5 to 2"`` or ``"1.01 on each"`` for many."""
    words = [_num(x) for x in distances]
    if len(words) <= 3:
        return _join(words) or "n/a"
    low, high = _num(min(distances)), _num(max(distances))
    return f"{low} on each" if low == high else f"{low} to {high}"


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3g}"


def _json_float(x: float | None) -> float | None:
    """``x`` if finite, else ``None`` (JSON has no NaN or Infinity)."""
    return x if x is not None and math.isfinite(x) else None


@dataclass(frozen=True, eq=False)
class Verdict:
    """Outcome of detection for one round.

    Attributes
    ----------
    accepted : dict of int to Tensor
        Accepted value per file.
    accepted_from : dict of int to int
        Worker whose replica supplied each accepted value.
    accepted_digests : dict of int to str
        Digest of each accepted value (how `to_dict` refers to it).
    dropped : tuple of int
        Files of the assignment without an accepted value: no replica arrived, every
        replica came from a flagged worker, or (on a tie) the replicas left disagree.
    flagged : frozenset of int
        Workers judged adversarial this round.
    evidence : dict of int to Evidence
        One record per flagged worker.
    rule : str
        ``"unique_clique"``, ``"unanimity"`` or ``"majority"`` (maximum cliques tie; see
        `detect`'s ``on_tie``), ``"outlier"`` or ``"none"`` (nothing could be compared or
        scored).
    max_cliques : tuple of frozenset of int
        Maximum cliques of the agreement graph (at most `MAX_LISTED_CLIQUES`).
    num_max_cliques : int
        How many maximum cliques there are.
    degrees : dict of int to int
        Degree of each worker that replied in the agreement graph (input for
        `DegreeWindow` once mapped to stable worker ids).
    conflicts : dict of (int, int) to tuple of int
        The edges of the conflict graph: each pair of workers ``(a, b)``, ``a < b``,
        whose replicas disagreed, with the files they disagreed on.
    """

    accepted: dict[int, Tensor]
    accepted_from: dict[int, int]
    accepted_digests: dict[int, str]
    dropped: tuple[int, ...]
    flagged: frozenset[int]
    evidence: dict[int, Evidence]
    rule: Rule
    max_cliques: tuple[frozenset[int], ...]
    num_max_cliques: int
    degrees: dict[int, int]
    conflicts: dict[tuple[int, int], tuple[int, ...]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form; accepted values appear by digest, not by content."""
        return {
            "rule": self.rule,
            "flagged": sorted(self.flagged),
            "dropped": list(self.dropped),
            "accepted": [
                {"file": f, "worker": self.accepted_from[f], "digest": self.accepted_digests[f]}
                for f in sorted(self.accepted)
            ],
            "max_cliques": [sorted(c) for c in self.max_cliques],
            "num_max_cliques": self.num_max_cliques,
            "degrees": [{"worker": w, "degree": d} for w, d in sorted(self.degrees.items())],
            "evidence": [self.evidence[w].to_dict() for w in sorted(self.evidence)],
        }

    def explain(self, worker: int) -> str:
        """Plain-English reason why ``worker`` was or was not flagged."""
        if worker in self.evidence:
            return self.evidence[worker].summary()
        if worker not in self.degrees:
            return f"Worker {worker} sent no replica this round, so there is nothing to judge."
        reason = {
            "unique_clique": "it belongs to the unique largest group of mutually agreeing "
            f"workers ({len(self.max_cliques[0]) if self.max_cliques else 0} workers)",
            "majority": f"it belongs to at least one of the {self.num_max_cliques} tied largest "
            "groups of mutually agreeing workers",
            "unanimity": f"it belongs to at least one of the {self.num_max_cliques} tied largest "
            "groups of mutually agreeing workers",
            "outlier": "its update was not an outlier among the others",
            "none": "no replicas could be compared or scored this round",
        }[self.rule]
        return f"Worker {worker} was not flagged: {reason}."


# ---------------------------------------------------------------------------------------
# The entry point


def detect(
    assignment: Assignment,
    replicas: Sequence[Replica],
    *,
    mode: Mode = "auto",
    tol: float = DEFAULT_TOL,
    outlier_threshold: float | None = DEFAULT_OUTLIER_THRESHOLD,
    f: int = 0,
    on_tie: TiePolicy = "drop_disputed",
) -> Verdict:
    """Decide which workers lie and which value each file keeps.

    Rules, after comparing the replicas of each file (`compare_file`):

    * A unique maximum clique of the agreement graph: every worker that replied and is
      outside it is flagged; each file keeps the replica of its lowest-numbered worker
      inside the clique, and is dropped if no clique member replied for it.
    * Several maximum cliques (ties, as a strong attack can arrange): only workers
      outside the union of all maximum cliques are flagged. Any worker inside some
      maximum clique might be honest, since that clique might be the honest one, and
      flagging it would punish an honest worker on a coin toss. A worker in none of
      them cannot be honest as long as the honest workers form a largest agreeing group
      (the premise of Aspis): that group would then be one of the maximum cliques and
      contain it. Which value each file keeps follows ``on_tie``:

      - ``"drop_disputed"`` (default): a file keeps a value only when all its unflagged
        replicas agree, and is dropped otherwise. A tie means the round cannot tell
        the honest group from a colluding one (q colluders who disagree only with q
        chosen honest workers are, in the agreement graph, indistinguishable from
        those honest workers), so no disputed value is trusted: colluders can then
        only get a value through on a file whose replicas are all theirs.
      - ``"majority"`` (Aspis, ByzShield): a file keeps the value held by a strict
        majority of its unflagged replicas (flagged replicas do not vote), and is
        dropped without one. Two colluders sharing a file with one honest worker
        win it.
    * No file with two or more replicas (r = 1, or only stragglers left): updates are
      scored with `outlier_scores` and workers with a score above ``outlier_threshold``
      are flagged with severity ``"low"``; disabled with ``outlier_threshold=None`` or
      when fewer than ``f + 3`` replicas arrived.

    A file with a single replica is accepted when its worker is not flagged. Workers
    that sent nothing are neither in the graph nor flagged.

    Parameters
    ----------
    assignment : Assignment
        This round's assignment.
    replicas : sequence of Replica
        What arrived; missing replicas are allowed.
    mode : {"exact", "tolerance", "auto"}
        How replicas are compared (see `replicas_agree`).
    tol : float
        Relative L2 tolerance (see `DEFAULT_TOL`).
    outlier_threshold : float or None
        Robust z-score threshold for r = 1 outliers.
    f : int
        Byzantine workers tolerated by the r = 1 outlier score.
    on_tie : {"drop_disputed", "majority"}
        What a file keeps when maximum cliques tie (see above).

    Returns
    -------
    Verdict
    """
    _check_mode(mode, tol)
    if on_tie not in get_args(TiePolicy):
        raise ValueError(f"on_tie must be one of {get_args(TiePolicy)}, got {on_tie!r}")
    by_file = _group_by_file(assignment, replicas)
    replied = sorted({r.worker for r in replicas})
    if all(len(reps) == 1 for reps in by_file.values()):
        return _detect_single_replicas(assignment, by_file, replied, outlier_threshold, f)

    comparisons = {
        file: compare_file(file, reps, mode=mode, tol=tol) for file, reps in sorted(by_file.items())
    }
    conflicts = conflict_graph(replied, comparisons.values())
    cliques = maximum_cliques(conflicts)
    trusted = cliques.union
    flagged = frozenset(replied) - trusted
    if cliques.is_unique:
        rule: Rule = "unique_clique"
        chosen = {
            file: next((r for r in c.replicas if r.worker in trusted), None)
            for file, c in comparisons.items()
        }
    else:
        rule = "unanimity" if on_tie == "drop_disputed" else "majority"
        pick = _unanimous_replica if on_tie == "drop_disputed" else _majority_replica
        chosen = {file: pick(c, flagged) for file, c in comparisons.items()}
    accepted = {file: r for file, r in chosen.items() if r is not None}
    evidence = {
        w: _clique_evidence(
            w, conflicts, comparisons, accepted, trusted, rule, cliques.count, mode, tol
        )
        for w in sorted(flagged)
    }
    return _verdict(
        assignment,
        accepted,
        flagged,
        evidence,
        rule,
        cliques,
        degrees={w: len(replied) - 1 - conflicts.degree(w) for w in replied},
        conflicts=_conflict_files(comparisons.values()),
    )


def _conflict_files(
    comparisons: Iterable[FileComparison],
) -> dict[tuple[int, int], tuple[int, ...]]:
    """Each pair of workers that disagreed, with the files they disagreed on."""
    files: dict[tuple[int, int], list[int]] = {}
    for c in comparisons:
        for pair in c.conflicts():
            files.setdefault(pair, []).append(c.file)
    return {pair: tuple(fs) for pair, fs in sorted(files.items())}


def _majority_replica(comparison: FileComparison, flagged: frozenset[int]) -> Replica | None:
    """Replica agreeing with a strict majority of the unflagged replicas, if any."""
    voters = [i for i, r in enumerate(comparison.replicas) if r.worker not in flagged]
    if not voters:
        return None
    support = {i: sum(bool(comparison.agree[i, j]) for j in voters) for i in voters}
    best = max(voters, key=lambda i: (support[i], -i))
    return comparison.replicas[best] if 2 * support[best] > len(voters) else None


def _unanimous_replica(comparison: FileComparison, flagged: frozenset[int]) -> Replica | None:
    """Return the unflagged replicas' common value when they all agree, else ``None``."""
    voters = [i for i, r in enumerate(comparison.replicas) if r.worker not in flagged]
    if not voters or not all(bool(comparison.agree[voters[0], j]) for j in voters[1:]):
        return None
    return comparison.replicas[voters[0]]


def _clique_evidence(
    worker: int,
    conflicts: nx.Graph,
    comparisons: Mapping[int, FileComparison],
    accepted: Mapping[int, Replica],
    trusted: frozenset[int],
    rule: Rule,
    num_max_cliques: int,
    mode: Mode,
    tol: float,
) -> Evidence:
    disputes = []
    for file, c in comparisons.items():
        if worker in c.workers and any(worker in pair for pair in c.conflicts()):
            disputes.append(_file_dispute(c, accepted.get(file)))
    return Evidence(
        worker=worker,
        kind="outside_max_clique" if rule == "unique_clique" else "majority_minority",
        severity="high",
        clique=tuple(sorted(trusted)),
        disagreed_with=tuple(sorted(conflicts.adj[worker])),
        files=tuple(disputes),
        mode=mode,
        tol=tol,
        num_max_cliques=num_max_cliques,
        on_tie="majority" if rule == "majority" else "drop_disputed",
    )


def _file_dispute(c: FileComparison, accepted: Replica | None) -> FileDispute:
    pairs = []
    if c.distances is not None:
        for i, j in itertools.combinations(range(len(c.replicas)), 2):
            pairs.append(
                ReplicaDistance(
                    a=c.replicas[i].worker,
                    b=c.replicas[j].worker,
                    distance=float(c.distances[i, j]),
                    agree=bool(c.agree[i, j]),
                )
            )
    return FileDispute(
        file=c.file,
        digests={r.worker: r.digest for r in c.replicas},
        distances=tuple(pairs),
        accepted_from=None if accepted is None else accepted.worker,
    )


def _detect_single_replicas(
    assignment: Assignment,
    by_file: Mapping[int, Sequence[Replica]],
    replied: Sequence[int],
    outlier_threshold: float | None,
    f: int,
) -> Verdict:
    """Detect when no file has two replicas: by outlier scores, or not at all."""
    reps = [rs[0] for _, rs in sorted(by_file.items())]
    cliques = maximum_cliques(conflict_graph(replied, ()))
    degrees = {w: len(replied) - 1 for w in replied}
    if outlier_threshold is None or len(reps) < f + 3:
        accepted = {r.file: r for r in reps}
        return _verdict(assignment, accepted, frozenset(), {}, "none", cliques, degrees)
    scores = outlier_scores(torch.stack([r.value for r in reps]), f)
    outlying: dict[int, list[tuple[Replica, float]]] = {}
    for r, score in zip(reps, scores.tolist(), strict=True):
        if score > outlier_threshold:
            outlying.setdefault(r.worker, []).append((r, score))
    evidence = {
        w: Evidence(
            worker=w,
            kind="outlier",
            severity="low",
            files=tuple(
                FileDispute(file=r.file, digests={w: r.digest}, distances=(), accepted_from=None)
                for r, _ in items
            ),
            score=max(score for _, score in items),
            threshold=outlier_threshold,
        )
        for w, items in sorted(outlying.items())
    }
    flagged = frozenset(outlying)
    accepted = {r.file: r for r in reps if r.worker not in flagged}
    return _verdict(assignment, accepted, flagged, evidence, "outlier", cliques, degrees)


def _verdict(
    assignment: Assignment,
    accepted: Mapping[int, Replica],
    flagged: frozenset[int],
    evidence: dict[int, Evidence],
    rule: Rule,
    cliques: MaximumCliques,
    degrees: dict[int, int],
    conflicts: dict[tuple[int, int], tuple[int, ...]] | None = None,
) -> Verdict:
    # With nobody replying there is no graph, hence no clique to report.
    listed = cliques.cliques(MAX_LISTED_CLIQUES) if degrees else ()
    count = cliques.count if degrees else 0
    return Verdict(
        accepted={f: r.value for f, r in sorted(accepted.items())},
        accepted_from={f: r.worker for f, r in sorted(accepted.items())},
        accepted_digests={f: r.digest for f, r in sorted(accepted.items())},
        dropped=tuple(f for f in range(assignment.num_files) if f not in accepted),
        flagged=flagged,
        evidence=evidence,
        rule=rule,
        max_cliques=listed,
        num_max_cliques=count,
        degrees=degrees,
        conflicts=conflicts or {},
    )


# ---------------------------------------------------------------------------------------
# Aspis+: degrees accumulated over a window of rounds


def low_degree_workers(history: Sequence[Mapping[int, int]], threshold: float) -> frozenset[int]:
    """Workers whose agreement-graph degree, summed over ``history``, is below the bound.

    An honest worker agrees with every other honest worker, so when all K workers reply
    its degree is at least ``K - q - 1`` in every round (Aspis+ uses that as the
    per-round ``threshold``). A worker is flagged when its summed degree is below
    ``threshold`` times the number of rounds in which it replied; rounds it missed
    count neither way, so a straggler is not flagged for staying silent.

    Parameters
    ----------
    history : sequence of mapping of int to int
        Per round, degree by stable worker id.
    threshold : float
        Per-round degree bound.
    """
    return frozenset(
        w for w, (total, rounds) in _degree_totals(history).items() if total < threshold * rounds
    )


def _degree_totals(history: Sequence[Mapping[int, int]]) -> dict[int, tuple[int, int]]:
    """Per worker: (summed degree, rounds observed)."""
    totals: dict[int, tuple[int, int]] = {}
    for degrees in history:
        for w, d in degrees.items():
            total, rounds = totals.get(w, (0, 0))
            totals[w] = (total + d, rounds + 1)
    return totals


class DegreeWindow:
    """The last ``window`` rounds of degrees, and the workers `low_degree_workers` flags.

    Degrees must be keyed by stable worker ids (map the round's relabelled indices back
    before calling `observe`), so that a worker's history survives relabelling.

    Parameters
    ----------
    window : int
        Rounds remembered.
    threshold : float
        Per-round degree bound, ``K - q - 1`` in Aspis+.
    """

    def __init__(self, window: int, threshold: float) -> None:
        if window < 1:
            raise ValueError(f"window must be at least one round, got {window}")
        self.window = window
        self.threshold = threshold
        self._history: deque[dict[int, int]] = deque(maxlen=window)

    def observe(self, degrees: Mapping[int, int]) -> frozenset[int]:
        """Add one round's degrees and return the workers now flagged."""
        self._history.append(dict(degrees))
        return self.flagged

    @property
    def flagged(self) -> frozenset[int]:
        """Workers whose degree over the window is below the bound."""
        return low_degree_workers(self._history, self.threshold)

    def evidence(self) -> dict[int, Evidence]:
        """One `Evidence` record per flagged worker."""
        totals = _degree_totals(self._history)
        return {
            w: Evidence(
                worker=w,
                kind="low_degree",
                severity="high",
                score=float(totals[w][0]),
                threshold=self.threshold * totals[w][1],
                rounds=totals[w][1],
            )
            for w in sorted(self.flagged)
        }
