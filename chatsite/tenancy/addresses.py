"""The client's address, seen through the proxies we trust.

Behind a load balancer every request comes from the balancer's address, so
REMOTE_ADDR alone would make all users one. X-Forwarded-For is read only when
the peer is a trusted proxy (CHATSITE["TRUSTED_PROXIES"], addresses or networks),
and right to left: each trusted hop appended the address it saw, so the first
address from the right that is not a trusted proxy is the client. Anything to
the left of it was written by the client itself and is ignored.
"""
import ipaddress
from functools import lru_cache

from django.conf import settings

MAX_HOPS = 20  # a longer header is someone else's invention; read no further


@lru_cache(maxsize=8)
def _networks(spec: tuple[str, ...]) -> tuple:
    return tuple(ipaddress.ip_network(item.strip(), strict=False) for item in spec if item.strip())


def _parse(value: str):
    value = value.strip()
    if value.startswith("[") and "]" in value:  # [v6]:port
        value = value[1:value.index("]")]
    elif value.count(":") == 1:  # v4:port
        value = value.split(":", 1)[0]
    try:
        return ipaddress.ip_address(value)
    except ValueError:
        return None


def _trusted(address, networks) -> bool:
    return address is not None and any(address in net for net in networks)


def client_address(remote_addr: str | None, forwarded_for: str | None = None) -> str:
    """The client's address for a request from `remote_addr` carrying this X-Forwarded-For."""
    networks = _networks(tuple(settings.CHATSITE.get("TRUSTED_PROXIES", ())))
    peer = _parse(remote_addr or "")
    if not forwarded_for or not _trusted(peer, networks):
        return str(peer) if peer is not None else (remote_addr or "unknown")[:64]
    client = peer
    for hop in reversed(forwarded_for.split(",")[-MAX_HOPS:]):
        address = _parse(hop)
        if address is None:  # a trusted proxy wrote something that is not an address: stop at the last good hop
            break
        client = address
        if not _trusted(address, networks):
            break
    return str(client)


def request_address(request) -> str:
    """client_address() of a Django request."""
    meta = request.META
    return client_address(meta.get("REMOTE_ADDR"), meta.get("HTTP_X_FORWARDED_FOR"))
