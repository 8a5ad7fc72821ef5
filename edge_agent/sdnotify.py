"""systemd's sd_notify(3) by hand: one datagram to $NOTIFY_SOCKET per message, no systemd Python package.

A `Type=notify` unit learns READY=1 when /ready would first answer 200 (every enabled part loaded),
STATUS= with what is still loading or what failed, STOPPING=1 at shutdown, and WATCHDOG=1 every
WatchdogSec/2 while the decode loop is alive: a dead or stuck loop stops the pings and systemd
restarts the service. Outside systemd (no NOTIFY_SOCKET) every call is a no-op.
"""
from __future__ import annotations

import logging
import os
import socket
import time
from typing import Callable, Mapping

log = logging.getLogger(__name__)


def notify(message: str, environ: Mapping[str, str] | None = None) -> bool:
    """Send one sd_notify message ("READY=1", "STATUS=..."); False when there is no NOTIFY_SOCKET or the send failed.

    Raises nothing: a failed send is logged (the service keeps running; systemd's timeout reports it).
    """
    env = os.environ if environ is None else environ
    address = env.get("NOTIFY_SOCKET", "")
    if not address or address[0] not in "/@":  # unset, or a vsock address this daemon does not speak
        return False
    if address[0] == "@":  # abstract namespace
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
            s.connect(address)
            s.sendall(message.encode("utf-8", "replace"))
        return True
    except OSError as e:
        log.warning("sd_notify %s failed: %s", message.split("=", 1)[0], e)
        return False


def watchdog_interval(environ: Mapping[str, str] | None = None) -> float | None:
    """Seconds between WATCHDOG=1 pings (half of WatchdogSec), or None when systemd asks none of this process."""
    env = os.environ if environ is None else environ
    try:
        usec = int(env.get("WATCHDOG_USEC", "0"))
        pid = int(env.get("WATCHDOG_PID", str(os.getpid())))
    except ValueError:
        return None
    if usec <= 0 or pid != os.getpid():
        return None
    return usec / 2e6


class ServiceNotifier:
    """What the serve loop tells systemd: call update() every tick and stopping() once at shutdown."""

    def __init__(self, environ: Mapping[str, str] | None = None, clock: Callable[[], float] = time.monotonic):
        self.environ = dict(os.environ if environ is None else environ)
        self.enabled = bool(self.environ.get("NOTIFY_SOCKET"))
        self.watchdog_s = watchdog_interval(self.environ) if self.enabled else None
        self.clock = clock
        self.ready_sent = False
        self._status = ""
        self._last_ping = float("-inf")

    def update(self, ready: bool, alive: bool, status: str) -> None:
        """READY=1 the first time ready is True; STATUS= when status changes; WATCHDOG=1 when due and alive."""
        if not self.enabled:
            return
        if ready and not self.ready_sent:
            self.ready_sent = notify(f"READY=1\nSTATUS={status}", self.environ)
            self._status = status
        elif status != self._status:
            notify(f"STATUS={status}", self.environ)
            self._status = status
        now = self.clock()
        if self.watchdog_s and alive and now - self._last_ping >= self.watchdog_s:
            notify("WATCHDOG=1", self.environ)
            self._last_ping = now

    def stopping(self, status: str = "shutting down") -> None:
        """STOPPING=1: systemd shows the unit as deactivating while requests drain."""
        if self.enabled:
            notify(f"STOPPING=1\nSTATUS={status}", self.environ)


def status_line(ready: bool, parts: Mapping[str, Mapping[str, object]]) -> str:
    """One line for `systemctl status`: "ready: model, embedder, index" or what is loading/failed."""
    if ready:
        return "ready: " + ", ".join(n for n, p in parts.items() if p.get("state") == "ready")
    waiting = [f"{n} {p.get('state')}" + (f" ({p.get('detail')})" if p.get("detail") else "")
               for n, p in parts.items() if p.get("state") not in ("ready", "disabled")]
    return "not ready: " + "; ".join(waiting)
