"""Query parameters shared by the routes.

Bounded so that no value reaches the database that its column cannot hold
(a 64-bit id, a 32-bit round number).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from phalanx_api.schemas import MAX_PAGE_SIZE

#: Largest value of a 64-bit key column.
MAX_ID = 2**63 - 1
#: Largest value of a 32-bit integer column (round, worker, offsets).
MAX_INT32 = 2**31 - 1

Limit = Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE, description="Page size.")]
Offset = Annotated[int, Query(ge=0, le=MAX_INT32, description="Items to skip.")]
Before = Annotated[
    int | None, Query(ge=1, le=MAX_ID, description="The previous page's next_before.")
]
