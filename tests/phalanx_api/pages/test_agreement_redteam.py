"""Red team: the agreement graph's notes under the default ``outsiders="suspect"``.

With ``detection.across_rounds`` on, a round flags only what the disputes across rounds
prove: workers outside the largest group, tied or not, are suspects. The notes must not
say such a worker was flagged, and must say why a worker that disagreed was not.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from phalanx.agreement_record import AgreementRecord
from phalanx.assignment import Assignment, bibd_assignment
from phalanx.detection import Verdict, detect
from phalanx_api.pages.agreement import agreement_graph
from tests.support.replicas import honest_value, replica


def draw(verdict: Verdict, workers: int, r: int) -> Any:
    stored = json.loads(json.dumps(AgreementRecord.from_verdict(verdict).to_dict()))
    return agreement_graph(3, stored, num_workers=workers, replication=r, events=[])


def test_a_worker_outside_a_unique_group_is_named_as_a_suspect_not_left_unexplained() -> None:
    # STS(7): colluders 0 and 1 lie on their common file, outvoting its third holder.
    assignment = bibd_assignment(7)
    (shared,) = [f for f, ws in enumerate(assignment.files) if {0, 1} <= set(ws)]
    (victim,) = set(assignment.files[shared]) - {0, 1}
    replicas = [
        replica(w, f, -honest_value(f) if f == shared and w < 2 else honest_value(f))
        for f, ws in enumerate(assignment.files)
        for w in ws
    ]
    verdict = detect(assignment, replicas, outsiders="suspect")
    assert verdict.num_max_cliques == 1 and verdict.suspects == {victim} and not verdict.flagged
    notes = " ".join(draw(verdict, 7, 3).notes)
    assert f"Worker {victim}" in notes and "not flagged" in notes


def test_a_tie_without_flags_does_not_say_outsiders_are_flagged() -> None:
    # Files are the pairs of 7 workers; 0 and 1 lie only to 2 and 3, 6 lies to everyone:
    # {0, 1, 4, 5} and {2, 3, 4, 5} tie, and 6, outside both, is only a suspect.
    assignment = Assignment(num_workers=7, files=tuple(itertools.combinations(range(7), 2)))
    replicas = []
    for f, (a, b) in enumerate(assignment.files):
        for w, other in ((a, b), (b, a)):
            lies = w == 6 or (w in (0, 1) and other in (2, 3))
            replicas.append(replica(w, f, -honest_value(f) + w if lies else honest_value(f)))
    verdict = detect(assignment, replicas, outsiders="suspect")
    assert verdict.num_max_cliques == 2 and not verdict.flagged and 6 in verdict.suspects
    notes = " ".join(draw(verdict, 7, 2).notes)
    assert "tied for largest" in notes
    assert "outside every tied group are flagged" not in notes
