"""Who a SuperNode's ClientApp is, as Flower's own parser reads ``--node-config``."""

from __future__ import annotations

from pathlib import Path

import pytest
from flwr.common.config import parse_config_args

from phalanx.flower.deployment.node_config import NodeConfigError, NodeIdentity


def _as_flower_reads_it(identity: NodeIdentity) -> dict[str, object]:
    """Parse the value the way ``flower-supernode --node-config`` does."""
    return dict(parse_config_args([identity.to_node_config()]))


@pytest.mark.parametrize(
    "identity",
    [
        NodeIdentity("6f1c0d5e-0000-4000-8000-000000000001", Path("/keys/client.key")),
        NodeIdentity("c-2", Path("/home/a user/keys/client key"), byzantine="reversed_gradient"),
        NodeIdentity("c-3", Path(r"C:\Users\op\client.key"), byzantine="my.pkg:Attack"),
        NodeIdentity("c-4", Path("/k"), data_path="npz:/data/my clinic.npz"),
        NodeIdentity("c-5", Path("/k"), data_path=r"idx:D:\data\mnist"),
    ],
)
def test_the_node_config_round_trips_through_flowers_parser(identity: NodeIdentity) -> None:
    assert NodeIdentity.resolve(_as_flower_reads_it(identity), {}) == identity


def test_an_honest_node_config_has_no_byzantine_key() -> None:
    parsed = _as_flower_reads_it(NodeIdentity("c-1", Path("/k")))
    assert "phalanx-byzantine" not in parsed


def test_the_environment_fills_in_what_the_node_config_lacks() -> None:
    env = {
        "PHALANX_CLIENT_ID": "c-9",
        "PHALANX_CLIENT_KEY": "/run/secrets/client.key",
        "PHALANX_BYZANTINE": "sign_flip",
    }
    assert NodeIdentity.resolve({}, env) == NodeIdentity(
        "c-9", Path("/run/secrets/client.key"), byzantine="sign_flip"
    )


def test_the_node_config_wins_over_the_environment() -> None:
    env = {"PHALANX_CLIENT_ID": "from-env", "PHALANX_CLIENT_KEY": "/env.key"}
    resolved = NodeIdentity.resolve(
        {"phalanx-client-id": "from-node", "phalanx-key": "/n.key"}, env
    )
    assert (resolved.client_id, resolved.key_path) == ("from-node", Path("/n.key"))


def test_a_supernode_that_does_not_say_who_it_is_is_told_how() -> None:
    with pytest.raises(NodeConfigError, match=r"phalanx-client-id .*PHALANX_CLIENT_ID"):
        NodeIdentity.resolve({"phalanx-key": "/k"}, {})
    with pytest.raises(NodeConfigError, match=r"phalanx-key .*PHALANX_CLIENT_KEY"):
        NodeIdentity.resolve({"phalanx-client-id": "c"}, {"PHALANX_CLIENT_KEY": "  "})


def test_a_value_a_toml_literal_cannot_hold_is_refused() -> None:
    with pytest.raises(NodeConfigError, match="single quote"):
        NodeIdentity("c", Path("/o'brien/key")).to_node_config()


def test_a_straggler_on_purpose_round_trips_and_is_read_from_either_place() -> None:
    slow = NodeIdentity("c-1", Path("/keys/c.key"), delay_s=2.5)
    assert NodeIdentity.resolve(parse_config_args([slow.to_node_config()]), {}) == slow
    from_env = NodeIdentity.resolve(
        {"phalanx-client-id": "c-1", "phalanx-key": "/k"}, {"PHALANX_DELAY_S": "4"}
    )
    assert from_env.delay_s == 4.0


@pytest.mark.parametrize("text", ["-1", "nan", "inf", "3601", "soon", "1e400"])
def test_a_delay_that_is_not_a_sane_number_of_seconds_is_refused(text: str) -> None:
    with pytest.raises(NodeConfigError, match=r"phalanx-delay-s .* from 0 to 3600"):
        NodeIdentity.resolve(
            {"phalanx-client-id": "c-1", "phalanx-key": "/k", "phalanx-delay-s": text}, {}
        )


def test_a_slow_device_on_purpose_round_trips_and_is_read_from_either_place() -> None:
    slow = NodeIdentity("c-1", Path("/keys/c.key"), slow_compute_s=1.5)
    assert NodeIdentity.resolve(parse_config_args([slow.to_node_config()]), {}) == slow
    from_env = NodeIdentity.resolve(
        {"phalanx-client-id": "c-1", "phalanx-key": "/k"}, {"PHALANX_SLOW_COMPUTE_S": "4"}
    )
    assert (from_env.slow_compute_s, from_env.delay_s) == (4.0, 0.0)


@pytest.mark.parametrize("text", ["-1", "nan", "inf", "3601", "soon"])
def test_a_slow_compute_that_is_not_a_sane_number_of_seconds_is_refused(text: str) -> None:
    with pytest.raises(NodeConfigError, match=r"phalanx-slow-compute-s .* from 0 to 3600"):
        NodeIdentity.resolve(
            {"phalanx-client-id": "c-1", "phalanx-key": "/k", "phalanx-slow-compute-s": text}, {}
        )


def test_the_data_path_is_read_from_the_node_config_or_the_environment() -> None:
    parsed = _as_flower_reads_it(NodeIdentity("c-1", Path("/k"), data_path="npz:/d/own.npz"))
    env = {"PHALANX_CLIENT_ID": "c-1", "PHALANX_CLIENT_KEY": "/k"}

    assert parsed["data-path"] == "npz:/d/own.npz"
    assert NodeIdentity.resolve({}, {**env, "PHALANX_DATA_PATH": " /d/x.npz "}).data_path == (
        "/d/x.npz"
    )
    assert NodeIdentity.resolve({}, env).data_path is None
    assert "data-path" not in _as_flower_reads_it(NodeIdentity("c-1", Path("/k")))


def test_a_data_path_a_toml_literal_cannot_hold_is_refused() -> None:
    with pytest.raises(NodeConfigError, match="data-path cannot contain a single quote"):
        NodeIdentity("c", Path("/k"), data_path="npz:/it's.npz").to_node_config()
