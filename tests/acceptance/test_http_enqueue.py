"""POST /jobs over a real `jobqueue api`, as a server delivers requests: a body in
several parts, one over the limit that has no Content-Length, a client that goes away
halfway, and requests pipelined on one connection (api/enqueue.py reads the body
itself)."""

from __future__ import annotations

import json
import socket

import httpx

from tests.acceptance.test_http import wait_until_read
from tests.conftest import Spawn


def request(body: bytes, *, chunks: int = 1) -> bytes:
    """A POST /jobs; with ``chunks`` > 1, its body in that many chunks, no length."""
    head = b"POST /jobs HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
    if chunks == 1:
        return head + b"Content-Length: %d\r\n\r\n" % len(body) + body
    size = -(-len(body) // chunks)
    parts = [body[i : i + size] for i in range(0, len(body), size)]
    encoded = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts)
    return head + b"Transfer-Encoding: chunked\r\n\r\n" + encoded + b"0\r\n\r\n"


def answers(sock: socket.socket, count: int) -> list[tuple[int, dict[str, object]]]:
    """``count`` answers read from ``sock``: status and JSON body."""
    data, found = b"", []
    while len(found) < count:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if sep:
            lines = head.split(b"\r\n")
            length = next(
                int(line.split(b":")[1])
                for line in lines
                if line.lower().startswith(b"content-length:")
            )
            if len(rest) >= length:
                found.append((int(lines[0].split()[1]), json.loads(rest[:length])))
                data = rest[length:]
                continue
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection"
        data += chunk
    return found


def test_bodies_as_a_server_delivers_them(spawn: Spawn, env: dict[str, str]) -> None:
    env["JOBQUEUE_MAX_REQUEST_BYTES"] = "2000"
    api = spawn(["api"], env, name="api")
    base = f"http://127.0.0.1:{env['PORT']}"
    api.wait_http(base)
    payload = {"text": "x" * 1000, "n": list(range(50))}
    body = json.dumps({"type": "noop", "payload": payload}).encode()

    with socket.create_connection(("127.0.0.1", int(env["PORT"])), timeout=30) as sock:
        # In parts, each read by the server before the next is sent: the server hands
        # them on to the app one at a time.
        whole = request(body, chunks=5)
        for part in (whole[:100], whole[100:700], whole[700:]):
            sock.sendall(part)
            wait_until_read(int(env["PORT"]), sock.getsockname()[1])
        [(status, job)] = answers(sock, 1)
        assert (status, job["payload"]) == (201, payload)

        # Three requests in one write, answered in order on the same connection.
        sock.sendall(request(body) + request(b'{"type": ""}') + request(body, chunks=3))
        assert [status for status, _ in answers(sock, 3)] == [201, 422, 201]

        # Over the limit without a Content-Length: refused as the body arrives.
        sock.sendall(
            request(json.dumps({"type": "noop", "payload": {"x": "y" * 3000}}).encode(), chunks=4)
        )
        [(status, refused)] = answers(sock, 1)
        assert status == 413
        assert "JOBQUEUE_MAX_REQUEST_BYTES" in refused["detail"][0]["msg"]  # type: ignore[index]

    # A client that leaves before the end of its body stores nothing, and harms nothing.
    with socket.create_connection(("127.0.0.1", int(env["PORT"])), timeout=30) as sock:
        whole = request(body)
        sock.sendall(whole[: len(whole) - 10])
    answer = httpx.post(f"{base}/jobs", json={"type": "after"})
    assert answer.status_code == 201
    stored = httpx.get(f"{base}/jobs").json()["jobs"]
    assert [job["type"] for job in stored] == ["after", "noop", "noop", "noop"]
    assert api.stop() == 0, api.output
