"""Pydantic's validation errors in plain words: no prefixes, a guess at a misspelt field."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from phalanx.config import RunConfig
from phalanx.validation_messages import describe, model_at, one_line


def _errors(data: dict[str, Any]) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        RunConfig.model_validate(data)
    return info.value


def test_a_misspelt_field_gets_the_closest_field_of_its_section() -> None:
    exc = _errors({"training": {"optimiser": "adam"}})
    assert one_line(exc, RunConfig) == (
        "training.optimiser: unknown field; did you mean `optimizer`?"
    )


def test_a_misspelt_section_gets_the_closest_section() -> None:
    exc = _errors({"trainig": {}})
    assert describe(exc, RunConfig) == ["trainig: unknown field; did you mean `training`?"]


def test_a_field_like_no_other_gets_the_fields_there_are() -> None:
    exc = _errors({"attack": {"zzz": 1}})
    assert describe(exc, RunConfig) == [
        "attack.zzz: unknown field; the fields here are name, q, selection, strategy and params"
    ]


def test_without_the_model_an_unknown_field_is_only_named() -> None:
    assert one_line(_errors({"training": {"optimiser": "adam"}})) == (
        "training.optimiser: unknown field"
    )


def test_a_rule_across_sections_comes_without_pydantics_prefix_or_a_path() -> None:
    exc = _errors({"assignment": {"scheme": "mols", "num_workers": 7, "r": 3}})
    (line,) = describe(exc, RunConfig)
    assert line.startswith("assignment: mols needs K = r * l with l a prime >= r + 1; K=7, r=3")
    assert "Value error" not in line


def test_other_errors_keep_pydantics_words() -> None:
    assert one_line(_errors({"rounds": 0}), RunConfig) == (
        "rounds: Input should be greater than or equal to 1"
    )


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str


class _Batch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    files: list[_File]
    spare: _File | None = None


def test_lists_and_optional_fields_are_looked_through() -> None:
    assert model_at(_Batch, ("files", 2)) is _File
    assert model_at(_Batch, ("spare",)) is _File
    assert model_at(_Batch, ("files", 0, "path")) is None
    with pytest.raises(ValidationError) as info:
        _Batch.model_validate({"files": [{"path": "a"}, {"pth": "b"}]})
    assert "files.1.pth: unknown field; did you mean `path`?" in describe(info.value, _Batch)
