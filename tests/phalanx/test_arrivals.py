"""`simulated_arrivals`: times come from the systems model and the bytes, never from claims."""

from __future__ import annotations

from phalanx.arrivals import simulated_arrivals
from phalanx.detection import payload_digest
from phalanx.replies import Reply
from phalanx.systems.clock import is_available
from phalanx.systems.config import SystemsConfig
from phalanx.systems.profiles import draw_profiles

HONEST, FORGED = b"\x00" * 64, b"\x01" * 64


def reply(
    worker: int, payload: bytes, claimed: bytes | None = None, signature: bytes = b""
) -> Reply:
    digest = payload_digest(claimed if claimed is not None else payload)
    files, payloads, digests = (0, 1), (payload, payload), (digest, digest)
    return Reply(worker, f"c{worker}", "run", 1, "nonce", files, payloads, digests, signature)


def times(replies: list[Reply], systems: SystemsConfig, seed: int = 3) -> list[float]:
    timed = simulated_arrivals(
        replies,
        profiles=draw_profiles(systems, 4, seed),
        systems=systems,
        seed=seed,
        round_=1,
        bytes_down=1000,
        samples_per_file=8,
    )
    return [seconds for seconds, _ in timed]


def test_the_same_bytes_arrive_at_the_same_time_whoever_claims_what() -> None:
    honest, forged = times(
        [reply(0, HONEST), reply(0, HONEST, claimed=FORGED)], SystemsConfig(enabled=True)
    )
    assert honest == forged > 0


def test_a_signature_one_byte_longer_does_not_move_the_clock() -> None:
    # DER ECDSA signatures are 70 to 72 bytes at random: timed, they made a run's clock
    # differ from its replay by a microsecond.
    slow_link = SystemsConfig(enabled=True, up_bytes_per_s=1.0)
    short, long = times(
        [reply(0, HONEST, signature=b"s" * 70), reply(0, HONEST, signature=b"s" * 72)], slow_link
    )
    assert short == long


def test_an_absent_worker_never_arrives_and_one_outside_the_roster_at_once() -> None:
    systems = SystemsConfig(enabled=True, availability="dropout", dropout_probability=0.5)
    away = next(w for w in range(4) if not is_available(systems, 3, w, 1))
    assert times([reply(away, HONEST), reply(9, HONEST)], systems) == [0.0]
