"""The `Assignment` itself: the workers of each file and the files of each worker."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property


@dataclass(frozen=True)
class Assignment:
    """Files and the workers that compute them.

    Parameters
    ----------
    num_workers : int
        ``K``; workers are ``0 .. K - 1``.
    files : tuple of tuple of int
        ``files[f]`` is the sorted tuple of distinct workers assigned file ``f``.
    scheme : str
        Name of the scheme that produced it.
    """

    num_workers: int
    files: tuple[tuple[int, ...], ...]
    scheme: str = "custom"
    _by_worker: tuple[tuple[int, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_worker: list[list[int]] = [[] for _ in range(self.num_workers)]
        for f, workers in enumerate(self.files):
            if len(set(workers)) != len(workers):
                raise ValueError(f"file {f} lists a worker twice: {workers}")
            for w in workers:
                if not 0 <= w < self.num_workers:
                    raise ValueError(
                        f"file {f} names worker {w}, outside 0..{self.num_workers - 1}"
                    )
                by_worker[w].append(f)
        object.__setattr__(self, "_by_worker", tuple(tuple(fs) for fs in by_worker))

    @property
    def num_files(self) -> int:
        """Number of files."""
        return len(self.files)

    @cached_property
    def replication(self) -> int:
        """``r``: the largest number of workers on one file."""
        return max((len(w) for w in self.files), default=0)

    def workers_of(self, file: int) -> tuple[int, ...]:
        """Workers assigned ``file``."""
        return self.files[file]

    def files_of(self, worker: int) -> tuple[int, ...]:
        """Files assigned to ``worker``, in increasing order."""
        return self._by_worker[worker]

    def shared_files(self, a: int, b: int) -> tuple[int, ...]:
        """Files that workers ``a`` and ``b`` both compute."""
        fb = set(self._by_worker[b])
        return tuple(f for f in self._by_worker[a] if f in fb)

    @property
    def worker_loads(self) -> tuple[int, ...]:
        """Number of files each worker computes, indexed by worker."""
        return tuple(len(fs) for fs in self._by_worker)

    def summary(self) -> dict[str, str | int]:
        """Small JSON-safe description, as stored with each round.

        Returns
        -------
        dict
            ``scheme``, ``num_workers``, ``replication``, ``num_files`` and
            ``files_per_worker_min`` / ``files_per_worker_max``.
        """
        loads = self.worker_loads
        return {
            "scheme": self.scheme,
            "num_workers": self.num_workers,
            "replication": self.replication,
            "num_files": self.num_files,
            "files_per_worker_min": min(loads, default=0),
            "files_per_worker_max": max(loads, default=0),
        }
