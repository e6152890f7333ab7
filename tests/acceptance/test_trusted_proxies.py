"""JOBQUEUE_TRUSTED_PROXIES over real HTTP: a request from a listed proxy is taken as
its X-Forwarded-Proto and X-Forwarded-For say (the dashboard's session cookie is Secure,
the audit log and the failure limit see the forwarded client); from any other address
those headers are ignored. The client's source address picks which: the server
listens on 127.0.0.1, and 127.0.0.2 (loopback too) is the listed proxy."""

from __future__ import annotations

import re

import asyncpg
import httpx
import pytest

from tests.acceptance.test_auth import make_token
from tests.conftest import Spawn

pytestmark = pytest.mark.anyio

PROXY = "127.0.0.2"  # listed in JOBQUEUE_TRUSTED_PROXIES
STRANGER = "127.0.0.1"  # not listed


def client_from(source: str, base: str) -> httpx.AsyncClient:
    """A client whose connections come from ``source``; it keeps no cookies (each
    request below sends the ones it means to)."""
    transport = httpx.AsyncHTTPTransport(local_address=source)
    return httpx.AsyncClient(base_url=base, transport=transport, timeout=30)


async def session_cookie(client: httpx.AsyncClient, token: str, headers: dict[str, str]) -> str:
    """The Set-Cookie of the dashboard's session, after signing in with ``token``."""
    form = await client.get("/ui/login", headers=headers)
    assert form.status_code == 200, form.text
    browser = next(
        c for c in form.headers.get_list("set-cookie") if c.startswith("jobqueue_browser=")
    )
    found = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert found is not None, form.text
    client.cookies.clear()
    signed_in = await client.post(
        "/ui/login",
        data={"csrf": found.group(1), "token": token},
        headers={**headers, "Cookie": browser.split(";")[0]},
    )
    client.cookies.clear()
    assert signed_in.status_code == 303, signed_in.text
    return next(
        c for c in signed_in.headers.get_list("set-cookie") if c.startswith("jobqueue_session=")
    )


def attributes(cookie: str) -> set[str]:
    return {part.strip().split("=")[0].lower() for part in cookie.split(";")[1:]}


async def test_forwarded_headers_count_from_a_listed_proxy_only(
    spawn: Spawn, env: dict[str, str], db: asyncpg.Connection, schema: str
) -> None:
    base = f"http://127.0.0.1:{env['PORT']}"
    server_env = dict(
        env, JOBQUEUE_TRUSTED_PROXIES=f"10.9.0.0/16,{PROXY}", JOBQUEUE_AUTH_MAX_FAILURES="3"
    )
    spawn(["api"], server_env, name="api").wait_http(base)
    admin = await make_token(db, schema, "ops", ["admin"])
    https = {"X-Forwarded-Proto": "https"}

    async with client_from(PROXY, base) as proxy, client_from(STRANGER, base) as stranger:
        # The server reads the tokens at the first request that needs them: then the
        # sign-in form no longer says the dashboard is open.
        auth = {"Authorization": f"Bearer {admin}"}
        assert (await proxy.get("/jobs", headers=auth)).status_code == 200
        # The session cookie is Secure when the listed proxy says the browser used https.
        assert "secure" in attributes(await session_cookie(proxy, admin, https))
        assert "secure" not in attributes(await session_cookie(proxy, admin, {}))
        assert "secure" not in attributes(await session_cookie(stranger, admin, https))
        # The standard Forwarded header is not read, even from the proxy.
        rfc7239 = {"Forwarded": "for=203.0.113.5;proto=https"}
        assert "secure" not in attributes(await session_cookie(proxy, admin, rfc7239))

        # The audit log records the forwarded client of the proxy's request only.
        for client, name, forwarded_for in (
            (proxy, "via-proxy", "203.0.113.9"),
            (stranger, "direct", "203.0.113.8"),
        ):
            created = await client.post(
                "/tokens",
                json={"name": name, "scopes": ["jobs:read"]},
                headers={**auth, "X-Forwarded-For": forwarded_for},
            )
            assert created.status_code == 201, created.text

        # The failure limit counts each forwarded client of the proxy apart, and every
        # request of the stranger as its own, whatever X-Forwarded-For it claims.
        for n in range(5):
            answer = await proxy.get(
                "/jobs",
                headers={"Authorization": "Bearer wrong", "X-Forwarded-For": f"198.51.100.{n}"},
            )
            assert answer.status_code == 401
        statuses = [
            (
                await stranger.get(
                    "/jobs",
                    headers={
                        "Authorization": "Bearer wrong",
                        "X-Forwarded-For": f"198.51.100.{n}",
                    },
                )
            ).status_code
            for n in range(5)
        ]
        assert statuses == [401, 401, 401, 429, 429]

    audited = await db.fetch(
        f"""SELECT target, client FROM "{schema}".audit_log
            WHERE action = 'token.create' ORDER BY id"""
    )
    assert [tuple(r.values()) for r in audited] == [
        ("via-proxy", "203.0.113.9"),
        ("direct", STRANGER),
    ]
