"""Bearer tokens: issuing, parsing and authenticating them."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from uuid import UUID

from knowmind.db.engine import Database
from knowmind.db.tenant_scope import UserScope
from knowmind.errors import ForbiddenError, InvalidInputError
from knowmind.store import tokens as token_store

__all__ = [
    "SCOPES",
    "SERVER_ADMIN",
    "Principal",
    "authenticate",
    "bearer_token",
    "new_token",
    "parse_token",
    "refuse_unless_owner",
    "scope_refusal",
    "tenant_of",
    "user_bound_refusal",
]

SCOPES = ("read", "write", "admin")
#: The scope of endpoints only the server admin token may call (tenant management).
SERVER_ADMIN = "server_admin"
# New tokens start "kmt_", as knowmind's clients expect (its CLI refuses any other); tokens
# issued before with "km_" keep working.
TOKEN_PREFIX = "kmt"
TOKEN_PREFIXES = frozenset({"kmt", "km"})


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling. ``tenant_id`` is None for the server admin."""

    tenant_id: UUID | None
    scopes: frozenset[str]
    language: str = "german"
    token_id: UUID | None = None
    client: str | None = None  # the caller's address (the forwarded one behind a trusted proxy)
    peer: str | None = None  # the address the connection came from
    forwarded: tuple[str, ...] = ()  # X-Forwarded-For as received, trusted or not
    # a token bound to one end user of the tenant: it writes that user's memories and reads
    # them and the tenant's shared ones (row-level security, see ``tenant_of``)
    user_id: str | None = None

    @property
    def is_server_admin(self) -> bool:
        return self.tenant_id is None

    def allows(self, scope: str) -> bool:
        """Scopes are ordered: admin implies write, write implies read."""
        granted = {SCOPES.index(s) for s in self.scopes if s in SCOPES}
        return bool(granted) and max(granted) >= SCOPES.index(scope)


def tenant_of(who: Principal) -> UUID:
    """The caller's tenant; the server admin token carries none. For a user-bound token, the
    tenant id as a ``UserScope``: every connection opened with it is held to that user's
    memories and the tenant's shared ones by row-level security."""
    if who.tenant_id is None:
        raise InvalidInputError("authorization", "this operation needs a tenant token")
    if who.user_id is not None:
        return UserScope(who.tenant_id, who.user_id)
    return who.tenant_id


def refuse_unless_owner(who: Principal, owner: str | None, what: str) -> None:
    """A user-bound token changes or erases only its user's memories: the tenant's shared ones
    (``owner`` None) it reads but may not touch (ForbiddenError). Row-level security refuses
    the same; this says so before anything else in the transaction is changed."""
    if who.user_id is not None and owner != who.user_id:
        raise ForbiddenError(f"a user-bound token cannot change {what} it does not own")


def user_bound_refusal(who: Principal) -> str | None:
    """Why ``who`` may not use a door that changes what the whole tenant shares (documents,
    the graph and its catalogue, the tenant's settings); None when it may."""
    if who.user_id is None:
        return None
    return "a user-bound token cannot change what the whole tenant shares"


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header; None when absent or malformed."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def scope_refusal(principal: Principal, needed: str) -> str | None:
    """Why ``principal`` may not use something that needs ``needed``; None when it may.

    The server admin token only manages tenants (``SERVER_ADMIN``); tenant tokens need the
    scope (admin implies write implies read). REST answers a refusal with 403, MCP with a
    tool error.
    """
    if needed == SERVER_ADMIN:
        return None if principal.is_server_admin else "this endpoint needs the server admin token"
    if principal.is_server_admin:
        return "the admin token manages tenants; use a tenant token"
    if not principal.allows(needed):
        return f"token lacks the {needed!r} scope"
    return None


def hash_token(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def new_token(tenant_id: UUID) -> str:
    """``kmt_<tenant hex>_<secret>``: the tenant part lets lookups stay within one tenant."""
    return f"{TOKEN_PREFIX}_{tenant_id.hex}_{secrets.token_urlsafe(32)}"


def parse_token(token: str) -> UUID | None:
    parts = token.split("_", 2)
    if len(parts) != 3 or parts[0] not in TOKEN_PREFIXES or len(parts[2]) < 16:
        return None
    try:
        return UUID(hex=parts[1])
    except ValueError:
        return None


def new_admin_token() -> str:
    return f"kmadmin_{secrets.token_urlsafe(32)}"


async def authenticate(db: Database, token: str, admin_token: str | None) -> Principal | None:
    if admin_token and hmac.compare_digest(hash_token(token), hash_token(admin_token)):
        return Principal(tenant_id=None, scopes=frozenset({"admin"}))
    tenant_id = parse_token(token)
    if tenant_id is None:
        return None
    async with db.app_tx() as conn:
        found = await token_store.authenticate(conn, tenant_id, hash_token(token))
    if found is None:
        return None
    token_id, scopes, language, user_id = found
    return Principal(
        tenant_id, frozenset(scopes), language=language, token_id=token_id, user_id=user_id
    )
