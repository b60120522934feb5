"""NoConditionalPutProxy (tests/s3proxy.py) in a process of its own, driven through the proxy's control API."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
from typing import Any

from s3emulator import Credentials
from s3proxy import CONTROL, ProxiedRequest

# -- the proxy in a process of its own -----------------------------------------------------------------------------

_PROXY_BOOT = """
import json, signal, sys, threading
sys.path.insert(0, sys.argv[1])
from s3emulator import Credentials
from s3proxy import NoConditionalPutProxy
settings = json.loads(sys.argv[2])
credentials = Credentials(**settings["credentials"]) if settings["credentials"] else None
proxy = NoConditionalPutProxy(settings["upstream"], strip=settings["strip"], credentials=credentials, delay=settings["delay"]).start()
print(proxy.port, flush=True)
done = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: done.set())
done.wait()
proxy.stop()
"""


class RemoteGate:
    """A Gate installed in a ProxyProcess: its state is read from the proxy when asked."""

    def __init__(self, proxy: ProxyProcess, gate_id: int) -> None:
        self._proxy = proxy
        self._id = gate_id

    def _state(self) -> dict[str, Any]:
        return self._proxy._call("GET", f"gate/{self._id}")

    @property
    def arrived(self) -> int:
        return self._state()["arrived"]

    @property
    def timed_out(self) -> bool:
        return self._state()["timed_out"]

    @property
    def statuses(self) -> list[int]:
        return self._state()["statuses"]


class ProxyProcess:
    """NoConditionalPutProxy in a process of its own, with the same API.

    Use it when the clients under test run in the test process: delta-rs holds the GIL in some calls while it
    waits for the store, which starves a proxy running in threads of that process until the client times out.
    """

    def __init__(self, upstream: str, *, strip: bool = True, credentials: Credentials | None = None, delay: float = 0.0) -> None:
        self.upstream = upstream
        self.delay = delay
        self.strip = strip
        self.credentials = credentials
        self.process: subprocess.Popen[str] | None = None
        self.port: int | None = None

    def start(self) -> ProxyProcess:
        settings = {
            "upstream": self.upstream,
            "strip": self.strip,
            "delay": self.delay,
            "credentials": vars(self.credentials) if self.credentials else None,
        }
        self.process = subprocess.Popen(
            [sys.executable, "-c", _PROXY_BOOT, os.path.dirname(os.path.abspath(__file__)), json.dumps(settings)],
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self.process.stdout.readline() if self.process.stdout else ""
        if not line.strip().isdigit():
            self.stop()
            raise RuntimeError("the proxy process did not start")
        self.port = int(line)
        return self

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def __enter__(self) -> ProxyProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def gate(self, path: str, *, method: str = "PUT", parties: int = 2, timeout: float = 10.0) -> RemoteGate:
        answer = self._call("POST", "gate", {"path": path, "method": method, "parties": parties, "timeout": timeout})
        return RemoteGate(self, answer["id"])

    def lose_responses(self, path: str, *, method: str = "PUT", times: int = 1) -> None:
        self._call("POST", "lose", {"path": path, "method": method, "times": times})

    @property
    def requests(self) -> list[ProxiedRequest]:
        return [ProxiedRequest(**request) for request in self._call("GET", "requests")]

    def take_requests(self) -> list[ProxiedRequest]:
        """What went through since the last take (or the start), and forget it."""
        return [ProxiedRequest(**request) for request in self._call("POST", "requests", {"clear": True})]

    def set_delay(self, seconds: float) -> None:
        """From now on every request waits `seconds` before it is forwarded (see NoConditionalPutProxy)."""
        self._call("POST", "delay", {"seconds": seconds})

    def _call(self, method: str, action: str, arguments: dict[str, Any] | None = None) -> Any:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            connection.request(method, CONTROL + action, body=json.dumps(arguments or {}).encode())
            response = connection.getresponse()
            data = response.read()
            if response.status != 200:
                raise RuntimeError(f"proxy {action}: {response.status} {data!r}")
            return json.loads(data)
        finally:
            connection.close()
