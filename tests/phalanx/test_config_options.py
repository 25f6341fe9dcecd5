"""Red team: ``aggregation.options`` and ``pre_options`` are checked before anything starts.

They are passed as keyword arguments to the rule and the pre-aggregator in every round.
``RunConfig`` took any ``dict[str, float | int]`` for them, so ``phalanx run`` recorded the
run and started Ray, and ``POST /api/v1/runs`` answered 202, for options that fail in
round 1 (``TypeError: mean() got an unexpected keyword argument 'bogus'``, a second
``f``, both ``seed`` and ``generator`` for bucketing) or that hold the coordinator for
hours (``max_iter = 10**9`` Weiszfeld iterations). Before the fix every refusal test
below fails because the config is accepted.
"""

from __future__ import annotations

import inspect

import pytest
from pydantic import ValidationError

from phalanx.aggregation import AGGREGATORS, PRE_AGGREGATORS
from phalanx.config import PRE_OPTIONS, RULE_OPTIONS, AggregationConfig, RunConfig

BAD = [
    ({"rule": "mean", "options": {"bogus": 1}}, "'bogus' is not an option of mean"),
    ({"rule": "mean", "options": {"f": 1}}, "'f' is not an option of mean"),
    ({"rule": "krum", "options": {"m": 2}}, "'m' is not an option of krum (it takes none)"),
    ({"rule": "centered_clipping", "options": {"center": 0}}, "'center'"),
    ({"rule": "multi_krum", "options": {"m": 2.5}}, "m must be an integer"),
    ({"rule": "multi_krum", "options": {"m": 0}}, "m must be"),
    ({"rule": "geometric_median", "options": {"max_iter": 10**9}}, "max_iter must be"),
    ({"rule": "geometric_median", "options": {"nu": 0}}, "nu must be"),
    ({"rule": "geometric_median", "options": {"eps": -1}}, "eps must be"),
    ({"rule": "centered_clipping", "options": {"n_iter": 10**9}}, "n_iter must be"),
    ({"rule": "centered_clipping", "options": {"tau": -1.0}}, "tau must be"),
    ({"rule": "median_of_means", "f": 2, "options": {"groups": 4}}, "groups must exceed 2 f"),
    ({"rule": "mean", "pre_options": {"s": 2}}, "pre_options given without"),
    ({"rule": "mean", "pre": "bucketing", "pre_options": {"generator": 1}}, "'generator'"),
    ({"rule": "mean", "pre": "bucketing", "pre_options": {"s": 0}}, "s must be"),
    ({"rule": "mean", "pre": "bucketing", "pre_options": {"seed": -1}}, "seed must be"),
    ({"rule": "mean", "pre": "nnm", "pre_options": {"s": 2}}, "'s' is not an option of nnm"),
]


@pytest.mark.parametrize(("aggregation", "message"), BAD, ids=[str(b[0]) for b in BAD])
def test_options_the_rule_would_refuse_in_round_1_are_refused_by_the_config(
    aggregation: dict[str, object], message: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        RunConfig.model_validate({"aggregation": aggregation})
    (error,) = refused.value.errors()
    field = "options" if "options" in aggregation else "pre_options"
    if "groups" not in message:
        assert error["loc"] == ("aggregation", field)
    assert message in error["msg"]


def test_the_options_each_rule_takes_are_accepted_and_integral_floats_become_ints() -> None:
    config = RunConfig.model_validate(
        {
            "assignment": {"scheme": "bibd", "num_workers": 15, "r": 3},
            "aggregation": {
                "rule": "multi_krum",
                "f": 1,
                "options": {"m": 10.0},
                "pre": "bucketing",
                "pre_options": {"s": 2, "seed": 5},
            },
        }
    )
    assert config.aggregation.options == {"m": 10}
    assert isinstance(config.aggregation.options["m"], int)
    assert config.aggregation.pre_options == {"s": 2, "seed": 5}
    geometric = AggregationConfig(rule="geometric_median", options={"nu": 1e-5, "eps": 0})
    assert geometric.options == {"nu": 1e-5, "eps": 0}


@pytest.mark.parametrize(
    ("table", "functions"),
    [(RULE_OPTIONS, AGGREGATORS), (PRE_OPTIONS, PRE_AGGREGATORS)],
    ids=["rules", "pre-aggregators"],
)
def test_every_option_the_config_allows_is_a_keyword_of_its_function(
    table: dict[str, dict[str, object]], functions: dict[str, object]
) -> None:
    assert set(table) == set(functions)
    for name, options in table.items():
        function = functions[name]
        assert callable(function)
        keywords = {
            p.name
            for p in inspect.signature(function).parameters.values()
            if p.kind is inspect.Parameter.KEYWORD_ONLY
        }
        assert set(options) <= keywords - {"f"}, name


def test_by_default_the_trimmed_mean_tolerates_what_detection_left_exposed() -> None:
    aggregation = RunConfig().aggregation
    assert (aggregation.rule, aggregation.f) == ("trimmed_mean", "auto")


@pytest.mark.parametrize("f", ["bogus", "AUTO", "3", -1, True, 2.5, None])
def test_f_is_a_count_of_files_or_auto(f: object) -> None:
    with pytest.raises(ValidationError, match=r"aggregation\.f"):
        RunConfig.model_validate({"aggregation": {"f": f}})


def test_auto_f_skips_the_check_a_fixed_f_must_pass() -> None:
    # A fixed f must leave the rule enough inputs; "auto" is capped by the rule each round.
    with pytest.raises(ValidationError, match="needs at least"):
        RunConfig.model_validate({"aggregation": {"rule": "krum", "f": 20}})
    assert RunConfig.model_validate({"aggregation": {"rule": "krum"}}).aggregation.f == "auto"
