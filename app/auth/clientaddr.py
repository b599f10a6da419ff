"""Who is on the other end of a connection: client address, scheme and host, believing proxies only if trusted.

A reverse proxy (nginx, Caddy, a load balancer) connects to us itself and names the real client in
`X-Forwarded-For`, the scheme it was reached by in `X-Forwarded-Proto` and the host in `X-Forwarded-Host`.
Anyone can send those headers, so they are read only when the TCP peer is one of
`CLUSTERPLAN_TRUSTED_PROXIES` (comma-separated IP addresses or CIDR networks; empty by default: the peer is
the client). `X-Forwarded-For` is read from the right, skipping trusted proxies, so a client cannot pick its
own address by sending the header itself (each proxy appends the address it received the request from).

Every module that needs the client's address (rate limits, sign-in throttling, logs) or scheme (cookies)
asks here.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from typing import Any

from starlette.requests import HTTPConnection

from app.settings import Settings, get_settings

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

SCHEMES = frozenset({"http", "https"})
# Starlette's TestClient reports this peer/host; it can never be a real socket address.
_TEST_CLIENT_NAMES = frozenset({"testclient", "testserver"})
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


def parse_networks(value: str) -> tuple[Network, ...]:
    """'10.0.0.1, 192.168.0.0/16, ::1' → networks; raises ValueError naming the first bad entry."""
    networks: list[Network] = []
    for entry in (part.strip() for part in value.split(",")):
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError as exc:
            raise ValueError(
                f"CLUSTERPLAN_TRUSTED_PROXIES: {entry!r} is not an IP address or CIDR network"
            ) from exc
    return tuple(networks)


@lru_cache(maxsize=16)
def _networks(value: str) -> tuple[Network, ...]:
    return parse_networks(value)


def parse_address(value: str | None) -> Address | None:
    """An IP address from a header or socket value ('[::1]', '10.0.0.1', 'fe80::1%eth0'), else None."""
    if not value:
        return None
    text = value.strip().strip('"').strip("[]").split("%", 1)[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def is_trusted_proxy(host: str | None, settings: Settings) -> bool:
    address = parse_address(host)
    return address is not None and any(address in net for net in _networks(settings.trusted_proxies))


def settings_of(conn: HTTPConnection) -> Settings:
    """The settings of the app serving `conn` (tests build apps with their own), else the global ones."""
    app: Any = conn.scope.get("app")
    settings = getattr(getattr(app, "state", None), "settings", None)
    return settings if isinstance(settings, Settings) else get_settings()


def peer_address(conn: HTTPConnection) -> str:
    return conn.client.host if conn.client else ""


def _header_values(conn: HTTPConnection, name: str) -> list[str]:
    """Every comma-separated value of every `name` header, in order."""
    values: list[str] = []
    for raw in conn.headers.getlist(name):
        values.extend(part.strip() for part in raw.split(","))
    return [v for v in values if v]


def client_address(conn: HTTPConnection, settings: Settings | None = None) -> str:
    """The client's IP address: the peer, or, behind trusted proxies, the first untrusted X-Forwarded-For hop."""
    settings = settings or settings_of(conn)
    client = peer_address(conn)
    if not is_trusted_proxy(client, settings):
        return client
    for hop in reversed(_header_values(conn, "x-forwarded-for")):
        address = parse_address(hop)
        if address is None:
            break  # garbage a client wrote before the first trusted proxy: stop at the last good hop
        client = str(address)
        if not is_trusted_proxy(client, settings):
            break
    return client


def _first_forwarded(conn: HTTPConnection, name: str, settings: Settings) -> str | None:
    if not is_trusted_proxy(peer_address(conn), settings):
        return None
    values = _header_values(conn, name)
    return values[0] if values else None


def request_scheme(conn: HTTPConnection, settings: Settings | None = None) -> str:
    """'https' or 'http' as the browser sees it: X-Forwarded-Proto from a trusted proxy, else the socket's."""
    settings = settings or settings_of(conn)
    forwarded = (_first_forwarded(conn, "x-forwarded-proto", settings) or "").lower()
    return forwarded if forwarded in SCHEMES else conn.url.scheme


def request_host(conn: HTTPConnection, settings: Settings | None = None) -> str:
    """The host (with port) the browser asked for: X-Forwarded-Host from a trusted proxy, else Host."""
    settings = settings or settings_of(conn)
    return _first_forwarded(conn, "x-forwarded-host", settings) or conn.headers.get("host", "")


def request_origin(conn: HTTPConnection, settings: Settings | None = None) -> str:
    settings = settings or settings_of(conn)
    return f"{request_scheme(conn, settings)}://{request_host(conn, settings)}".lower()


def is_loopback_address(host: str | None) -> bool:
    """True for 127.0.0.0/8, ::1, 'localhost' and the TestClient's pseudo address."""
    if not host:
        return False
    name = host.strip().strip("[]").lower()
    if name in _LOOPBACK_NAMES or name in _TEST_CLIENT_NAMES or name.endswith(".localhost"):
        return True
    address = parse_address(name)
    return address is not None and address.is_loopback


def is_loopback_client(conn: HTTPConnection, settings: Settings | None = None) -> bool:
    """The client (after trusted proxies) is this machine."""
    return is_loopback_address(client_address(conn, settings))
