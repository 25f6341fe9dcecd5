"""The client side of registration: what ``phalanx client register`` does over HTTP.

Any HTTP client in any language can do the same (the wire format is in the README):

1. ``POST {api}/api/v1/clients`` with ``{"name": ..., "public_key": ...}`` -> 201
   ``{"id": ..., "status": "pending", "challenge": <base64>}``;
2. sign the decoded challenge bytes (DER ECDSA-SHA256) and ``POST
   {api}/api/v1/clients/{id}/proof`` with ``{"signature": <base64>}`` -> 200
   ``{"id": ..., "status": ...}``. The answer's ``registration_token``, when the
   server sent one, goes with the proof in ``X-Registration-Token``: the server's
   limit on proofs for one client then counts only the registrant's address, so
   strangers posting junk proofs for this id cannot hold the registrant back.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

import httpx

from phalanx.identity import PrivateKey, public_key_to_openssh, sign_challenge

API_PREFIX = "/api/v1"
"""Where the control plane serves its REST API (part of the wire format, as the README says)."""

REGISTRATION_TOKEN_HEADER = "X-Registration-Token"
"""Where a registrant shows its registration token (part of the wire format)."""

#: Seconds to wait for the control plane.
DEFAULT_TIMEOUT_S = 30.0


class EnrollmentError(RuntimeError):
    """The control plane refused the registration or answered something unexpected."""


@dataclass(frozen=True)
class Enrollment:
    """A registered client.

    Attributes
    ----------
    client_id : str
        The id the control plane gave the client.
    status : str
        ``pending`` until an operator approves, or ``approved`` with auto-approval.
    """

    client_id: str
    status: str


def register(
    api_url: str,
    key: PrivateKey,
    name: str,
    *,
    http: httpx.Client | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> Enrollment:
    """Register a client's key with the control plane and prove possession of it.

    Parameters
    ----------
    api_url : str
        Base URL of the control plane, e.g. ``http://127.0.0.1:8080``.
    key : PrivateKey
        The client's private key; its public half is sent in OpenSSH form.
    name : str
        The client's name.
    http : httpx.Client, optional
        The HTTP client to use (tests pass one); a new one by default.
    timeout_s : float
        Timeout of each request when ``http`` is not given.

    Returns
    -------
    Enrollment
        The client id and status.

    Raises
    ------
    EnrollmentError
        With the control plane's message when it refuses, or when it cannot be reached.
    """
    base = api_url.rstrip("/") + API_PREFIX
    own = http is None
    client = http if http is not None else httpx.Client(timeout=timeout_s)
    try:
        registered = _post(
            client,
            f"{base}/clients",
            {"name": name, "public_key": public_key_to_openssh(key.public_key())},
            expected=201,
        )
        client_id = _field(registered, "id")
        try:
            challenge = base64.b64decode(_field(registered, "challenge"), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise EnrollmentError("the control plane sent a challenge that is not base64") from exc
        signature = base64.b64encode(sign_challenge(key, challenge)).decode("ascii")
        token = registered.get("registration_token")
        proved = _post(
            client,
            f"{base}/clients/{client_id}/proof",
            {"signature": signature},
            expected=200,
            headers={REGISTRATION_TOKEN_HEADER: token} if isinstance(token, str) else None,
        )
        return Enrollment(client_id=client_id, status=_field(proved, "status"))
    finally:
        if own:
            client.close()


def _post(
    client: httpx.Client,
    url: str,
    body: dict[str, str],
    *,
    expected: int,
    headers: dict[str, str] | None = None,
) -> Any:
    try:
        response = client.post(url, json=body, headers=headers)
    except httpx.HTTPError as exc:
        raise EnrollmentError(f"cannot reach {url}: {exc}") from exc
    try:
        data = response.json()
    except ValueError:
        data = None
    if response.status_code != expected:
        detail = data.get("detail") if isinstance(data, dict) else None
        raise EnrollmentError(
            f"POST {url} answered {response.status_code}: {detail or response.text[:200]}"
        )
    if not isinstance(data, dict):
        raise EnrollmentError(f"POST {url} answered something other than a JSON object")
    return data


def _field(data: dict[str, Any], name: str) -> str:
    value = data.get(name)
    if not isinstance(value, str):
        raise EnrollmentError(f"the control plane's answer lacks the text field {name!r}")
    return value
