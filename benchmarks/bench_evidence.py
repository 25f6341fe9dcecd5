"""Bytes of evidence per detection event, and of the round's record, at K = 50, 1,000, 5,000.

One round as issue 19 measured it: the ``random`` scheme, r = 3, one file per worker,
5 % of the workers reversing every update they send (``-1 x`` the honest value, one
colluding value per file), detection without the evidence across rounds (so every
liar is flagged ``outside_max_clique`` with evidence measured against the round's
largest agreeing group). *per event*: the mean size of an event's evidence as stored
(``json.dumps`` of ``Evidence.to_dict()``, the JSON the ``detection_events.evidence``
column holds); *record*: the round's agreement record as stored with the round
(``AgreementRecord.to_dict()``), which now lists the agreeing group once.

It imports only what both the code before issue 19 and after it have, so the *before*
figures come from running it against the earlier checkout:
``PYTHONPATH=OLD/platform python benchmarks/bench_evidence.py --label before``.
Writes (merging by label) ``benchmarks/results/evidence_size.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import torch

if not __package__:  # run as `python benchmarks/NAME.py`: import `benchmarks` from this checkout
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.lib.results import RESULTS, read_json, write_json, write_markdown
from phalanx.agreement_record import AgreementRecord
from phalanx.assignment import random_assignment
from phalanx.detection import Replica, detect

KS = (50, 1_000, 5_000)
DIM = 8


def round_sizes(k: int, seed: int = 2026) -> dict[str, Any]:
    """Evidence bytes per event and the record's bytes for one round of ``k`` workers."""
    assignment = random_assignment(k, 3, num_files=k, seed=seed)
    g = torch.Generator().manual_seed(seed)
    liars = set(torch.randperm(k, generator=g)[: max(1, k // 20)].tolist())
    honest = torch.randn(assignment.num_files, DIM, generator=g)
    replicas = []
    for f, workers in enumerate(assignment.files):
        for w in workers:
            value = -honest[f] if w in liars else honest[f]
            digest = hashlib.sha256(value.numpy().tobytes()).hexdigest()
            replicas.append(Replica(worker=w, file=f, value=value, digest=digest))
    verdict = detect(assignment, replicas)
    events = [json.dumps(e.to_dict()) for e in verdict.evidence.values()]
    sizes = [len(e.encode()) for e in events]
    record = json.dumps(AgreementRecord.from_verdict(verdict).to_dict())
    return {
        "K": k,
        "flagged": len(verdict.flagged),
        "liars": len(liars),
        "events": len(events),
        "bytes_per_event_mean": statistics.mean(sizes) if sizes else 0,
        "bytes_per_event_max": max(sizes, default=0),
        "record_bytes": len(record.encode()),
        "round_bytes": sum(sizes) + len(record.encode()),
    }


def markdown(results: dict[str, list[dict[str, Any]]]) -> str:
    """One table per label."""
    lines = [
        "# Evidence per detection event and the round's record, by K",
        "",
        "One round: `random` scheme, r = 3, K files, 5 % of the workers reversing every "
        "update, detection without the evidence across rounds (every liar flagged "
        "`outside_max_clique`). Bytes of the stored JSON. *before*: each event lists the "
        "round's agreeing group in full (`clique`); *after*: it holds the group's count "
        "and digest, and the round's record lists the members once (`agreeing`).",
        "",
        "| label | K | events | bytes per event (mean) | max | round record, bytes "
        "| events + record per round, bytes |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, rows in results.items():
        for r in rows:
            lines.append(
                f"| {label} | {r['K']:,} | {r['events']} | {r['bytes_per_event_mean']:,.0f} "
                f"| {r['bytes_per_event_max']:,} | {r['record_bytes']:,} | "
                f"{r['round_bytes']:,} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="after", help="name of these figures")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    rows = []
    for k in KS:
        rows.append(round_sizes(k))
        print(args.label, rows[-1], flush=True)
    path = args.out / "evidence_size.json"
    results: dict[str, list[dict[str, Any]]] = read_json(path) if path.exists() else {}
    results[args.label] = rows
    write_json(path, results)
    write_markdown(args.out / "evidence_size.md", markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
