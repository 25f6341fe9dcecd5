"""The data.partition setting: each kind takes its parameters, and nothing else."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from phalanx.partitions import PartitionConfig


def test_the_default_is_iid_with_the_run_seed() -> None:
    config = PartitionConfig()

    assert (config.kind, config.seed, config.alpha) == ("iid", None, None)


@pytest.mark.parametrize(
    "given",
    [
        {"kind": "dirichlet", "alpha": 0.3, "min_partition_size": 5, "self_balancing": True},
        {"kind": "shards", "labels_per_client": 2, "label_assignment": "first-deterministic"},
        {"kind": "quantity", "alpha": 1.0, "seed": 7},
        {"kind": "iid", "seed": 0},
    ],
)
def test_each_kind_takes_its_parameters(given: dict[str, Any]) -> None:
    assert PartitionConfig.model_validate(given).model_dump(exclude_none=True) == given


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"kind": "iid", "alpha": 1.0}, "alpha: not a parameter of the iid partition"),
        (
            {"kind": "shards", "labels_per_client": 2, "alpha": 1.0},
            "takes label_assignment, labels_per_client",
        ),
        ({"kind": "quantity", "alpha": 1.0, "self_balancing": True}, "self_balancing"),
        ({"kind": "dirichlet"}, "the dirichlet partition needs alpha"),
        ({"kind": "shards"}, "the shards partition needs labels_per_client"),
        ({"kind": "quantity"}, "the quantity partition needs alpha"),
    ],
)
def test_a_parameter_the_kind_does_not_read_or_lacks_is_refused(
    given: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        PartitionConfig.model_validate(given)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("alpha", 0.0),
        ("alpha", -0.5),
        ("alpha", float("nan")),
        ("alpha", float("inf")),
        ("alpha", 1e7),
        ("alpha", True),
        ("alpha", "much"),
        ("labels_per_client", 0),
        ("labels_per_client", 1001),
        ("labels_per_client", True),
        ("labels_per_client", 1.5),
        ("min_partition_size", -1),
        ("seed", -1),
        ("seed", 2**63),
        ("kind", "dirichelt"),
        ("label_assignment", "sorted"),
    ],
)
def test_hostile_values_are_refused_with_the_field_named(field: str, value: Any) -> None:
    kind = {"labels_per_client": "shards", "label_assignment": "shards"}.get(field, "dirichlet")
    given: dict[str, Any] = {"kind": kind, "alpha": 1.0, "labels_per_client": 2}
    given = {k: v for k, v in given.items() if k == "kind" or k in _reads(kind)}
    given[field] = value

    with pytest.raises(ValidationError) as raised:
        PartitionConfig.model_validate(given)
    assert field in {str(part) for error in raised.value.errors() for part in error["loc"]}


def _reads(kind: str) -> set[str]:
    return {"alpha"} if kind == "dirichlet" else {"labels_per_client"}


def test_an_unknown_field_is_refused() -> None:
    with pytest.raises(ValidationError, match="Extra inputs"):
        PartitionConfig.model_validate({"kind": "iid", "clients": 3})
