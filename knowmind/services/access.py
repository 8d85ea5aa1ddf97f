"""One guard for every door: REST (the Litestar guard, ``knowmind.api.guards``), MCP
(``knowmind.api.mcp``) and the console (a client of REST) admit a request here, with the same
authentication, lockout, per-token rate limit and scope check. A refusal is an
``AccessRefused`` (401, 403 or 429 with the seconds to wait); each door answers it in its own
shape (a problem body, a JSON-RPC error).

Who is calling: the peer address of the connection, and ``X-Forwarded-For`` only where the peer
is one of the configured trusted proxies (``KNOWMIND_TRUSTED_PROXIES``; none by default). The
address a request is attributed to (the lockout's key, the audit log's ``client``) is then the
first hop from the right that is not a trusted proxy; the audit log also keeps the peer and the
chain as received.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, replace

from knowmind.db.engine import Database
from knowmind.services.auth import (
    Principal,
    authenticate,
    bearer_token,
    parse_token,
    scope_refusal,
)
from knowmind.services.limits import RequestLimits

__all__ = ["AccessControl", "AccessRefused", "Caller", "TrustedProxies"]

# X-Forwarded-For is the client's to write: keep the nearest hops, each cut short
MAX_HOPS = 16
MAX_HOP_CHARS = 64

_Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class AccessRefused(Exception):
    """``status``: 401 (no or an invalid token), 403 (scope) or 429 (``retry_after_s``)."""

    def __init__(self, status: int, detail: str, retry_after_s: float = 0.0) -> None:
        super().__init__(detail)
        self.status, self.detail, self.retry_after_s = status, detail, retry_after_s


@dataclass(frozen=True, slots=True)
class Caller:
    """Where a request comes from: ``client`` is the address it is attributed to."""

    peer: str | None
    client: str | None
    forwarded: tuple[str, ...] = ()


def _address(text: str) -> _Address | None:
    try:
        address = ipaddress.ip_address(text.strip().strip("[]"))
    except ValueError:
        return None
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped if mapped is not None else address


def parse_proxies(spec: str) -> tuple[_Network, ...]:
    """``KNOWMIND_TRUSTED_PROXIES``: comma-separated addresses and CIDRs (ValueError if not)."""
    return tuple(
        ipaddress.ip_network(part.strip(), strict=False) for part in spec.split(",") if part.strip()
    )


class TrustedProxies:
    def __init__(self, spec: str = "") -> None:
        self.networks = parse_proxies(spec)

    def trusts(self, text: str | None) -> bool:
        address = _address(text) if text else None
        if address is None:
            return False
        return any(address.version == n.version and address in n for n in self.networks)

    def caller(self, peer: str | None, forwarded_for: Iterable[str]) -> Caller:
        """The peer, the chain as received, and the client: walking the chain from the right
        while the hop that added an entry is a trusted proxy (an entry that is no address ends
        the walk at that proxy)."""
        hops = [hop.strip() for value in forwarded_for for hop in value.split(",")]
        chain = tuple(hop[:MAX_HOP_CHARS] for hop in hops if hop)[-MAX_HOPS:]
        client = peer
        for hop in reversed(chain):
            if not self.trusts(client) or _address(hop) is None:
                break
            client = hop
        return Caller(peer=peer, client=client, forwarded=chain)


class AccessControl:
    """Authentication, the invalid-token lockout, the per-token rate and the scope, in this
    order; a valid token is looked up and admitted whatever its address sent before (see
    ``knowmind.services.limits.Lockout`` for the one narrow exception)."""

    def __init__(
        self,
        db: Database,
        admin_token: str | None,
        limits: RequestLimits,
        proxies: TrustedProxies | None = None,
    ) -> None:
        self.db, self.admin_token, self.limits = db, admin_token, limits
        self.proxies = proxies or TrustedProxies()

    def caller(self, peer: str | None, forwarded_for: Iterable[str]) -> Caller:
        return self.proxies.caller(peer, forwarded_for)

    async def admit(
        self, authorization: str | None, caller: Caller, needed: str | None = None
    ) -> Principal:
        """The principal of the bearer token in ``authorization``; ``needed``: the scope the
        door needs (None: any valid token, as for MCP, which checks a scope per tool)."""
        token = bearer_token(authorization)
        if token is None:
            raise AccessRefused(401, "missing bearer token")
        lockout = self.limits.lockout
        address = caller.client or "unknown"
        tenant = parse_token(token)
        prefix = tenant.hex if tenant is not None else None
        wait = lockout.before_lookup(address, prefix)
        if wait:
            raise AccessRefused(429, "too many invalid tokens for this tenant from here", wait)
        principal = await authenticate(self.db, token, self.admin_token)
        if principal is None:
            wait = lockout.failed(address, prefix)
            if wait:
                raise AccessRefused(429, "too many invalid tokens", wait)
            raise AccessRefused(401, "invalid or revoked token")
        wait = self.limits.requests.take(str(principal.token_id or "server-admin"))
        if wait:
            raise AccessRefused(429, "request rate of this token exceeded", wait)
        if needed is not None:
            refusal = scope_refusal(principal, needed)
            if refusal is not None:
                raise AccessRefused(403, refusal)
        return replace(
            principal, client=caller.client, peer=caller.peer, forwarded=caller.forwarded
        )
