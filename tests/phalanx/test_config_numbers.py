"""Numbers in a run config are numbers: ``true`` is not 1, and every count has a ceiling."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from phalanx.codec.config import CODEC_ONLY
from phalanx.config import MAX_NUM_FILES, RunConfig


def numeric_fields() -> list[tuple[str, ...]]:
    """The path of every int or float field of the run config and its sections.

    The codec's own settings (``CODEC_ONLY``) are refused in a run config whatever
    their value, so they are left out.
    """
    paths: list[tuple[str, ...]] = []
    for name, field in RunConfig.model_fields.items():
        section = field.annotation
        if isinstance(section, type) and hasattr(section, "model_fields"):
            for inner, sub in section.model_fields.items():
                admitted = set(getattr(sub.annotation, "__args__", (sub.annotation,)))
                if {int, float} & admitted and not (name == "codec" and inner in CODEC_ONLY):
                    paths.append((name, inner))
        elif {int, float} & set(getattr(section, "__args__", (section,))):
            paths.append((name,))
    return paths


def nested(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    body: dict[str, Any] = {path[-1]: value}
    for key in reversed(path[:-1]):
        body = {key: body}
    return body


@pytest.mark.parametrize("path", numeric_fields(), ids=".".join)
@pytest.mark.parametrize("value", [True, False])
def test_true_or_false_is_refused_wherever_a_number_is_meant(
    path: tuple[str, ...], value: bool
) -> None:
    with pytest.raises(ValidationError, match="not true or false"):
        RunConfig.model_validate(nested(path, value))


def test_every_section_has_numbers_to_check() -> None:
    sections = {path[0] for path in numeric_fields()}
    assert {"rounds", "seed", "data", "assignment", "detection", "training"} <= sections


def test_a_flag_still_takes_true_and_false() -> None:
    config = RunConfig.model_validate({"assignment": {"relabel": False}})
    assert config.assignment.relabel is False


def test_the_tolerated_byzantine_count_has_a_ceiling() -> None:
    with pytest.raises(ValidationError, match="less than or equal to"):
        RunConfig.model_validate({"aggregation": {"f": 10**40}})
    assert MAX_NUM_FILES == 100_000
