"""Hosts for tests, made of Linux network namespaces: each has an address of its own
and reaches the database host (this namespace, where PostgreSQL runs) over a veth
pair, with real TCP, through a relay that listens on this end of its link.

    with Network.make() as net:            # NetworkUnavailable where it cannot be
        worker = net.host("w1", pg_target)  # worker.dsn_of(pg_dsn), worker.exec
        net.cut(worker)                     # every packet on its link dropped
        net.restore(worker)

``cut`` installs tc's ``blackhole`` qdisc on both ends of the link: the kernel drops
the packets silently, as a pulled cable or a firewall would, so only TCP's own
timeouts and jobqueue's notice (tests/faults/netprobe.py does the same to a loopback).

Names are unique per run, and only what this module made is ever changed or removed.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import random
import signal
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

from tests.faults.netproxy import Address, NetProxy, dsn_via


class NetworkUnavailable(Exception):
    """Namespaces or veth pairs cannot be made here (not root, no ``ip``, a sandbox)."""


def run(*args: str) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


@dataclass
class Host:
    name: str  # of its namespace
    address: str  # its end of the link
    gateway: str  # the database host's end, where its relay listens
    inside: str  # veth names: in its namespace, and in this one
    outside: str
    relay: NetProxy

    @property
    def exec(self) -> list[str]:
        """The prefix that runs a command on this host."""
        return ["ip", "netns", "exec", self.name]

    def dsn_of(self, dsn: str) -> str:
        """``dsn`` as this host reaches it: through its link and its relay."""
        return dsn_via(dsn, self.relay.port, host=self.gateway)


@dataclass
class Network:
    tag: str
    subnet: ipaddress.IPv4Network  # a /24 no route of this machine touches
    hosts: list[Host] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)

    @classmethod
    @contextlib.contextmanager
    def make(cls) -> Iterator[Network]:
        """A network whose namespaces, links and relays are removed at the end, even
        when the block fails. Raises NetworkUnavailable if a namespace cannot be made:
        found by trying (the probe is removed with the others)."""
        net = cls(tag=uuid.uuid4().hex[:6], subnet=free_subnet())
        try:
            try:
                net._namespace("probe")
            except (OSError, subprocess.CalledProcessError) as exc:
                reason = getattr(exc, "stderr", None) or str(exc)
                raise NetworkUnavailable(reason.strip()) from exc
            yield net
        finally:
            net.close()

    def host(self, role: str, target: Address) -> Host:
        """A new host: a namespace linked to this one, its relay forwarding to ``target``."""
        index = len(self.hosts)
        name = self._namespace(role)
        inside, outside = f"jq{self.tag}{index}i", f"jq{self.tag}{index}o"
        gateway, address = (str(self.subnet[4 * index + k]) for k in (1, 2))
        run("ip", "link", "add", outside, "type", "veth", "peer", "name", inside)
        run("ip", "link", "set", inside, "netns", name)
        run("ip", "addr", "add", f"{gateway}/30", "dev", outside)
        run("ip", "link", "set", outside, "up")
        run("ip", "-n", name, "addr", "add", f"{address}/30", "dev", inside)
        run("ip", "-n", name, "link", "set", inside, "up")
        relay = NetProxy(target, listen_host=gateway)
        host = Host(name, address, gateway, inside, outside, relay)
        self.hosts.append(host)
        return host

    def cut(self, host: Host) -> None:
        run("tc", "qdisc", "add", "dev", host.outside, "root", "blackhole")
        run(*host.exec, "tc", "qdisc", "add", "dev", host.inside, "root", "blackhole")

    def restore(self, host: Host) -> None:
        run("tc", "qdisc", "del", "dev", host.outside, "root")
        run(*host.exec, "tc", "qdisc", "del", "dev", host.inside, "root")

    def _namespace(self, role: str) -> str:
        name = f"jq-{self.tag}-{role}"
        run("ip", "netns", "add", name)
        self.namespaces.append(name)
        run("ip", "-n", name, "link", "set", "lo", "up")
        return name

    def close(self) -> None:
        """Kill what still runs on the hosts, then remove their namespaces (and with
        them their links) and close the relays."""
        for name in self.namespaces:
            with contextlib.suppress(subprocess.CalledProcessError):
                for pid in run("ip", "netns", "pids", name).split():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), signal.SIGKILL)
            with contextlib.suppress(subprocess.CalledProcessError):
                run("ip", "netns", "del", name)
        for host in self.hosts:
            # Gone with its namespace, unless a process kept that alive.
            with contextlib.suppress(subprocess.CalledProcessError):
                run("ip", "link", "del", host.outside)
            host.relay.close()


ROUTE_TYPES = {
    "unicast",
    "local",
    "broadcast",
    "multicast",
    "anycast",
    "blackhole",
    "unreachable",
    "prohibit",
    "throw",
    "nat",
}


def free_subnet() -> ipaddress.IPv4Network:
    """A random /24 of 10.0.0.0/8 that no address or route of this machine overlaps."""
    try:
        routes = run("ip", "-4", "route", "show", "table", "all").splitlines()
        addresses = run("ip", "-4", "-o", "addr", "show").splitlines()
    except (OSError, subprocess.CalledProcessError) as exc:
        raise NetworkUnavailable(str(exc)) from exc
    taken = [ipaddress.ip_network(line.split()[3], strict=False) for line in addresses]
    for line in routes:
        words = line.split()
        if words and words[0] in ROUTE_TYPES:  # "local 127.0.0.1 ...": the type first
            words = words[1:]
        if words and words[0] != "default":
            taken.append(ipaddress.ip_network(words[0], strict=False))
    rng = random.Random()
    while True:
        subnet = ipaddress.IPv4Network(f"10.{rng.randrange(100, 255)}.{rng.randrange(256)}.0/24")
        if not any(subnet.overlaps(t) for t in taken):
            return subnet
