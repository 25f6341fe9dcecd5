"""Who a SuperNode's ClientApp is: the node config keys, and the environment fallback.

A deployed client runs ``flower-supernode`` with its own EC key, the one it
registered over REST and that the operator's approval registered with the
SuperLink. The ClientApp must sign its replies with that same key under the
client's Phalanx id, so the SuperNode passes both in its node config::

    flower-supernode ... --node-config "phalanx-client-id='c7…' phalanx-key='/keys/client.key'"

Values are TOML literal strings (single quotes: no escapes, so Windows paths
survive). Where a key is absent from the node config, the ClientApp falls
back to the environment (``PHALANX_CLIENT_ID``, ``PHALANX_CLIENT_KEY``,
``PHALANX_BYZANTINE``), which is what the compose demo sets.

``phalanx-byzantine`` names an attack (e.g. ``reversed_gradient``): the client
then lies on every file it is given. It exists for red-team demonstrations.
``phalanx-delay-s`` (``PHALANX_DELAY_S``) makes the client answer every task that
many seconds late (0 to 3600), to watch the collection policies close rounds
without it: a straggler on purpose. ``phalanx-slow-compute-s``
(``PHALANX_SLOW_COMPUTE_S``) makes it a slow device instead: each file takes that
many seconds longer to compute, counted as compute, so a compute budget
(``collect.drop_compute``) cuts its files and one message per file
(``collect.messages = "per_file"``) delivers those it finished.

``data-path`` (``PHALANX_DATA_PATH``) names the client's own data, for runs with
``data.mode = "local"``: ``npz:PATH``, ``idx:DIR``, a bare ``.npz`` file or IDX
directory (:mod:`phalanx.node_data`). It is the node operator's choice alone: no
task or run config the coordinator sends names a file the client reads.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "BYZANTINE_ENV",
    "BYZANTINE_KEY",
    "CLIENT_ID_ENV",
    "CLIENT_ID_KEY",
    "DATA_PATH_ENV",
    "DATA_PATH_KEY",
    "DELAY_ENV",
    "DELAY_KEY",
    "KEY_ENV",
    "KEY_PATH_KEY",
    "SLOW_COMPUTE_ENV",
    "SLOW_COMPUTE_KEY",
    "NodeConfigError",
    "NodeIdentity",
]

CLIENT_ID_KEY = "phalanx-client-id"
KEY_PATH_KEY = "phalanx-key"
BYZANTINE_KEY = "phalanx-byzantine"
DELAY_KEY = "phalanx-delay-s"
SLOW_COMPUTE_KEY = "phalanx-slow-compute-s"
DATA_PATH_KEY = "data-path"

CLIENT_ID_ENV = "PHALANX_CLIENT_ID"
KEY_ENV = "PHALANX_CLIENT_KEY"
BYZANTINE_ENV = "PHALANX_BYZANTINE"
DELAY_ENV = "PHALANX_DELAY_S"
SLOW_COMPUTE_ENV = "PHALANX_SLOW_COMPUTE_S"
DATA_PATH_ENV = "PHALANX_DATA_PATH"
MAX_DELAY_S = 3600.0


class NodeConfigError(ValueError):
    """The node config (or environment) does not say who this client is."""


@dataclass(frozen=True)
class NodeIdentity:
    """A deployed client as its SuperNode knows it.

    Parameters
    ----------
    client_id : str
        The id the control plane gave the client at registration.
    key_path : Path
        Its EC private key (OpenSSH or PEM); also the SuperNode's key.
    byzantine : str or None
        An attack name to play a Byzantine client, ``None`` to be honest.
    delay_s : float
        Seconds to wait before answering each task (a straggler on purpose).
    slow_compute_s : float
        Seconds longer each file takes to compute (a slow device on purpose).
    data_path : str or None
        The client's own data (``data-path``), which it trains on in a local-data
        run; ``None`` when the node names none.
    """

    client_id: str
    key_path: Path
    byzantine: str | None = None
    delay_s: float = 0.0
    data_path: str | None = None
    slow_compute_s: float = 0.0

    def to_node_config(self) -> str:
        """Render the ``--node-config`` value of ``flower-supernode``.

        Raises
        ------
        NodeConfigError
            When a value contains a single quote or a line break, which a TOML
            literal string cannot hold.
        """
        pairs = {CLIENT_ID_KEY: self.client_id, KEY_PATH_KEY: str(self.key_path)}
        if self.byzantine:
            pairs[BYZANTINE_KEY] = self.byzantine
        if self.delay_s:
            pairs[DELAY_KEY] = repr(float(self.delay_s))
        if self.slow_compute_s:
            pairs[SLOW_COMPUTE_KEY] = repr(float(self.slow_compute_s))
        if self.data_path:
            pairs[DATA_PATH_KEY] = self.data_path
        return " ".join(f"{key}={_literal(key, value)}" for key, value in pairs.items())

    @classmethod
    def resolve(cls, node_config: Mapping[str, object], environ: Mapping[str, str]) -> NodeIdentity:
        """Read the identity from a ClientApp's node config, else from the environment.

        Raises
        ------
        NodeConfigError
            When the client id or the key path is missing or blank, naming both
            ways to set it.
        """
        client_id = _setting(node_config, environ, CLIENT_ID_KEY, CLIENT_ID_ENV)
        key_path = _setting(node_config, environ, KEY_PATH_KEY, KEY_ENV)
        missing = [
            f"{key} (or ${env})"
            for key, env, value in (
                (CLIENT_ID_KEY, CLIENT_ID_ENV, client_id),
                (KEY_PATH_KEY, KEY_ENV, key_path),
            )
            if not value
        ]
        if missing:
            raise NodeConfigError(
                f"this SuperNode does not say who it is: set {' and '.join(missing)} "
                "in flower-supernode --node-config"
            )
        byzantine = _setting(node_config, environ, BYZANTINE_KEY, BYZANTINE_ENV)
        delay = _delay(_setting(node_config, environ, DELAY_KEY, DELAY_ENV), DELAY_KEY, DELAY_ENV)
        slow = _delay(
            _setting(node_config, environ, SLOW_COMPUTE_KEY, SLOW_COMPUTE_ENV),
            SLOW_COMPUTE_KEY,
            SLOW_COMPUTE_ENV,
        )
        data_path = _setting(node_config, environ, DATA_PATH_KEY, DATA_PATH_ENV)
        return cls(
            client_id=client_id,
            key_path=Path(key_path),
            byzantine=byzantine or None,
            delay_s=delay,
            data_path=data_path or None,
            slow_compute_s=slow,
        )


def _delay(text: str, key: str, env: str) -> float:
    """Read ``key`` (``phalanx-delay-s`` and the like): seconds from 0 to :data:`MAX_DELAY_S`.

    0 when unset.
    """
    if not text:
        return 0.0
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not 0.0 <= seconds <= MAX_DELAY_S:  # NaN fails both comparisons
        raise NodeConfigError(
            f"{key} (or ${env}) must be a number of seconds from 0 to {MAX_DELAY_S:g}, got {text!r}"
        )
    return seconds


def _setting(
    node_config: Mapping[str, object], environ: Mapping[str, str], key: str, env: str
) -> str:
    value = node_config.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        return environ.get(env, "").strip()
    return str(value).strip()


def _literal(key: str, value: str) -> str:
    if "'" in value or "\n" in value or "\r" in value:
        raise NodeConfigError(f"{key} cannot contain a single quote or a line break: {value!r}")
    return f"'{value}'"
