"""The Ray heads this test process started (``tests/fixtures/ray.py``) and who joined them."""

from __future__ import annotations

from pathlib import Path

HEAD_FOLDERS: dict[str, Path] = {}
"""The session folder of each head this test process started, by its address."""


def joined_head(address: str, pid: int) -> bool:
    """Whether process ``pid`` ran as a Ray driver on the head at ``address``.

    Each driver that joins a head leaves its log in the head's session folder, named
    with its pid (``python-core-driver-<job>_<pid>.log``); a process that started a Ray
    of its own leaves it in that Ray's folder instead.
    """
    logs = HEAD_FOLDERS[address].glob(f"session_*/logs/python-core-driver-*_{pid}.log")
    return any(logs)
