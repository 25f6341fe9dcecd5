"""Host names and ``HOST:PORT`` addresses, checked before a certificate or a process uses them.

:func:`check_host_name` is the rule for a name a SuperLink's certificate covers, a
SuperLink binds or a client dials: an IP address, or a DNS host name of RFC 1123's
letters, digits and hyphens. :func:`split_address` reads the ``HOST:PORT`` a client
dials. This module needs only the standard library, so the command line checks its
options with it without loading what makes certificates or starts processes.
"""

from __future__ import annotations

import ipaddress
import re

from phalanx.flower.deployment.ports import MAX_PORT

__all__ = [
    "HOST_NAME_RULE",
    "AddressError",
    "HostNameError",
    "check_host_name",
    "parse_ip",
    "split_address",
]

HOST_NAME_RULE = (
    "an IP address, or a host name: dot-separated labels of 1 to 63 ASCII letters, digits "
    "and hyphens (no hyphen at either end), 253 characters at most, not ending in a number"
)
"""What :func:`check_host_name` takes, in words for an error message."""

_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")

_ADDRESS_EXAMPLE = "e.g. superlink:8000 or [::1]:8000"


class HostNameError(ValueError):
    """A name no certificate can cover nor a client dial; the message says what is allowed."""


class AddressError(ValueError):
    """A ``HOST:PORT`` no connection can use; the message says what is allowed."""


def parse_ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """Return ``name`` as an IP address, or ``None`` when it is not one."""
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


def check_host_name(name: str) -> str:
    """Return ``name`` if a certificate can cover it (an IP address in its usual form).

    Parameters
    ----------
    name : str
        An IPv4 or IPv6 address, or a DNS host name (:data:`HOST_NAME_RULE`: the
        letters, digits and hyphens of RFC 1123; no wildcard, no trailing dot).

    Raises
    ------
    HostNameError
        When ``name`` is neither; the message says what is allowed.
    """
    ip = parse_ip(name)
    if ip is not None:
        return str(ip)
    labels = name.split(".")
    # A last label of digits only ("300.1.1.1") is a mistyped address, not a name.
    if (
        len(name) <= 253
        and all(_LABEL.fullmatch(label) for label in labels)
        and not labels[-1].isdigit()
    ):
        return name
    shown = repr(name) if len(name) <= 60 else f"{name[:40]!r}... ({len(name)} characters)"
    raise HostNameError(f"{shown} is not {HOST_NAME_RULE}")


def split_address(address: str) -> tuple[str, int]:
    """Split ``HOST:PORT`` into its host and port (what :func:`.superlink.host_port` joins).

    Parameters
    ----------
    address : str
        A host name or IPv4 address, or an IPv6 address in brackets, then a
        port from 1 to 65535: ``superlink:8000``, ``10.0.0.7:8000``, ``[::1]:8000``.

    Raises
    ------
    AddressError
        When ``address`` is not that; the message says what is.
    """
    host, colon, port = address.rpartition(":")
    if not colon or not re.fullmatch(r"[0-9]{1,5}", port) or not 1 <= int(port) <= MAX_PORT:
        raise AddressError(
            f"{address!r} is not HOST:PORT with a port from 1 to {MAX_PORT}, {_ADDRESS_EXAMPLE}"
        )
    bracketed = host.startswith("[") and host.endswith("]")
    if bracketed:
        host = host[1:-1]
    if (":" in host) != bracketed:
        raise AddressError(
            f"{address!r}: an IPv6 address, and only that, goes in brackets, {_ADDRESS_EXAMPLE}"
        )
    try:
        check_host_name(host)
    except HostNameError as exc:
        raise AddressError(f"{address!r}: the host {exc}") from exc
    return host, int(port)
