"""HTTPS for the HTTP API: the certificate and key of JOBQUEUE_TLS_CERT / JOBQUEUE_TLS_KEY,
checked before anything is served.

uvicorn would only find a missing file, a key of another certificate or a garbled PEM
once it starts serving, after the database and the workers: here each is one line at
start-up, before the process touches anything.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from jobqueue.config import ConfigError, Settings


@dataclass(frozen=True)
class TlsFiles:
    cert: str
    key: str


def tls_files(settings: Settings) -> TlsFiles | None:
    """The files to serve HTTPS with, checked (None: plain HTTP); ConfigError if unusable."""
    cert, key = settings.tls_cert, settings.tls_key
    if cert is None and key is None:
        return None
    if key is None:
        raise ConfigError("JOBQUEUE_TLS_CERT is set but JOBQUEUE_TLS_KEY is not: HTTPS needs both")
    if cert is None:
        raise ConfigError("JOBQUEUE_TLS_KEY is set but JOBQUEUE_TLS_CERT is not: HTTPS needs both")
    files = TlsFiles(cert, key)
    check(files)
    return files


def check(files: TlsFiles) -> None:
    """Load the pair as the server will: readable, PEM, and the key the certificate's."""
    for name, path in (("JOBQUEUE_TLS_CERT", files.cert), ("JOBQUEUE_TLS_KEY", files.key)):
        try:
            with open(path, "rb"):
                pass
        except OSError as exc:
            raise ConfigError(f"{name}: cannot read {path}: {exc.strerror}") from exc
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(files.cert, files.key, password=no_passphrase)
    except ssl.SSLError as exc:
        reason = exc.reason or str(exc)
        if "KEY_VALUES_MISMATCH" in reason:
            raise ConfigError(
                f"JOBQUEUE_TLS_KEY {files.key} is not the key of JOBQUEUE_TLS_CERT {files.cert}"
            ) from exc
        raise ConfigError(
            f"cannot use JOBQUEUE_TLS_CERT {files.cert} with JOBQUEUE_TLS_KEY {files.key}: "
            f"{reason} (both must be PEM, the key unencrypted)"
        ) from exc


def no_passphrase() -> str:
    # Without a callback OpenSSL would prompt on the terminal for an encrypted key.
    raise ConfigError("JOBQUEUE_TLS_KEY is encrypted; give the key without a passphrase")
