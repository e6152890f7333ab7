"""HTTPS from `jobqueue api` itself (JOBQUEUE_TLS_CERT / JOBQUEUE_TLS_KEY), with a
certificate authority made for the test: trusted, it works; plain HTTP and clients that
do not trust it are refused; unusable files stop start-up in one line."""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx
import pytest
import trustme

from tests.conftest import Spawn, jobqueue


@pytest.fixture
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def server_files(ca: trustme.CA, tmp_path: Path) -> tuple[Path, Path]:
    cert = ca.issue_cert("127.0.0.1", "localhost")
    chain, key = tmp_path / "server.pem", tmp_path / "server.key"
    cert.private_key_pem.write_to_path(str(key))
    chain.write_bytes(b"".join(blob.bytes() for blob in cert.cert_chain_pems))
    return chain, key


def test_the_api_serves_https_to_clients_that_trust_its_ca_only(
    env: dict[str, str], spawn: Spawn, ca: trustme.CA, server_files: tuple[Path, Path]
) -> None:
    chain, key = server_files
    env.update(JOBQUEUE_TLS_CERT=str(chain), JOBQUEUE_TLS_KEY=str(key))
    server = spawn(["api"], env)
    port = env["PORT"]
    url = f"https://127.0.0.1:{port}"
    server.wait_for_output(f"Serving HTTP on {url} (the dashboard: {url}/ui)")

    trusting = ssl.create_default_context()
    ca.configure_trust(trusting)
    with httpx.Client(base_url=f"https://127.0.0.1:{port}", verify=trusting) as client:
        created = client.post("/jobs", json={"type": "noop"})
        assert created.status_code == 201
        assert client.get(f"/jobs/{created.json()['id']}").json()["status"] == "pending"

    # No plain-HTTP answer on the HTTPS port: uvicorn drops the connection.
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)

    # A client with only the system's authorities refuses the certificate.
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"https://127.0.0.1:{port}/healthz", timeout=5)
    assert server.stop() == 0


def test_unusable_tls_files_stop_start_up_in_one_line(
    env: dict[str, str], ca: trustme.CA, server_files: tuple[Path, Path], tmp_path: Path
) -> None:
    chain, key = server_files
    other_key = tmp_path / "other.key"
    ca.issue_cert("127.0.0.1").private_key_pem.write_to_path(str(other_key))
    garbled = tmp_path / "garbled.pem"
    garbled.write_text("not a certificate\n")
    cases = {
        "cert alone": (
            {"JOBQUEUE_TLS_CERT": str(chain)},
            "JOBQUEUE_TLS_CERT is set but JOBQUEUE_TLS_KEY is not: HTTPS needs both",
        ),
        "key alone": (
            {"JOBQUEUE_TLS_KEY": str(key)},
            "JOBQUEUE_TLS_KEY is set but JOBQUEUE_TLS_CERT is not: HTTPS needs both",
        ),
        "missing file": (
            {"JOBQUEUE_TLS_CERT": str(tmp_path / "nope.pem"), "JOBQUEUE_TLS_KEY": str(key)},
            f"JOBQUEUE_TLS_CERT: cannot read {tmp_path / 'nope.pem'}: No such file or directory",
        ),
        "another certificate's key": (
            {"JOBQUEUE_TLS_CERT": str(chain), "JOBQUEUE_TLS_KEY": str(other_key)},
            f"JOBQUEUE_TLS_KEY {other_key} is not the key of JOBQUEUE_TLS_CERT {chain}",
        ),
        "not PEM": (
            {"JOBQUEUE_TLS_CERT": str(garbled), "JOBQUEUE_TLS_KEY": str(key)},
            f"cannot use JOBQUEUE_TLS_CERT {garbled} with JOBQUEUE_TLS_KEY {key}: ",
        ),
    }
    for case, (variables, message) in cases.items():
        done = jobqueue({**env, **variables}, "api")
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2, (case, done.stderr)
        assert len(lines) == 1, (case, done.stderr)
        assert lines[0].startswith(f"jobqueue: error: {message}"), (case, lines)
        assert "Serving HTTP" not in done.stdout + done.stderr, case
