"""Red team: hostile ``collect`` settings through ``POST /api/v1/runs`` are a 422 naming them.

The straggler settings (``messages``, ``drop_compute``, ``compute_budget_s``,
``warmup_rounds``) and the policies' parameters, sent as booleans, strings, NaN,
infinities, huge numbers or containers, and in combinations a run cannot honour,
must each be refused with 422 and the field named, never a 500 and never queued.
These attacks held on the code as it was; they stay as tests.
"""

from __future__ import annotations

import json

import pytest

from tests.support.factories import TestClient, launch

SIMULATED = '"systems": {"enabled": true}'


HOSTILE_VALUES = [
    ("drop_compute", "1"),
    ("drop_compute", "0"),
    ("drop_compute", '"true"'),
    ("drop_compute", '"yes"'),
    ("drop_compute", "[true]"),
    ("drop_compute", "NaN"),
    ("messages", "1"),
    ("messages", "true"),
    ("messages", '"PER_FILE"'),
    ("messages", '["per_file"]'),
    ("messages", '{"per_file": true}'),
    ("compute_budget_s", "true"),
    ("compute_budget_s", "NaN"),
    ("compute_budget_s", "Infinity"),
    ("compute_budget_s", "-Infinity"),
    ("compute_budget_s", "1e400"),
    ("compute_budget_s", '"NaN"'),
    ("compute_budget_s", "1e300"),
    ("compute_budget_s", "-1"),
    ("compute_budget_s", "0"),
    ("compute_budget_s", "[1]"),
    ("compute_budget_s", '"soon"'),
    ("warmup_rounds", "true"),
    ("warmup_rounds", "1.5"),
    ("warmup_rounds", "0"),
    ("warmup_rounds", "-3"),
    ("warmup_rounds", "NaN"),
    ("warmup_rounds", "Infinity"),
    ("warmup_rounds", "1e400"),
    ("warmup_rounds", "100000000000000000000000000000"),
    ("warmup_rounds", '"three"'),
]


@pytest.mark.parametrize(("field", "value"), HOSTILE_VALUES)
def test_a_hostile_straggler_setting_is_a_422_naming_it(
    operator: tuple[TestClient, dict[str, str]], field: str, value: str
) -> None:
    # drop_compute = true beside the others, so that only the hostile value is wrong.
    collect = {"drop_compute": "true", field: value}
    inner = ", ".join(f'"{k}": {v}' for k, v in collect.items())
    status, text = launch(operator, f'{{"rounds": 1, {SIMULATED}, "collect": {{{inner}}}}}')
    assert status == 422, text
    assert field in text


HOSTILE_PARAMETERS = [
    '{"policy": "fastest_k", "k": true}',
    '{"policy": "fastest_k", "k": 1e400}',
    '{"policy": "fastest_k", "k": 100001}',
    '{"policy": "fastest_k", "k": 2.5}',
    '{"policy": "fastest_k", "k": NaN}',
    '{"policy": "adaptive_k", "k": 2, "k_step": false}',
    '{"policy": "adaptive_k", "k": 2, "burn_in": -1}',
    '{"policy": "quorum", "m": 0}',
    '{"policy": "quorum", "m": true}',
    '{"policy": "deadline", "deadline_s": Infinity}',
    '{"policy": "deadline", "deadline_s": NaN}',
    '{"policy": "deadline", "deadline_s": 1e300}',
    '{"policy": "deadline", "deadline_s": 0}',
    '{"policy": "bandit", "k": 2, "exploration": NaN}',
    '{"policy": "bandit", "k": 2, "exploration": -0.5}',
    '{"policy": "bandit", "k": 2, "exploration": "Infinity"}',
    '{"policy": "group_fastest", "lazy_c": 1e400}',
    '{"policy": "FASTEST_K", "k": 2}',
    '{"policy": true}',
    '{"policy": ["quorum"]}',
]


@pytest.mark.parametrize("collect", HOSTILE_PARAMETERS)
def test_a_hostile_policy_parameter_is_a_422_naming_the_collect_section(
    operator: tuple[TestClient, dict[str, str]], collect: str
) -> None:
    status, text = launch(operator, f'{{"rounds": 1, {SIMULATED}, "collect": {collect}}}')
    assert status == 422, text
    assert "collect" in text


IMPOSSIBLE = [
    # Straggler settings a run cannot honour: refused before it is queued, with the field.
    ('{"collect": {"drop_compute": true}}', "systems.enabled"),
    ('{"collect": {"messages": "per_file"}}', "systems.enabled"),
    ('{"collect": {"policy": "quorum"}}', "systems.enabled"),
    # A deployment has real devices: simulating them there is refused (partial work is not).
    (f'{{{SIMULATED}, "deployment": {{"backend": "deployment"}}}}', "systems.enabled"),
    (f'{{{SIMULATED}, "collect": {{"compute_budget_s": 5}}}}', "drop_compute"),
    (f'{{{SIMULATED}, "collect": {{"warmup_rounds": 5}}}}', "drop_compute"),
    (f'{{{SIMULATED}, "collect": {{"drop_compute": false, "warmup_rounds": 2}}}}', "drop_compute"),
    (
        f'{{{SIMULATED}, "collect": {{"drop_compute": true, "compute_budget_s": 5, '
        '"warmup_rounds": 2}}',
        "warmup_rounds",
    ),
    (f'{{{SIMULATED}, "collect": {{"policy": "all", "k": 3}}}}', "k"),
    (f'{{{SIMULATED}, "collect": {{"policy": "bandit"}}}}', "k"),
]


@pytest.mark.parametrize(("body", "named"), IMPOSSIBLE)
def test_an_impossible_combination_is_a_422_that_names_the_setting(
    operator: tuple[TestClient, dict[str, str]], body: str, named: str
) -> None:
    status, text = launch(operator, body)
    assert status == 422, text
    assert named in text


@pytest.mark.parametrize("digits", [4301, 20_000])
def test_an_integer_too_long_to_parse_is_refused_not_a_500(
    operator: tuple[TestClient, dict[str, str]], digits: int
) -> None:
    # Python refuses to parse integers of more than 4,300 digits: the body is not read at
    # all, a 400 (FastAPI's "error parsing the body"), before any field is known.
    body = f'{{"rounds": 1, {SIMULATED}, "collect": {{"drop_compute": true, '
    body += f'"warmup_rounds": {"9" * digits}}}}}'
    status, text = launch(operator, body)
    assert status == 400, text


def test_the_straggler_settings_when_honourable_are_queued(
    operator: tuple[TestClient, dict[str, str]],
) -> None:
    body = {
        "rounds": 1,
        "systems": {"enabled": True},
        "collect": {
            "policy": "fastest_k",
            "k": 3,
            "messages": "per_file",
            "drop_compute": True,
            "warmup_rounds": 2,
        },
    }
    status, text = launch(operator, json.dumps(body))
    assert status == 202, text
    assert json.loads(text)["config"]["collect"]["warmup_rounds"] == 2
