"""The verdict of a round: which workers are flagged and which value each file keeps."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import networkx as nx
import torch
from torch import Tensor

from phalanx.agreeing_group import AgreeingGroup
from phalanx.assignment import Assignment
from phalanx.detection.cliques import MaximumCliques, maximum_cliques
from phalanx.detection.comparison import (
    DEFAULT_TOL,
    FileComparison,
    Mode,
    Replica,
    RoundComparison,
    compare_round,
)
from phalanx.detection.evidence import Evidence, FileDispute, ReplicaDistance
from phalanx.detection.graph import conflict_graph
from phalanx.detection.outliers import (
    DEFAULT_OUTLIER_RATIO,
    DEFAULT_OUTLIER_THRESHOLD,
    check_screening,
    outlier_measures,
)
from phalanx.detection.ties import TiePolicy, majority_replica, unanimous_replica

Rule = Literal["unique_clique", "majority", "unanimity", "outlier", "none"]
Outsiders = Literal["flag", "suspect"]
DropReason = Literal["no_replica", "untrusted", "disputed", "suspects_only"]
"""Why a file kept no value: nothing arrived; every replica came from a flagged or
distrusted worker; its trusted replicas disagreed (maximum cliques tie); or every
replica left came from a suspect of a tie (possibly a colluder's file)."""


@dataclass(frozen=True)
class DroppedFile:
    """A file of the round that kept no value, and why.

    Attributes
    ----------
    reason : DropReason
        Why it kept none.
    holders : tuple of int
        The workers it was assigned to.
    digests : dict of int to str
        The digest of each replica that arrived, by worker.
    """

    reason: DropReason
    holders: tuple[int, ...]
    digests: Mapping[int, str]


MAX_LISTED_CLIQUES = 64
"""`Verdict.max_cliques` lists at most this many maximum cliques (their number is a
product over conflict components and can be exponential); `Verdict.num_max_cliques`
always holds the true count."""


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
        How many maximum cliques there are (at least, when one conflict component has
        more than `~phalanx.detection.cliques.MAX_LISTED_PER_COMPONENT` choices).
    degrees : dict of int to int
        Degree of each worker that replied in the agreement graph (input for
        `DegreeWindow` once mapped to stable worker ids).
    conflicts : dict of (int, int) to tuple of int
        The edges of the conflict graph: each pair of workers ``(a, b)``, ``a < b``,
        whose replicas disagreed, with the files they disagreed on.
    suspects : frozenset of int
        Workers outside some maximum clique but not flagged: inside another when they
        tie, or, when outsiders are not flagged (`judge`'s ``outsiders="suspect"``),
        every unproven worker outside the largest group.
    drops : dict of int to DroppedFile
        Each file of `dropped`: why it has no accepted value, its holders, its replicas.
    supporters : dict of int to tuple of int
        Each accepted file's *supporters*: the workers, neither flagged nor distrusted,
        whose replicas agree with its value. The value is a lie only if they all lie.
    agreeing : frozenset of int
        The round's agreeing group, against which flags from comparing replicas are
        measured: the union of the maximum cliques among workers not distrusted (empty
        when nothing was compared). Listed once with the round; each flag's evidence
        holds only its count and digest (`AgreeingGroup`).
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
    suspects: frozenset[int] = frozenset()
    drops: dict[int, DroppedFile] = field(default_factory=dict)
    supporters: dict[int, tuple[int, ...]] = field(default_factory=dict)
    agreeing: frozenset[int] = frozenset()

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
        if worker in self.suspects:
            where = (
                "the unique largest group of mutually agreeing workers"
                if self.rule == "unique_clique"
                else f"at least one of the {self.num_max_cliques} tied largest groups of "
                "mutually agreeing workers"
            )
            return (
                f"Worker {worker} was not flagged: it is outside {where}, which alone proves "
                "nothing (colluders can outvote or tie an honest worker); the files it "
                "disputed were left out."
            )
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


def detect(
    assignment: Assignment,
    replicas: Sequence[Replica],
    *,
    mode: Mode = "auto",
    tol: float = DEFAULT_TOL,
    outlier_threshold: float | None = DEFAULT_OUTLIER_THRESHOLD,
    outlier_ratio: float = DEFAULT_OUTLIER_RATIO,
    f: int = 0,
    on_tie: TiePolicy = "drop_disputed",
    distrusted: frozenset[int] = frozenset(),
    outsiders: Outsiders = "flag",
) -> Verdict:
    """Decide which workers lie and which value each file keeps.

    `compare_round` followed by `judge`; the parameters are theirs.

    Returns
    -------
    Verdict
    """
    return judge(
        compare_round(assignment, replicas, mode=mode, tol=tol),
        outlier_threshold=outlier_threshold,
        outlier_ratio=outlier_ratio,
        f=f,
        on_tie=on_tie,
        distrusted=distrusted,
        outsiders=outsiders,
    )


def judge(
    compared: RoundComparison,
    *,
    outlier_threshold: float | None = DEFAULT_OUTLIER_THRESHOLD,
    outlier_ratio: float = DEFAULT_OUTLIER_RATIO,
    f: int = 0,
    on_tie: TiePolicy = "drop_disputed",
    distrusted: frozenset[int] = frozenset(),
    outsiders: Outsiders = "flag",
    reference: Mapping[int, Tensor] | None = None,
    strata: Mapping[int, int] | None = None,
) -> Verdict:
    """Decide, from a compared round, which workers lie and which value each file keeps.

    Rules, on the agreement graph of the workers that replied (`RoundComparison`):

    * A unique maximum clique: with ``outsiders="flag"`` (Aspis), every worker that
      replied and is outside it is flagged, and each file keeps the replica of its
      lowest-numbered worker inside the clique (dropped if no clique member replied for
      it). That rests on a premise no round can check, that the honest workers form the
      largest agreeing group: two colluders who outvote the honest third holder of
      their file make everyone but that honest worker the unique largest group. With
      ``outsiders="suspect"`` the outsiders become *suspects* instead (flags then come
      from proofs, :mod:`phalanx.detection.disputes`, passed in as ``distrusted``), and a
      file keeps a value only when all its replicas that may vote agree, as in a tie.
    * Several maximum cliques (ties, as a strong attack can arrange): workers inside
      some maximum clique but outside another are suspects, never flagged: the honest
      group might be any of them. Workers outside all of them are flagged with
      ``outsiders="flag"`` and suspects with ``"suspect"``. Which value each file keeps
      follows ``on_tie``:

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
    * A file whose replicas that may vote all come from suspects keeps no value: it may
      be a colluders' file that nobody honest checked.
    * No file with two or more replicas (r = 1, or only stragglers left): updates are
      scored with `outlier_measures` and workers with a score above ``outlier_threshold``
      whose distance to the median update is also more than ``outlier_ratio`` times the
      median distance are flagged with severity ``"low"`` (the z-score alone is noise
      among few updates, or when clients' data differ); disabled with
      ``outlier_threshold=None`` or when fewer than ``f + 3`` replicas arrived.
      With ``strata`` the updates are scored within their stratum only (an
      asynchronous buffer's updates by the model version they were computed on: honest
      updates of different versions differ, as honest clients' data do), each
      stratum screened when it has ``f + 3`` updates with its crowd. ``reference``
      updates of a stratum, when given, join its crowd without being judged
      themselves (a small stratum is scored among recent accepted updates of its
      version: a robust z-score over four values is mostly noise).

    A file with a single replica is accepted when its worker is neither flagged,
    distrusted nor a suspect, with the weight of any other file: its replica is
    unverified, which only per-round relabelling and the evidence across rounds keep in
    check. Workers that sent nothing are neither in the graph nor flagged. Distrusted
    workers (proven liars) are compared and drawn like any other, but never supply or
    vote for a file's value and take no part in the search for the largest agreeing
    group (so they can neither push an honest worker out of it nor make groups tie);
    one that disagreed with anybody in the round is flagged.

    Parameters
    ----------
    compared : RoundComparison
        The round's replicas, compared (`compare_round`).
    outlier_threshold : float or None
        Robust z-score threshold for r = 1 outliers.
    outlier_ratio : float
        How many times the median distance an r = 1 outlier must also lie, at least 1.
    f : int
        Byzantine workers tolerated by the r = 1 outlier score.
    on_tie : {"drop_disputed", "majority"}
        What a file keeps when maximum cliques tie (see above).
    distrusted : frozenset of int
        Workers whose replicas never become or choose a file's value.
    outsiders : {"flag", "suspect"}
        What becomes of the workers outside the largest agreeing group (see above).
    reference : dict of int to Tensor, optional
        Stratum -> shape ``(m, d)``: updates scored alongside its single replicas,
        never judged.
    strata : dict of int to int, optional
        File -> stratum of its single replica; every file in stratum 0 when not given.

    Returns
    -------
    Verdict
    """
    if on_tie not in get_args(TiePolicy):
        raise ValueError(f"on_tie must be one of {get_args(TiePolicy)}, got {on_tie!r}")
    if outsiders not in get_args(Outsiders):
        raise ValueError(f"outsiders must be one of {get_args(Outsiders)}, got {outsiders!r}")
    check_screening(outlier_threshold, outlier_ratio)
    assignment, replied, comparisons = compared.assignment, compared.replied, compared.comparisons
    if not comparisons:
        return _detect_single_replicas(
            assignment,
            compared.by_file,
            replied,
            _Screening(outlier_threshold, outlier_ratio, f),
            distrusted,
            reference or {},
            strata or {},
        )
    conflicts = conflict_graph(replied, comparisons.values())
    # A proven liar cannot belong to the honest group, so it takes no part in the search
    # for it: otherwise two of them disputing one honest worker would leave that worker
    # outside a unique largest group and flag it.
    judged = frozenset(w for w in replied if w not in distrusted)
    cliques = maximum_cliques(conflicts.subgraph(judged))
    trusted = cliques.union
    relapsed = frozenset(w for w in replied if w in distrusted and conflicts.degree(w))
    if outsiders == "flag":
        flagged = (judged - trusted) | relapsed
        suspects = trusted - cliques.core
    else:
        flagged = relapsed
        suspects = judged - cliques.core
    untrusted = flagged | distrusted
    rule: Rule
    if cliques.is_unique and outsiders == "flag":
        rule = "unique_clique"
        chosen = {
            file: next(
                (r for r in c.replicas if r.worker in trusted and r.worker not in untrusted), None
            )
            for file, c in comparisons.items()
        }
    else:
        if cliques.is_unique:
            rule = "unique_clique"
        else:
            rule = "unanimity" if on_tie == "drop_disputed" else "majority"
        pick = majority_replica if rule == "majority" else unanimous_replica
        chosen = {
            file: None if _suspects_only(c, untrusted, suspects) else pick(c, untrusted)
            for file, c in comparisons.items()
        }
    accepted = {file: r for file, r in chosen.items() if r is not None}
    group = AgreeingGroup.of(trusted)
    disputed = _disputed_files(comparisons, flagged)
    evidence = {
        w: _clique_evidence(
            w,
            conflicts,
            [comparisons[f] for f in disputed.get(w, ())],
            accepted,
            group,
            rule,
            cliques.count,
            compared.mode,
            compared.tol,
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
        conflicts=compared.conflicts(),
        suspects=suspects,
        drops=_drop_reasons(assignment, comparisons, accepted, untrusted, suspects),
        supporters={
            file: _supporters(comparisons[file], r, untrusted) for file, r in accepted.items()
        },
        agreeing=trusted,
    )


def _supporters(c: FileComparison, accepted: Replica, untrusted: frozenset[int]) -> tuple[int, ...]:
    """Return the workers that may vote and whose replicas agree with the accepted one."""
    i = c.replicas.index(accepted)
    return tuple(
        r.worker for j, r in enumerate(c.replicas) if r.worker not in untrusted and c.agree[i, j]
    )


def _suspects_only(c: FileComparison, untrusted: frozenset[int], suspects: frozenset[int]) -> bool:
    """Whether every replica of the file that may vote comes from a suspect of a tie."""
    voters = [r.worker for r in c.replicas if r.worker not in untrusted]
    return bool(voters) and all(w in suspects for w in voters)


def _voters_agree(c: FileComparison, untrusted: frozenset[int]) -> bool:
    """Whether the replicas of the file that may vote all agree."""
    voters = [i for i, r in enumerate(c.replicas) if r.worker not in untrusted]
    return all(bool(c.agree[voters[0], j]) for j in voters[1:])


def _drop_reasons(
    assignment: Assignment,
    comparisons: Mapping[int, FileComparison],
    accepted: Mapping[int, Replica],
    untrusted: frozenset[int],
    suspects: frozenset[int],
) -> dict[int, DroppedFile]:
    """Each file without an accepted value, and why it kept none."""
    drops: dict[int, DroppedFile] = {}
    for file in range(assignment.num_files):
        if file in accepted:
            continue
        c = comparisons.get(file)
        reason: DropReason
        if c is None or not c.replicas:
            reason = "no_replica"
        elif all(r.worker in untrusted for r in c.replicas):
            reason = "untrusted"
        elif _suspects_only(c, untrusted, suspects) and _voters_agree(c, untrusted):
            reason = "suspects_only"
        else:
            reason = "disputed"
        replicas = c.replicas if c is not None else ()
        drops[file] = DroppedFile(
            reason=reason,
            holders=tuple(assignment.workers_of(file)),
            digests={r.worker: r.digest for r in replicas},
        )
    return drops


def _disputed_files(
    comparisons: Mapping[int, FileComparison], workers: Iterable[int]
) -> dict[int, list[int]]:
    """Each of ``workers``' files where its replica disagreed with another, in file order.

    One pass over the round's comparisons for all of them (a pass per flagged worker
    would cost the files times the flags, quadratic in K).
    """
    wanted = set(workers)
    out: dict[int, list[int]] = {}
    for file, c in comparisons.items():
        for a, b in c.conflicts():
            for w in (a, b):
                if w in wanted and (not out.get(w) or out[w][-1] != file):
                    out.setdefault(w, []).append(file)
    return out


def _clique_evidence(
    worker: int,
    conflicts: nx.Graph,
    disputed: Sequence[FileComparison],
    accepted: Mapping[int, Replica],
    agreeing: AgreeingGroup,
    rule: Rule,
    num_max_cliques: int,
    mode: Mode,
    tol: float,
) -> Evidence:
    disputes = [_file_dispute(c, accepted.get(c.file)) for c in disputed]
    return Evidence(
        worker=worker,
        kind="outside_max_clique" if rule == "unique_clique" else "majority_minority",
        severity="high",
        agreeing=agreeing,
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


@dataclass(frozen=True)
class _Screening:
    """How single replicas are screened: z-score threshold (``None``: not), ratio, f."""

    threshold: float | None
    ratio: float
    f: int


def _detect_single_replicas(
    assignment: Assignment,
    by_file: Mapping[int, Sequence[Replica]],
    replied: Sequence[int],
    screening: _Screening,
    distrusted: frozenset[int],
    reference: Mapping[int, Tensor],
    strata: Mapping[int, int],
) -> Verdict:
    """Detect when no file has two replicas: by outlier scores within strata, or not at all."""
    reps = [rs[0] for _, rs in sorted(by_file.items())]
    cliques = maximum_cliques(conflict_graph(replied, ()))
    degrees = {w: len(replied) - 1 for w in replied}
    scored = (
        _stratum_scores(reps, screening, reference, strata)
        if screening.threshold is not None
        else {}
    )
    if not scored:
        accepted = {r.file: r for r in reps if r.worker not in distrusted}
        drops = _single_drops(assignment, accepted, by_file)
        return _verdict(
            assignment, accepted, frozenset(), {}, "none", cliques, degrees, drops=drops
        )
    outlying: dict[int, list[tuple[Replica, float, float]]] = {}
    for r in reps:
        out, score, ratio = scored.get(r.file, (False, 0.0, 0.0))
        if out:
            outlying.setdefault(r.worker, []).append((r, score, ratio))
    evidence = {
        w: Evidence(
            worker=w,
            kind="outlier",
            severity="low",
            files=tuple(
                FileDispute(file=r.file, digests={w: r.digest}, distances=(), accepted_from=None)
                for r, _, _ in items
            ),
            score=max(score for _, score, _ in items),
            threshold=screening.threshold,
            distance_ratio=max(ratio for _, _, ratio in items),
            ratio_threshold=screening.ratio,
        )
        for w, items in sorted(outlying.items())
    }
    flagged = frozenset(outlying)
    accepted = {r.file: r for r in reps if r.worker not in flagged | distrusted}
    drops = _single_drops(assignment, accepted, by_file)
    return _verdict(
        assignment, accepted, flagged, evidence, "outlier", cliques, degrees, drops=drops
    )


def _stratum_scores(
    reps: Sequence[Replica],
    screening: _Screening,
    reference: Mapping[int, Tensor],
    strata: Mapping[int, int],
) -> dict[int, tuple[bool, float, float]]:
    """Score each replica among its stratum and the stratum's reference updates.

    Returns file -> (outlying, robust z-score, distance ratio) for the replicas of
    every stratum with ``f + 3`` updates in its crowd; the others are not scored.
    """
    assert screening.threshold is not None
    members: dict[int, list[Replica]] = {}
    for r in reps:
        members.setdefault(strata.get(r.file, 0), []).append(r)
    scored: dict[int, tuple[bool, float, float]] = {}
    for stratum, mine in members.items():
        crowd = reference.get(stratum)
        extra = 0 if crowd is None else int(crowd.shape[0])
        if len(mine) + extra < screening.f + 3:
            continue
        values = torch.stack([r.value for r in mine])
        if crowd is not None and extra:
            values = torch.cat([values, crowd.to(values.dtype)])
        measures = outlier_measures(values, screening.f)
        n = len(mine)
        outside = measures.outlying(screening.threshold, screening.ratio)[:n].tolist()
        scores, ratios = measures.z[:n].tolist(), measures.ratio[:n].tolist()
        for r, out, score, ratio in zip(mine, outside, scores, ratios, strict=True):
            scored[r.file] = (bool(out), float(score), float(ratio))
    return scored


def _verdict(
    assignment: Assignment,
    accepted: Mapping[int, Replica],
    flagged: frozenset[int],
    evidence: dict[int, Evidence],
    rule: Rule,
    cliques: MaximumCliques,
    degrees: dict[int, int],
    conflicts: dict[tuple[int, int], tuple[int, ...]] | None = None,
    suspects: frozenset[int] = frozenset(),
    drops: dict[int, DroppedFile] | None = None,
    supporters: dict[int, tuple[int, ...]] | None = None,
    agreeing: frozenset[int] = frozenset(),
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
        suspects=suspects,
        drops=drops if drops is not None else _single_drops(assignment, accepted, by_file={}),
        supporters=(
            supporters
            if supporters is not None
            else {f: (r.worker,) for f, r in sorted(accepted.items())}
        ),
        agreeing=agreeing,
    )


def _single_drops(
    assignment: Assignment,
    accepted: Mapping[int, Replica],
    by_file: Mapping[int, Sequence[Replica]],
) -> dict[int, DroppedFile]:
    """List the dropped files when none has two replicas: none arrived, or untrusted."""
    return {
        f: DroppedFile(
            reason="untrusted" if by_file.get(f) else "no_replica",
            holders=tuple(assignment.workers_of(f)),
            digests={r.worker: r.digest for r in by_file.get(f, ())},
        )
        for f in range(assignment.num_files)
        if f not in accepted
    }
