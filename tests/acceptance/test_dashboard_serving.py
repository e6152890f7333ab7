"""`jobqueue api` and `jobqueue serve` serve the dashboard at /ui, and a dashboard's
open live stream does not hold a stopping server up."""

from __future__ import annotations

import time

import httpx

from tests.conftest import Spawn


def test_api_serves_the_dashboard_and_stops_with_a_live_stream_open(
    env: dict[str, str], spawn: Spawn
) -> None:
    server = spawn(["api"], env)
    base = f"http://127.0.0.1:{env['PORT']}"
    server.wait_http(base)
    page = httpx.get(f"{base}/ui/")
    assert page.status_code == 200
    assert "<h1>Queues</h1>" in page.text
    assert "unsafe-inline" not in page.headers["content-security-policy"]
    assert httpx.get(f"{base}/ui/static/ui.css").headers["content-type"].startswith("text/css")

    with httpx.stream("GET", f"{base}/ui/events", timeout=30) as events:
        assert events.headers["content-type"].startswith("text/event-stream")
        chunks = events.iter_text()
        assert next(chunks).startswith("retry:")
        assert "event: change" in next(chunks)  # the first reading of the counters
        began = time.monotonic()
        server.popen.terminate()
        assert server.popen.wait(30) == 0
    assert time.monotonic() - began < 5, server.output
