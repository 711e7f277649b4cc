"""paperdag.points: the shared Gaussian mixture and a user's points file, with errors naming the setting."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from paperdag.points import gaussian_mixture, points_path, read_points


def test_gaussian_mixture_is_a_function_of_its_seed() -> None:
    """(n, dim) float64, the same for one seed, another for another seed."""
    a, b = gaussian_mixture(50, 3, 4, 2.0, seed=1), gaussian_mixture(50, 3, 4, 2.0, seed=2)
    assert a.shape == (50, 3) and a.dtype == np.float64
    assert np.array_equal(a, gaussian_mixture(50, 3, 4, 2.0, seed=1)) and not np.array_equal(a, b)


def test_points_read_from_npy_and_parquet_with_an_optional_attribute(tmp_path: Path) -> None:
    """.npy: the array, no attribute; Parquet: the `vector` column or the numeric columns, `attribute` apart."""
    points = np.arange(24, dtype=np.float64).reshape(12, 2)
    np.save(tmp_path / "p.npy", points)
    got, labels = read_points(str(tmp_path / "p.npy"), "k")
    assert np.array_equal(got, points) and labels is None
    pl.DataFrame({"x": points[:, 0], "y": points[:, 1], "attribute": np.arange(12) % 3}).write_parquet(tmp_path / "p.parquet")
    got, labels = read_points(str(tmp_path / "p.parquet"), "k")
    assert np.array_equal(got, points) and labels.tolist() == [0, 1, 2] * 4


@pytest.mark.parametrize(("name", "message"), [("missing.npy", "k: .*does not exist"), ("p.csv", "k: .*must end in .npy or .parquet")])
def test_a_bad_points_file_names_the_setting(tmp_path: Path, name: str, message: str) -> None:
    """A missing file or one of another format is an error naming the setting it came from."""
    (tmp_path / "p.csv").write_text("1,2\n")
    with pytest.raises((FileNotFoundError, ValueError), match=message):
        read_points(str(tmp_path / name), "k")


def test_the_path_validator_accepts_none_or_the_two_suffixes() -> None:
    """points_path accepts "" and the two suffixes only."""
    assert points_path("") == "" and points_path("a.parquet") == "a.parquet"
    with pytest.raises(ValueError, match="must end in"):
        points_path("a.txt")
