"""Datasets named through the API stay inside the datasets directory, and name real data."""

from __future__ import annotations

from pathlib import Path

import pytest

from phalanx.data_files import (
    NPZ_NOT_THE_DIRECTORY,
    OUTSIDE_DATASETS_DIR,
    DatasetOutsideError,
    confined_dataset,
)


@pytest.mark.parametrize("name", ["npz:.", "npz:./", "npz:sub/.."])
def test_an_npz_name_for_the_directory_itself_is_refused(name: str, tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    with pytest.raises(DatasetOutsideError, match="not the directory itself"):
        confined_dataset(name, tmp_path)
    assert str(tmp_path) not in NPZ_NOT_THE_DIRECTORY


def test_idx_may_name_the_directory_and_npz_a_file_in_it(tmp_path: Path) -> None:
    assert confined_dataset("idx:.", tmp_path) == "idx:."
    assert confined_dataset("npz:data.npz", tmp_path) == "npz:data.npz"
    with pytest.raises(DatasetOutsideError, match="datasets"):
        confined_dataset("npz:../data.npz", tmp_path)
    assert "datasets directory" in OUTSIDE_DATASETS_DIR
