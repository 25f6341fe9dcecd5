"""Errors the repositories raise for conditions a caller (or a user) can cause.

The API maps them to HTTP statuses in one place: ``NotFoundError`` to 404,
``ConflictError`` (and its subclasses) to 409.
"""

from __future__ import annotations


class StoreError(Exception):
    """Base class of the store's errors."""


class NotFoundError(StoreError):
    """The requested row does not exist."""

    def __init__(self, what: str, key: object) -> None:
        super().__init__(f"{what} {key!r} not found")
        self.what = what
        self.key = key


class ConflictError(StoreError):
    """The change contradicts the stored state (duplicate, wrong status, ...)."""


class LeaseLostError(ConflictError):
    """A coordinator no longer holds the run it is working on."""
