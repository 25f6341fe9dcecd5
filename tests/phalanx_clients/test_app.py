"""The simulated workers' ClientApp builds a run's red team once, not once per message."""

from __future__ import annotations

from flwr.app import Context, RecordDict

from phalanx.config import RunConfig
from phalanx.replies import Task
from phalanx_clients.app import TEAMS_KEPT, SimulatedWorkers
from phalanx_clients.behaviour import RedTeam
from tests.support.configs import small_config


class CountingRedTeams:
    """A red-team factory that counts the teams it builds, per run name."""

    def __init__(self) -> None:
        self.built: list[str] = []

    def __call__(self, config: RunConfig) -> RedTeam | None:
        self.built.append(config.name)
        return RedTeam.from_config(config)


def context() -> Context:
    return Context(run_id=1, node_id=1, node_config={}, state=RecordDict(), run_config={})


def task(worker: int) -> Task:
    return Task("run", 1, "n", worker, (0,))


def test_a_run_s_red_team_is_built_on_its_first_message_only() -> None:
    teams = CountingRedTeams()
    source = SimulatedWorkers(red_team=teams)
    config = small_config()
    adversaries = RedTeam.from_config(config).adversaries  # type: ignore[union-attr]

    lying = [source(task(w), config, context()).behaviour is not None for w in range(7)]
    again = source(task(0), small_config(), context())  # the same config, parsed again

    assert teams.built == ["test"]
    assert {w for w, lies in enumerate(lying) if lies} == adversaries
    assert (again.behaviour is not None) == (0 in adversaries)


def test_the_teams_kept_are_bounded_and_a_changed_config_is_a_new_run() -> None:
    teams = CountingRedTeams()
    source = SimulatedWorkers(red_team=teams)
    names = [f"run-{i}" for i in range(TEAMS_KEPT + 1)]

    for name in names:
        source(task(0), small_config(name=name), context())
    source(task(0), small_config(name=names[-1]), context())  # kept
    source(task(0), small_config(name=names[0]), context())  # forgotten, built again

    assert teams.built == [*names, names[0]]
    assert len(source._teams) == TEAMS_KEPT
