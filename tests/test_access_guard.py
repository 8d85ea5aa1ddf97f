"""One guard for every door (REST, MCP, the console's REST calls) and a lockout that cannot be
turned against users (issue 42, items 3 and 4): the lockout's arithmetic and the trusted-proxy
rule as unit tests, then an app with tight limits behind the real ASGI stack, called from chosen
peer addresses, then `knowmind serve` over real HTTP, where uvicorn decides the peer."""

from __future__ import annotations

import asyncio
import secrets
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient
from litestar.testing import transport as litestar_transport

from knowmind.app import create_app
from knowmind.services.access import TrustedProxies
from knowmind.services.limits import Lockout, LockoutPolicy
from knowmind.settings import Settings, SettingsError
from tests.conftest import ADMIN_HEADERS, count_rows, make_tenant

MCP = "/api/mcp/v1"
PROXY_NET = "10.9.0.0/16"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def forged(tenant_id: str | uuid.UUID) -> dict[str, str]:
    """A well-formed token naming ``tenant_id`` with a secret nobody issued."""
    hexed = uuid.UUID(str(tenant_id)).hex
    return {"Authorization": f"Bearer kmt_{hexed}_{secrets.token_urlsafe(32)}"}


def garbage(i: int) -> dict[str, str]:
    return {"Authorization": f"Bearer km_guess_{i}"}


# -- units -----------------------------------------------------------------------------------


def test_the_lockout_counts_per_address_and_per_prefix():
    clock = FakeClock()
    lockout = Lockout(LockoutPolicy(threshold=3, window_s=60, lockout_s=30, clock=clock))
    # invalid tokens without a prefix: the address only; the 4th is answered 429
    assert [lockout.failed("a", None) for _ in range(4)][:3] == [0, 0, 0]
    assert lockout.addresses.locked_for("a") == pytest.approx(30)
    assert lockout.before_lookup("a", "t1") == 0  # a locked address is still looked up
    # guesses at tenant t1 from b: t1 locks after three, then b is refused before a lookup
    assert [lockout.failed("b", "t1") for _ in range(3)] == [0, 0, 0]
    assert lockout.prefixes.locked_for("t1") == pytest.approx(30)
    assert lockout.before_lookup("b", "t1") == pytest.approx(30)
    assert lockout.before_lookup("c", "t1") == 0  # c never guessed at t1
    assert lockout.before_lookup("b", "t2") == 0  # nor is b refused for another tenant
    # c's first guess at the locked tenant is looked up (and answered 429), then refused early
    assert lockout.failed("c", "t1") == pytest.approx(30)
    assert lockout.before_lookup("c", "t1") > 0
    clock.now += 31
    assert lockout.before_lookup("b", "t1") == 0  # the tenant's lock lapsed
    assert Lockout(LockoutPolicy(threshold=0)).failed("a", "t") == 0  # 0: never


def test_a_pair_is_refused_early_only_within_the_window():
    clock = FakeClock()
    lockout = Lockout(LockoutPolicy(threshold=2, window_s=60, lockout_s=300, clock=clock))
    for _ in range(2):
        lockout.failed("b", "t1")
    assert lockout.before_lookup("b", "t1") == pytest.approx(60)
    clock.now += 61  # one try per window per address while the tenant stays locked
    assert lockout.before_lookup("b", "t1") == 0
    assert lockout.failed("b", "t1") > 0
    assert lockout.before_lookup("b", "t1") == pytest.approx(60)


def test_forwarded_for_is_believed_only_from_trusted_proxies():
    none = TrustedProxies("")
    caller = none.caller("127.0.0.1", ["203.0.113.5"])
    assert (caller.client, caller.peer, caller.forwarded) == (
        "127.0.0.1",
        "127.0.0.1",
        ("203.0.113.5",),
    )
    proxies = TrustedProxies(f"{PROXY_NET}, 127.0.0.1,::1")
    chain = ["198.51.100.7, 203.0.113.5", "10.9.0.2"]
    caller = proxies.caller("10.9.0.1", chain)
    assert caller.client == "203.0.113.5"  # the first hop from the right no proxy of ours
    assert caller.forwarded == ("198.51.100.7", "203.0.113.5", "10.9.0.2")
    assert proxies.caller("10.8.0.1", chain).client == "10.8.0.1"  # not a proxy of ours
    assert proxies.caller("::1", ["2001:db8::7"]).client == "2001:db8::7"
    assert proxies.caller("10.9.0.1", ["nonsense"]).client == "10.9.0.1"
    assert proxies.caller("10.9.0.1", []).client == "10.9.0.1"
    assert proxies.caller("127.0.0.1", ["10.9.0.3"]).client == "10.9.0.3"  # all proxies
    long = proxies.caller("10.9.0.1", [",".join(["192.0.2.1"] * 100), "x" * 500])
    assert len(long.forwarded) == 16 and len(long.forwarded[-1]) == 64
    with pytest.raises(SettingsError, match="TRUSTED_PROXIES"):
        Settings.from_env({"KNOWMIND_TRUSTED_PROXIES": "10.0.0.0/8, proxy.local"})
    assert Settings.from_env({"KNOWMIND_TRUSTED_PROXIES": "10.0.0.0/8"}).server.trusted_proxies


# -- every door, in-process ------------------------------------------------------------------


@pytest.fixture(scope="module")
async def guarded(settings, embedder) -> AsyncIterator[AsyncTestClient[Litestar]]:
    """An app with tight limits (served on the test client's own loop, see ``peer``)."""
    tight = settings.with_overrides(
        rate_limit_per_second=0.05,
        rate_limit_burst=5,
        auth_failures_before_lockout=3,
        trusted_proxies=PROXY_NET,
    )
    app = create_app(tight, embedder=embedder)
    async with AsyncTestClient(app=app) as lifespan:
        for _ in range(600):
            if (await lifespan.get("/ready")).status_code == 200:
                break
            await asyncio.sleep(0.05)
        yield lifespan


class _FromAddress(
    litestar_transport.TestClientTransport[AsyncTestClient[Litestar]], httpx.AsyncBaseTransport
):
    def __init__(self, client: AsyncTestClient[Litestar], address: str) -> None:
        super().__init__(client)
        self.address = address

    def parse_request(self, request: httpx.Request) -> dict[str, Any]:
        scope = super().parse_request(request)
        scope["client"] = (self.address, 40000)
        return scope


def peer(guarded: AsyncTestClient[Litestar], address: str) -> httpx.AsyncClient:
    """A client of the guarded app whose connections come from ``address``."""
    transport = _FromAddress(guarded, address)
    return httpx.AsyncClient(transport=transport, base_url="http://testserver")


async def rpc(
    c: httpx.AsyncClient, headers: dict[str, str], method: str, params: Any = None
) -> httpx.Response:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": method}
    if params is not None:
        body["params"] = params
    return await c.post(MCP, json=body, headers=headers)


async def tool(c: httpx.AsyncClient, headers: dict[str, str], name: str, **arguments: Any):
    return await rpc(c, headers, "tools/call", {"name": name, "arguments": arguments})


def refused_429(response: httpx.Response, at_least_s: int = 1, mcp: bool = False) -> bool:
    if response.status_code != 429 or int(response.headers["retry-after"]) < at_least_s:
        return False
    return not mcp or response.json()["error"]["code"] == -32029


async def test_mcp_tool_calls_over_the_token_rate_get_429(client, guarded):
    first, second = await make_tenant(client), await make_tenant(client)
    async with peer(guarded, "10.1.0.1") as c:
        answers = [await tool(c, first.read, "knowmind_get_schema") for _ in range(6)]
        assert [a.status_code for a in answers] == [200] * 5 + [429]
        assert refused_429(answers[-1], mcp=True)
        assert answers[-1].json()["id"] is None and answers[-1].json()["jsonrpc"] == "2.0"
        # one bucket per token, whichever door: REST refuses it too; another token is served
        assert refused_429(await c.get("/v1/memories", headers=first.read))
        assert (await tool(c, second.read, "knowmind_get_schema")).status_code == 200


async def test_the_console_calls_are_limited_like_any_rest_call(client, guarded):
    """The console has no API of its own: its page calls REST (``/v1/stats`` first)."""
    console = await make_tenant(client)
    async with peer(guarded, "10.1.0.8") as c:
        assert (await c.get("/ui")).status_code == 200
        answers = [(await c.get("/v1/stats", headers=console.read)).status_code for _ in range(6)]
        assert answers == [200] * 5 + [429]


async def test_mcp_locks_out_invalid_tokens_and_a_locked_address_stores_nothing(
    client, guarded, db
):
    victim = await make_tenant(client)
    async with peer(guarded, "10.1.0.2") as c:
        answers = [await rpc(c, garbage(i), "tools/list") for i in range(4)]
        assert [a.status_code for a in answers] == [401, 401, 401, 429]
        assert answers[0].json()["error"]["code"] == -32001
        assert refused_429(answers[-1], at_least_s=29, mcp=True)
        stored = await tool(
            c, forged(victim.id), "knowmind_store_memory", content="Eingeschmuggelt."
        )
        assert refused_429(stored, mcp=True)
        assert refused_429(await c.get("/v1/memories", headers=garbage(9)))  # one lockout, both
    assert await count_rows(db, "memories", victim.id) == 0


async def test_valid_tokens_and_the_admin_token_pass_from_an_address_that_sent_bad_ones(
    client, guarded
):
    tenant, other = await make_tenant(client), await make_tenant(client)
    async with peer(guarded, "10.1.0.3") as c:
        bad = [
            await c.get("/v1/memories", headers=garbage(i))
            if i % 2
            else await rpc(c, forged(other.id if i % 4 else uuid.uuid4()), "ping")
            for i in range(10)
        ]
        assert [b.status_code for b in bad] == [401, 401, 401] + [429] * 7
        assert (await c.get("/v1/memories", headers=tenant.read)).status_code == 200
        assert (await c.get("/v1/admin/tenants", headers=ADMIN_HEADERS)).status_code == 200
        listed = await rpc(c, tenant.read, "tools/list")
        assert listed.status_code == 200 and listed.json()["result"]["tools"]
        assert (await rpc(c, ADMIN_HEADERS, "ping")).json()["result"] == {}
        assert (await c.get("/v1/memories", headers=garbage(11))).status_code == 429


async def test_guessing_at_one_tenant_is_bounded_per_address_and_tenant(client, guarded):
    victim, bystander = await make_tenant(client), await make_tenant(client)
    async with peer(guarded, "10.1.0.4") as guesser, peer(guarded, "10.1.0.5") as elsewhere:
        guesses = [await guesser.get("/v1/memories", headers=forged(victim.id)) for _ in range(4)]
        assert [g.status_code for g in guesses] == [401, 401, 401, 429]
        # the victim's own token works from any other address, the bystander's from anywhere
        assert (await elsewhere.get("/v1/memories", headers=victim.read)).status_code == 200
        assert (await guesser.get("/v1/memories", headers=bystander.read)).status_code == 200
        # the one narrow exception: the address that guesses at this tenant, while it is locked
        assert refused_429(await guesser.get("/v1/memories", headers=victim.read))
        # another address guessing at the locked tenant: one try looked up, then refused early
        assert refused_429(await elsewhere.get("/v1/memories", headers=forged(victim.id)))
        assert refused_429(await elsewhere.get("/v1/memories", headers=victim.write))


async def test_forwarded_for_counts_only_from_a_trusted_proxy(client, guarded):
    async with peer(guarded, "10.1.0.6") as direct, peer(guarded, "10.9.0.1") as proxy:
        # a client that names itself anew each time is still one address
        spoofed = [
            await direct.get(
                "/v1/memories", headers=garbage(i) | {"X-Forwarded-For": f"192.0.2.{i}"}
            )
            for i in range(4)
        ]
        assert [s.status_code for s in spoofed] == [401, 401, 401, 429]
        # behind our proxy each forwarded client has its own count
        via = [
            await proxy.get("/v1/memories", headers=garbage(i) | {"X-Forwarded-For": "192.0.2.50"})
            for i in range(4)
        ]
        assert [v.status_code for v in via] == [401, 401, 401, 429]
        other = {"X-Forwarded-For": "192.0.2.50, 192.0.2.51"}
        assert (await proxy.get("/v1/memories", headers=garbage(5) | other)).status_code == 401


async def test_the_audit_log_records_peer_and_forwarded_chain_apart(client, guarded):
    tenant = await make_tenant(client)
    chain = {"X-Forwarded-For": "198.51.100.7, 203.0.113.5, 10.9.0.2"}
    claim = {"X-Forwarded-For": "203.0.113.99"}
    for address, forwarded in (("10.9.0.1", chain), ("10.1.0.7", claim)):
        async with peer(guarded, address) as c:
            stored = await c.post(
                "/v1/memories", json={"content": "Prüfpfad."}, headers=tenant.write | forwarded
            )
            assert stored.status_code == 201, stored.text
            erased = await c.delete(
                f"/v1/memories/{stored.json()['id']}?erase=true", headers=tenant.write | forwarded
            )
            assert erased.status_code == 200, erased.text
    listed = await client.get(
        "/v1/admin/audit", params={"tenant_id": tenant.id}, headers=ADMIN_HEADERS
    )
    entries = [e for e in listed.json() if e["action"] == "memory.erase"]
    seen = [(e["client"], e["peer"], e["forwarded"]) for e in reversed(entries)]
    assert seen == [
        ("203.0.113.5", "10.9.0.1", ["198.51.100.7", "203.0.113.5", "10.9.0.2"]),
        ("10.1.0.7", "10.1.0.7", ["203.0.113.99"]),
    ]


def test_every_route_is_public_by_intent_or_guarded(settings):
    """Handlers without a scope are the public ones below; the MCP endpoint admits its callers
    through the same ``AccessControl`` as the REST guard (tested above)."""
    public = {
        ("GET", "/"),
        ("GET", "/health"),
        ("GET", "/ready"),
        ("GET", "/v1/capabilities"),
        ("GET", "/ui"),
        ("GET", "/ui/static/{name:str}"),
        ("GET", "/ui/static/vendor/{name:str}"),  # the console's vendored libraries
        ("GET", "/schema"),
        ("GET", "/schema/reference"),
        ("GET", "/schema/openapi.json"),
        ("GET", "/schema/{path:str}"),
        ("GET", MCP),
        ("DELETE", MCP),
        ("POST", MCP),
    }
    unguarded = {
        (method, route.path)
        for route in create_app(settings).routes
        for handler in getattr(route, "route_handlers", [])
        if handler.opt.get("scope") is None
        for method in handler.http_methods
        if method != "OPTIONS"
    }
    assert unguarded == public


# -- the real server: uvicorn decides the peer -----------------------------------------------


@pytest.mark.slow
def test_served_process_believes_forwarded_for_only_from_trusted_proxies(tmp_path: Path):
    from tests.test_server_process import served, tenant_token

    admin_token = f"kmadmin_{secrets.token_urlsafe(32)}"
    admin = {"Authorization": f"Bearer {admin_token}"}

    def erase_one(base: str, token: str, forwarded: str) -> dict[str, Any]:
        """Store and erase a memory with ``X-Forwarded-For: forwarded``; its audit entry."""
        headers = {"Authorization": f"Bearer {token}", "X-Forwarded-For": forwarded}
        stored = httpx.post(f"{base}/v1/memories", json={"content": "Spur."}, headers=headers)
        assert stored.status_code == 201, stored.text
        memory = stored.json()["id"]
        erased = httpx.delete(f"{base}/v1/memories/{memory}?erase=true", headers=headers)
        assert erased.status_code == 200, erased.text
        entries = httpx.get(f"{base}/v1/admin/audit", headers=admin).json()
        return next(e for e in entries if e["targets"] == [memory])

    with served(tmp_path, admin_token, auth_failures_before_lockout="10") as base:
        token = tenant_token(base, admin_token, "acme", ["read", "write"])
        # rotating X-Forwarded-For does not dodge the lockout: the peer is the client
        bad = [
            httpx.get(
                f"{base}/v1/memories",
                headers=garbage(i) | {"X-Forwarded-For": f"192.0.2.{i}"},
            ).status_code
            for i in range(11)
        ]
        assert bad == [401] * 10 + [429]
        # and a valid token, and the admin token, still pass from that address (REST and MCP)
        valid = {"Authorization": f"Bearer {token}"}
        assert httpx.get(f"{base}/v1/memories", headers=valid).status_code == 200
        assert httpx.get(f"{base}/v1/admin/tenants", headers=admin).status_code == 200
        for headers in (valid, admin):
            pinged = httpx.post(
                f"{base}{MCP}", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=headers
            )
            assert pinged.status_code == 200 and pinged.json()["result"] == {}
        entry = erase_one(base, token, "203.0.113.9")
        assert (entry["client"], entry["peer"], entry["forwarded"]) == (
            "127.0.0.1",
            "127.0.0.1",
            ["203.0.113.9"],
        )

    settings = {"trusted_proxies": "127.0.0.1", "auth_failures_before_lockout": "3"}
    with served(tmp_path, admin_token, **settings) as base:
        entry = erase_one(base, token, "198.51.100.1, 203.0.113.9")
        assert (entry["client"], entry["peer"], entry["forwarded"]) == (
            "203.0.113.9",
            "127.0.0.1",
            ["198.51.100.1", "203.0.113.9"],
        )
        # behind a trusted proxy each forwarded client has its own count
        for address, expected in (("192.0.2.60", [401, 401, 401, 429]), ("192.0.2.61", [401])):
            answers = [
                httpx.get(
                    f"{base}/v1/memories", headers=garbage(i) | {"X-Forwarded-For": address}
                ).status_code
                for i in range(len(expected))
            ]
            assert answers == expected
