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
