"""The HTTP server's listening socket."""

from __future__ import annotations

import socket


def test_the_http_socket_sends_small_writes_at_once() -> None:
    """Without TCP_NODELAY, a response written as headers then body waits for the
    client's delayed ACK: about 40 ms added to every request."""
    from jobqueue.server import listen_socket

    sock = listen_socket("127.0.0.1", 0)
    try:
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        sock.listen()
        with socket.create_connection(sock.getsockname()) as client:
            accepted, _ = sock.accept()
            with accepted:
                assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
            assert client.fileno() > 0
    finally:
        sock.close()


def test_the_api_alone_runs_on_uvloop_and_a_worker_never_imports_it() -> None:
    """uvloop costs the API less CPU per request (docs/benchmarks.md); processes with
    workers keep asyncio's loop, and a worker process does not even load uvloop."""
    import subprocess
    import sys

    import uvloop

    from jobqueue.server import Roles, event_loop

    assert event_loop(Roles(api=True, worker=False)) is uvloop.new_event_loop
    assert event_loop(Roles(api=True, worker=True)) is None
    code = (
        "import sys\n"
        "from jobqueue.server import Roles, event_loop\n"
        "assert event_loop(Roles(api=False, worker=True)) is None\n"
        "print('uvloop' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
