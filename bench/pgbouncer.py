"""A PgBouncer in transaction pooling mode in front of the bench's server, for the
`*_pgbouncer` workloads (Debian's `pgbouncer` package)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit


@contextlib.contextmanager
def pgbouncer(dsn: str, port: int) -> Iterator[str]:
    """Run PgBouncer on 127.0.0.1:``port`` for the server of ``dsn``; yields ``dsn``
    rewritten to go through it (any database of that server)."""
    binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    if not Path(binary).exists():
        raise SystemExit("jobqueue bench: the *_pgbouncer workloads need pgbouncer installed")
    target = urlsplit(dsn)
    user = unquote(target.username or "postgres")
    with tempfile.TemporaryDirectory(prefix="jqbench-pgbouncer-") as tmp:
        config = Path(tmp) / "pgbouncer.ini"
        config.write_text(
            f"[databases]\n* = host={target.hostname or '127.0.0.1'} "
            f"port={target.port or 5432} user={user}\n"
            f"[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\n"
            "auth_type = any\npool_mode = transaction\ndefault_pool_size = 20\n"
            "max_client_conn = 1000\nunix_socket_dir =\n"
            "ignore_startup_parameters = extra_float_digits\n"
        )
        Path(tmp).chmod(0o755)
        config.chmod(0o644)
        as_root = ["-u", "postgres"] if os.geteuid() == 0 else []
        process = subprocess.Popen([binary, *as_root, str(config)], stdout=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if process.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit("jobqueue bench: pgbouncer did not start") from None
                    time.sleep(0.05)
            netloc = (
                f"{target.username}@127.0.0.1:{port}" if target.username else f"127.0.0.1:{port}"
            )
            yield urlunsplit(target._replace(netloc=netloc))
        finally:
            process.terminate()
            process.wait(10)
