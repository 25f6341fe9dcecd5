"""`simulated_arrivals`: times come from the systems model and the bytes, never from claims."""

from __future__ import annotations

from phalanx.arrivals import TimedReply, simulated_arrivals
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


def timed_replies(
    replies: list[Reply], systems: SystemsConfig, seed: int = 3, **options: object
) -> list[TimedReply]:
    return simulated_arrivals(
        replies,
        profiles=draw_profiles(systems, 4, seed),
        systems=systems,
        seed=seed,
        round_=1,
        bytes_down=1000,
        samples_per_file=8,
        **options,  # type: ignore[arg-type]
    )


def times(replies: list[Reply], systems: SystemsConfig, seed: int = 3) -> list[float]:
    return [t.seconds for t in timed_replies(replies, systems, seed)]


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


SLOW_CPU = SystemsConfig(enabled=True, speed_scale_s=0.5)  # 4 s of compute a file of 8 samples


def test_per_file_each_file_leaves_once_computed_and_the_first_comes_sooner() -> None:
    (whole,) = timed_replies([reply(0, HONEST)], SLOW_CPU)
    (split,) = timed_replies([reply(0, HONEST)], SLOW_CPU, per_file=True)
    assert set(whole.files_at.values()) == {whole.seconds}
    assert split.files_at[0] < split.files_at[1] and split.seconds == split.files_at[0]
    assert split.files_at[0] < whole.seconds
    assert whole.compute_s == split.compute_s and whole.compute_s[1] > whole.compute_s[0] > 0


def test_a_compute_budget_sends_the_files_finished_within_it_and_no_part_of_one() -> None:
    (full,) = timed_replies([reply(0, HONEST)], SLOW_CPU)
    first_done = full.compute_s[0]
    (cut,) = timed_replies([reply(0, HONEST)], SLOW_CPU, budget_s=first_done)
    assert list(cut.files_at) == [0] and cut.seconds < full.seconds
    (nothing,) = timed_replies([reply(0, HONEST)], SLOW_CPU, budget_s=first_done / 2)
    assert nothing.files_at == {}
