"""Red team: a round whose largest agreeing group was unique says no tie on the run page.

With ``detection.across_rounds`` on (the default), the worker two colluders outvote is a
suspect of a round with a *unique* largest group, and the file it disputed is dropped.
The run page must not tell the reader that groups tied: they did not.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch

from phalanx.agreement_record import AgreementRecord
from phalanx.assignment import make_assignment
from phalanx.detection import Replica, detect, payload_digest
from phalanx_api.pages.dropped import dropped_files
from phalanx_api.templating import TEMPLATES_DIR, make_templates


def outvoted_round() -> dict[str, object]:
    """STS(7): colluders 0 and 1 lie on their common file, where worker 3 holds the third."""
    assignment = make_assignment("bibd", 7, 3)
    replicas = []
    for f, workers in enumerate(assignment.files):
        honest = torch.randn(8, generator=torch.Generator().manual_seed(f))
        lied = {0, 1} <= set(workers)
        for w in workers:
            value = (-honest if lied and w < 2 else honest).to(torch.float32)
            replicas.append(Replica(w, f, value, payload_digest(value.numpy().tobytes())))
    verdict = detect(assignment, replicas, outsiders="suspect")
    assert verdict.num_max_cliques == 1 and verdict.suspects and verdict.dropped
    return AgreementRecord.from_verdict(verdict).to_dict()


def rendered(stored: dict[str, object]) -> str:
    dropped = dropped_files(1, stored)
    assert dropped is not None
    source = (TEMPLATES_DIR / "_run_panels.html").read_text()
    start = source.index("{% if page.dropped %}")
    section = source[start : source.index("</section>", start)] + "</section>{% endif %}"
    text = make_templates().env.from_string(section).render(page=SimpleNamespace(dropped=dropped))
    return " ".join(text.split())


def test_a_file_dropped_without_a_tie_is_not_said_to_be_dropped_for_a_tie() -> None:
    text = rendered(outvoted_round())
    assert "its replicas disagreed" in text
    assert "tie" not in text
    assert "Suspects of the round: worker 3" in text
