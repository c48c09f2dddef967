"""Hosts on one machine: network namespaces joined by one bridge, and ways to cut them.

Every name starts with `fm<pid>` (the pytest process's pid), so two sessions never
share one and a session that died is cleaned up by the next (`remove_stale`). All
addresses are in 10.231.N.0/24, N picked unused on this machine; nothing is routed
anywhere else (the namespaces have no default route).

Faults, each silent (packets are dropped, nobody is told, as with a pulled cable):
- `cut(host)` / `heal(host)`: the host's cable to the bridge is down / up again;
- `blackhole(host, addr)` / `unblackhole(host, addr)`: the host sends its frames
  for `addr` to a MAC address nobody has, so only that destination is unreachable.
"""
import os
import re
import signal
import subprocess
from dataclasses import dataclass, field

PREFIX = "fm"
UNUSED_MAC = "02:00:00:00:de:ad"  # locally administered, assigned to no interface
_NAME = re.compile(rf"^{PREFIX}(\d+)")


class NetnsUnavailable(RuntimeError):
    """This machine (or user) cannot make network namespaces."""


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True, timeout=10)


def _alive(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


def kill_inside(ns: str) -> None:
    """Every process still in one of our namespaces (a namespace outlives its name while
    any does: Postgres daemonizes, so it would outlive a pytest killed with SIGKILL)."""
    for pid in ip("netns", "pids", ns, check=False).stdout.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass


def remove_stale() -> None:
    """Namespaces, their processes and links a dead pytest process of ours left behind."""
    names = ip("netns", "list", check=False).stdout.split()
    for ns in names:
        m = _NAME.match(ns)
        if m and not _alive(int(m.group(1))):
            kill_inside(ns)
            ip("netns", "delete", ns, check=False)
    for line in ip("-o", "link", "show", check=False).stdout.splitlines():
        dev = line.split(":")[1].strip().split("@")[0]
        m = _NAME.match(dev)
        if m and not _alive(int(m.group(1))):
            ip("link", "delete", dev, check=False)


def _free_subnet() -> int:
    used = ip("-4", "-o", "addr", "show", check=False).stdout + ip("-4", "route", "show", "table", "all",
                                                                    check=False).stdout
    start = os.getpid() % 240
    for i in range(250):
        n = (start + i) % 250 + 1
        if f"10.231.{n}." not in used:
            return n
    raise NetnsUnavailable("no free /24 in 10.231.0.0/16")


@dataclass
class Host:
    role: str  # short: svc, web0, wk1 ...
    ns: str
    addrs: list[str]
    root_dev: str  # the root-namespace end of its veth, a port of the bridge

    @property
    def addr(self) -> str:
        return self.addrs[0]


@dataclass
class Topology:
    """One bridge in the root namespace (the pytest process is 10.231.N.1 on it) and one
    namespace per host, each with a veth whose inside end is `eth0`."""

    subnet: int
    prefix: str
    hosts: dict[str, Host] = field(default_factory=dict)

    @property
    def bridge(self) -> str:
        return f"{self.prefix}br"

    @property
    def cidr(self) -> str:
        return f"10.231.{self.subnet}.0/24"

    def address(self, last: int) -> str:
        return f"10.231.{self.subnet}.{last}"

    @classmethod
    def create(cls, layout: dict[str, list[int]]) -> "Topology":
        """`layout`: role -> the last octets of its addresses. Raises NetnsUnavailable."""
        if os.geteuid() != 0:
            raise NetnsUnavailable("network namespaces need root")
        remove_stale()
        topo = cls(subnet=_free_subnet(), prefix=f"{PREFIX}{os.getpid()}")
        probe = ip("link", "add", topo.bridge, "type", "bridge", check=False)
        if probe.returncode:
            raise NetnsUnavailable(f"cannot create a bridge: {probe.stderr.strip()}")
        try:
            ip("addr", "add", f"{topo.address(1)}/24", "dev", topo.bridge)
            ip("link", "set", topo.bridge, "up")
            for role, lasts in layout.items():
                topo._add_host(role, [topo.address(last) for last in lasts])
        except (subprocess.CalledProcessError, OSError) as exc:
            topo.destroy()
            raise NetnsUnavailable(f"cannot create network namespaces: {getattr(exc, 'stderr', exc)}") from exc
        return topo

    def _add_host(self, role: str, addrs: list[str]) -> None:
        ns, root_dev = f"{self.prefix}-{role}", f"{self.prefix}{role}"
        self.hosts[role] = host = Host(role, ns, addrs, root_dev)
        ip("netns", "add", ns)
        ip("link", "add", root_dev, "type", "veth", "peer", "name", f"{root_dev}i")
        ip("link", "set", f"{root_dev}i", "netns", ns)
        ip("-n", ns, "link", "set", f"{root_dev}i", "name", "eth0")
        for addr in addrs:
            ip("-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0")
        ip("-n", ns, "link", "set", "eth0", "up")
        ip("-n", ns, "link", "set", "lo", "up")
        ip("link", "set", root_dev, "master", self.bridge)
        ip("link", "set", root_dev, "up")

    def __getitem__(self, role: str) -> Host:
        return self.hosts[role]

    # --- faults ----------------------------------------------------------------
    def cut(self, role: str) -> None:
        ip("link", "set", self.hosts[role].root_dev, "down")

    def heal(self, role: str) -> None:
        ip("link", "set", self.hosts[role].root_dev, "up")

    def blackhole(self, role: str, addr: str) -> None:
        ip("-n", self.hosts[role].ns, "neigh", "replace", addr, "lladdr", UNUSED_MAC, "dev", "eth0", "nud",
           "permanent")

    def unblackhole(self, role: str, addr: str) -> None:
        ip("-n", self.hosts[role].ns, "neigh", "del", addr, "dev", "eth0", check=False)

    # --- cleanup ---------------------------------------------------------------
    def destroy(self) -> None:
        """Kills what still runs inside (all started by this session), then deletes each
        namespace (and so the veth inside it, and so the pair) and the bridge."""
        for host in self.hosts.values():
            kill_inside(host.ns)
            ip("netns", "delete", host.ns, check=False)
            ip("link", "delete", host.root_dev, check=False)
        ip("link", "delete", self.bridge, check=False)
