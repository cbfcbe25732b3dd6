"""Test hosts on one machine: network namespaces joined by a veth link (iproute2, as root).

    with_hosts = pytest fixture below; hosts.a / hosts.b are the two addresses on a /30 of their own
    hosts.on("b", [sys.executable, "-m", "llmload", "worker", ...])   # the command, run on host B
    hosts.cut(); hosts.restore()                                       # B's end of the link down / up

Host A is this machine's own namespace (``a_is_here``) or a namespace of its own; host B is always
a namespace. A namespace of its own has its own ports, so a documented command can use its fixed
default ports (5557, 8089) without meeting anything else on this machine. Without root or iproute2
the tests skip, and fail when CI=true.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator

from tests.required import missing


def sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True, timeout=20)


class Hosts:
    """Host A (this namespace, or one of its own) and host B (a namespace), linked by veth."""

    def __init__(self, *, a_is_here: bool) -> None:
        tag = uuid.uuid4().hex[:6]
        self.ns_a = None if a_is_here else f"llma-{tag}"
        self.ns, self.veth_a, self.veth_b = f"llmb-{tag}", f"va{tag}", f"vb{tag}"
        octet = 16 + int(tag, 16) % 200  # a subnet of these namespaces' own
        self.a, self.b = f"10.253.{octet}.1", f"10.253.{octet}.2"

    @property
    def here(self) -> str:  # the names test_netns_worker.py uses: host A is "here", B "there"
        return self.a

    @property
    def there(self) -> str:
        return self.b

    def _in(self, ns: str | None, *cmd: str) -> list[str]:
        return ["ip", "netns", "exec", ns, *cmd] if ns else list(cmd)

    def on(self, host: str, cmd: list[str]) -> list[str]:
        """``cmd`` as run on host "a" or "b"."""
        return self._in(self.ns_a if host == "a" else self.ns, *cmd)

    def up(self) -> None:
        for ns in (self.ns_a, self.ns):
            if ns:
                sh("ip", "netns", "add", ns)
                sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        sh(
            *self._in(
                self.ns_a, "ip", "link", "add", self.veth_a, "type", "veth", "peer", "name", self.veth_b
            )
        )
        sh(*self._in(self.ns_a, "ip", "link", "set", self.veth_b, "netns", self.ns))
        sh(*self._in(self.ns_a, "ip", "addr", "add", f"{self.a}/30", "dev", self.veth_a))
        sh(*self._in(self.ns_a, "ip", "link", "set", self.veth_a, "up"))
        sh(*self._in(self.ns, "ip", "addr", "add", f"{self.b}/30", "dev", self.veth_b))
        sh(*self._in(self.ns, "ip", "link", "set", self.veth_b, "up"))

    def cut(self) -> None:
        """Host B loses its link (as a pulled cable or a partition: no FIN, no RST, silence)."""
        sh(*self._in(self.ns_a, "ip", "link", "set", self.veth_a, "down"))

    def restore(self) -> None:
        sh(*self._in(self.ns_a, "ip", "link", "set", self.veth_a, "up"))

    def down(self) -> None:
        subprocess.run(self._in(self.ns_a, "ip", "link", "del", self.veth_a), capture_output=True, timeout=20)
        for ns in (self.ns, self.ns_a):
            if ns:
                subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=20)


def make_hosts(*, a_is_here: bool) -> Iterator[Hosts]:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        missing("network namespaces need root and iproute2")
    h = Hosts(a_is_here=a_is_here)
    try:
        h.up()
    except subprocess.CalledProcessError as e:
        h.down()
        missing(f"cannot create a network namespace here: {e.stderr!r}")
    try:
        yield h
    finally:
        h.down()
