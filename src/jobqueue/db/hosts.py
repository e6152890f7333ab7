"""Several hosts in one DSN, for failover (docs/failover.md):

    postgresql://user@db1:5432,db2:5432/jobs?target_session_attrs=read-write

Whichever host accepts writes is used: when the primary is lost and a standby is
promoted, new connections find the new primary by themselves. The hosts may also be
given as ``?host=db1,db2&port=5432,5432``.

asyncpg reads such a DSN itself and tries its hosts in turn, but within one connect
timeout for all of them: a host that does not answer (a machine that is gone, whose
packets are dropped) spends the whole timeout, and the hosts after it are never
tried. So each host is connected to on its own, in order, with a timeout each, as
libpq does; this module only says what the hosts are.
"""

from __future__ import annotations

from urllib.parse import SplitResult, parse_qsl, urlencode, urlsplit

# The target_session_attrs under which every connection can write, which the queue
# needs on each of them. "any" only where every host reaches the same primary (several
# PgBouncers in front of it); standby, read-only and prefer-standby would connect to
# servers that refuse every enqueue.
WRITABLE = ("read-write", "primary", "any")


def single_host_dsns(dsn: str) -> list[str]:
    """``dsn`` once per host it lists, in order; ``[dsn]`` when it lists one (or none)."""
    parts = urlsplit(dsn)
    # As asyncpg splits it: the credentials end at the first "@".
    credentials, at, hostspec = parts.netloc.partition("@")
    if not at:
        credentials, hostspec = "", parts.netloc
    if "," in hostspec:
        prefix = f"{credentials}@" if at else ""
        return [_unsplit(parts._replace(netloc=prefix + one)) for one in hostspec.split(",")]
    if hostspec:  # asyncpg reads ?host= only when the address has no host
        return [dsn]
    query = parse_qsl(parts.query, keep_blank_values=True)
    hosts = _last(query, "host").split(",")
    if len(hosts) < 2:
        return [dsn]
    ports = _last(query, "port").split(",")
    dsns = []
    for i, host in enumerate(hosts):
        port = ports[i] if len(ports) == len(hosts) else ports[0]
        one = [(k, v) for k, v in query if k not in ("host", "port")] + [("host", host)]
        one += [("port", port)] if port else []
        dsns.append(_unsplit(parts._replace(query=urlencode(one, safe="/,"))))
    return dsns


def target_session_attrs(dsn: str) -> str | None:
    """What the DSN asks of the server it connects to; None when it does not say."""
    return _last(parse_qsl(urlsplit(dsn).query), "target_session_attrs") or None


def failover_problem(dsn: str) -> str | None:
    """Why the queue cannot work on ``dsn``'s hosts, or None. Several hosts need a
    target_session_attrs that keeps every connection on a server that accepts writes:
    without one, a client connects to the first host that answers, a standby too."""
    wanted = target_session_attrs(dsn)
    if wanted is not None and wanted not in WRITABLE:
        return (
            f"target_session_attrs={wanted} would connect to servers that cannot store "
            f"jobs; use read-write (or one of {', '.join(WRITABLE)})"
        )
    hosts = len(single_host_dsns(dsn))
    if hosts > 1 and wanted is None:
        return (
            f"it lists {hosts} hosts but no target_session_attrs: add "
            "?target_session_attrs=read-write, so that connections go to the one that "
            "accepts writes (or target_session_attrs=any if each host reaches the primary)"
        )
    return None


def _unsplit(parts: SplitResult) -> str:
    # Not urlunsplit: it drops the "//" of an empty address ("postgresql:/db").
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.scheme}://{parts.netloc}{parts.path}{query}"


def _last(query: list[tuple[str, str]], key: str) -> str:
    """The value of ``key`` as asyncpg reads it (the last one given), or ""."""
    values = [v for k, v in query if k == key]
    return values[-1] if values else ""
