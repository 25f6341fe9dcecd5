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


def test_runs_of_other_configs_never_share_a_red_team_s_kept_references() -> None:
    # Red team: the references an update attack sees are kept by round and model digest
    # alone; two runs (another seed: other samples) starting from the same model at the
    # same round must not read each other's. Each config has a team, and so a cache,
    # of its own; a run resumed with another model finds its digest changed.
    workers = SimulatedWorkers()
    first, second = small_config(seed=1), small_config(seed=2)
    team = workers.team_of(first)
    assert team is not None and workers.team_of(second) is not team
    assert workers.team_of(small_config(seed=1)) is team
