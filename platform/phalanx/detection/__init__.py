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

One concept per module:

* :mod:`~phalanx.detection.comparison`: replicas, their digests and relative distances,
  and which pairs of a file agree (`compare_file`, `replicas_agree`);
* :mod:`~phalanx.detection.graph`: the conflict graph and the agreement graph;
* :mod:`~phalanx.detection.cliques`: the maximum cliques of the agreement graph;
* :mod:`~phalanx.detection.outliers`: the r = 1 outlier score;
* :mod:`~phalanx.detection.ties`: what a file keeps when maximum cliques tie;
* :mod:`~phalanx.detection.evidence`: `Evidence`, `FileDispute` and their English;
* :mod:`~phalanx.detection.verdict`: `judge`, `detect` and their `Verdict`;
* :mod:`~phalanx.detection.disputes`: the disputes across rounds and the liars they prove;
* :mod:`~phalanx.detection.exposure`: how many accepted files unproven liars could have
  supplied, the ``f`` of the robust rule after detection;
* :mod:`~phalanx.detection.degrees`: Aspis+'s `DegreeWindow`.
"""

from phalanx.detection.cliques import MaximumCliques, maximum_cliques
from phalanx.detection.comparison import (
    DEFAULT_TOL,
    FileComparison,
    Mode,
    Replica,
    RoundComparison,
    compare_file,
    compare_replicas,
    compare_round,
    payload_digest,
    relative_distances,
    replicas_agree,
)
from phalanx.detection.degrees import DegreeWindow, low_degree_workers
from phalanx.detection.evidence import (
    Evidence,
    EvidenceKind,
    FileDispute,
    ReplicaDistance,
    Severity,
)
from phalanx.detection.graph import agreement_graph, conflict_graph
from phalanx.detection.outliers import (
    DEFAULT_OUTLIER_RATIO,
    DEFAULT_OUTLIER_THRESHOLD,
    LOCAL_OUTLIER_RATIO,
    OutlierMeasures,
    check_screening,
    outlier_measures,
    outlier_scores,
)
from phalanx.detection.ties import TiePolicy
from phalanx.detection.verdict import MAX_LISTED_CLIQUES, Outsiders, Rule, Verdict, detect, judge

__all__ = [
    "DEFAULT_OUTLIER_RATIO",
    "DEFAULT_OUTLIER_THRESHOLD",
    "DEFAULT_TOL",
    "LOCAL_OUTLIER_RATIO",
    "MAX_LISTED_CLIQUES",
    "DegreeWindow",
    "Evidence",
    "EvidenceKind",
    "FileComparison",
    "FileDispute",
    "MaximumCliques",
    "Mode",
    "OutlierMeasures",
    "Outsiders",
    "Replica",
    "ReplicaDistance",
    "RoundComparison",
    "Rule",
    "Severity",
    "TiePolicy",
    "Verdict",
    "agreement_graph",
    "check_screening",
    "compare_file",
    "compare_replicas",
    "compare_round",
    "conflict_graph",
    "detect",
    "judge",
    "low_degree_workers",
    "maximum_cliques",
    "outlier_measures",
    "outlier_scores",
    "payload_digest",
    "relative_distances",
    "replicas_agree",
]
