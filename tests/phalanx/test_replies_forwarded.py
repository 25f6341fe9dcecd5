"""Red team: a Byzantine worker replays or forwards signed replies; only it is refused.

These attacks held; they stay as tests. They fail if the coordinator ever checks a reply
against the signer's key rather than the key of the worker the task went to (the forward
would pass), accepts a reply signed for an earlier round (the replay would pass), or
blames the worker whose reply was copied.
"""

from __future__ import annotations

import dataclasses

from phalanx.config import RunConfig
from phalanx.data import load_dataset
from phalanx.replies import Reply
from phalanx.reports import RoundReport
from phalanx.roster import simulated_roster
from phalanx.runs import execute_run
from phalanx_clients.inprocess import InProcessTransport, Tamper
from phalanx_clients.worker import Worker

RUN_ID = "redteam-replies"
VICTIM, THIEF = 1, 2


def config_of() -> RunConfig:
    return RunConfig.model_validate(
        {
            "name": "redteam",
            "seed": 5,
            "rounds": 3,
            "data": {"dataset": "digits", "model": "mlp", "samples_per_file": 16},
            "assignment": {"scheme": "bibd", "num_workers": 7, "r": 3, "relabel": False},
            "training": {"optimizer": "adam", "server_lr": 0.01},
        }
    )


class MemorySink:
    def __init__(self) -> None:
        self.reports: list[RoundReport] = []

    def round_finished(self, report: RoundReport, checkpoint: bytes) -> None:
        self.reports.append(report)


def run(config: RunConfig, tamper: Tamper) -> list[RoundReport]:
    train = load_dataset(config.data.dataset, "train")
    workers = {
        i.worker: Worker(
            config=config, train_set=train, client_id=i.client_id, private_key=i.private_key
        )
        for i in simulated_roster(RUN_ID, config.assignment.num_workers)
    }
    sink = MemorySink()
    execute_run(
        config, run_id=RUN_ID, sink=sink, transport=InProcessTransport(workers, tamper=tamper)
    )
    return sink.reports


def test_a_worker_that_forwards_another_workers_signed_reply_is_refused_alone() -> None:
    seen: dict[int, Reply] = {}

    def forward(reply: Reply) -> Reply:
        seen[reply.worker] = reply
        if reply.worker == THIEF:  # the victim replied first: send its reply as ours
            return dataclasses.replace(seen[VICTIM], worker=THIEF)
        return reply

    reports = run(config_of(), forward)
    assert [r.round for r in reports] == [1, 2, 3]
    for report in reports:
        assert report.rejected == (THIEF,)
        assert report.flagged == ()
        (event,) = report.events
        assert (event.worker, event.kind, event.severity) == (THIEF, "malformed_reply", "high")


def test_a_reply_signed_for_an_earlier_round_is_refused_as_stale() -> None:
    earlier: dict[int, Reply] = {}

    def replay(reply: Reply) -> Reply:
        if reply.worker != THIEF:
            return reply
        previous = earlier.get(reply.round - 1)
        earlier[reply.round] = reply
        return previous if previous is not None else reply

    reports = run(config_of(), replay)
    assert reports[0].rejected == ()
    for report in reports[1:]:
        assert report.rejected == (THIEF,)
        (event,) = report.events
        assert (event.worker, event.kind) == (THIEF, "stale_round")
