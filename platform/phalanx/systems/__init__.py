"""A model of system heterogeneity for simulation: devices, availability, and a virtual clock.

Pure, seeded and deterministic, without torch: :mod:`.config` (the settings),
:mod:`.trace` (device-capacity CSV files), :mod:`.profiles` (each worker's
device), :mod:`.clock` (when a worker is there and when its reply arrives),
:mod:`.streams` (the seeded random streams behind every draw).
"""

from phalanx.systems.clock import (
    NEVER,
    arrival_time,
    download_time,
    finish_times,
    is_available,
    pieces_done_by,
    round_factor,
    upload_time,
)
from phalanx.systems.config import SystemsConfig
from phalanx.systems.profiles import (
    WorkerProfile,
    choose_stragglers,
    draw_profiles,
    profiles_from_trace,
    straggler_count,
)
from phalanx.systems.trace import TraceError, TraceRow, load_trace, parse_trace

__all__ = [
    "NEVER",
    "SystemsConfig",
    "TraceError",
    "TraceRow",
    "WorkerProfile",
    "arrival_time",
    "choose_stragglers",
    "download_time",
    "draw_profiles",
    "finish_times",
    "is_available",
    "load_trace",
    "parse_trace",
    "pieces_done_by",
    "profiles_from_trace",
    "round_factor",
    "straggler_count",
    "upload_time",
]
