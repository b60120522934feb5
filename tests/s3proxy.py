"""An HTTP proxy in front of an object store's emulator (S3, Azurite, fake-gcs-server) that models a store's faults:
conditional writes ignored, answers lost, requests held (gates); in threads of the test process, or in a process of
its own.

The conditional write it strips is each store's: the `If-None-Match` / `If-Match` headers of a PUT (S3, Azure's Put
Blob) and the `ifGenerationMatch` / `ifMetagenerationMatch` query parameters of an upload (GCS). Rules match a
request's URL path or, for a GCS upload (a POST whose object name is in the query or in the body's JSON part), the
object's name as `/<name>`.

Split from tests/s3emulator.py (the emulator itself); see its docstring for what was measured.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import socket
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from s3emulator import Credentials

# -- the proxy ---------------------------------------------------------------------------------------------------

# URL paths under this prefix are the proxy's own API (ProxyProcess), never forwarded.
CONTROL = "/__proxy__/"
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "upgrade",
}
CONDITIONAL_PUT_HEADERS = ("if-none-match", "if-match")
CONDITIONAL_PARAMETERS = ("ifGenerationMatch", "ifMetagenerationMatch")
_UPLOAD_NAME = re.compile(rb'"name"\s*:\s*"([^"]+)"')


def _targets(path: str, query: str, body: bytes | None) -> list[str]:
    """What a rule's regex is searched in: the URL path, and a GCS upload's object name as `/<name>`."""
    targets = [path]
    names = urllib.parse.parse_qs(query).get("name", [])
    if not names and body and "/upload/" in path:
        found = _UPLOAD_NAME.search(body[:4096])
        names = [found.group(1).decode()] if found else []
    return targets + [f"/{name}" for name in names]


def _stripped_query(target: str) -> tuple[str, dict[str, str]]:
    """The request target without GCS's conditional parameters, and those it had."""
    parsed = urllib.parse.urlsplit(target)
    kept, removed = [], {}
    for key, value in urllib.parse.parse_qsl(parsed.query, keep_blank_values=True):
        if key in CONDITIONAL_PARAMETERS:
            removed[key] = value
        else:
            kept.append((key, value))
    if not removed:
        return target, {}
    return urllib.parse.urlunsplit(("", "", parsed.path, urllib.parse.urlencode(kept), "")), removed


class Gate:
    """Holds requests matching `method` and `path` (a regex searched in the URL path) until `parties` of them have
    arrived (or `timeout` passed), then forwards them one at a time, in arrival order. One-shot: requests after the
    first `parties` pass freely. `statuses` records the upstream status of each held request, in release order.
    A gate only one request reaches delays that request by `timeout`: a slow store (then `timed_out` is set)."""

    def __init__(self, path: str, *, method: str = "PUT", parties: int = 2, timeout: float = 10.0) -> None:
        self.pattern = re.compile(path)
        self.method = method
        self.parties = parties
        self.timeout = timeout
        self.arrived = 0
        self.timed_out = False
        self.statuses: list[int] = []
        self._condition = threading.Condition()
        self._next_ticket = 0

    def matches(self, method: str, targets: list[str]) -> bool:
        return method == self.method and any(self.pattern.search(target) for target in targets)

    def enter(self) -> int | None:
        """Wait for the other parties; returns this request's ticket, or None if the gate is already spent."""
        with self._condition:
            if self.arrived >= self.parties:
                return None
            ticket = self.arrived
            self.arrived += 1
            self._condition.notify_all()
            if not self._condition.wait_for(lambda: self.arrived >= self.parties, timeout=self.timeout):
                self.timed_out = True
            self._condition.wait_for(lambda: self._next_ticket == ticket, timeout=self.timeout)
            return ticket

    def leave(self, ticket: int, status: int) -> None:
        with self._condition:
            self.statuses.append(status)
            self._next_ticket = ticket + 1
            self._condition.notify_all()


@dataclass
class ProxiedRequest:
    method: str
    path: str
    stripped: dict[str, str] = field(default_factory=dict)
    status: int | None = None
    response_lost: bool = False
    # When the proxy took the request and when it answered (time.monotonic of the proxy's process), delay included.
    started: float = 0.0
    ended: float = 0.0


class NoConditionalPutProxy:
    """A threaded HTTP reverse proxy on 127.0.0.1 in front of `upstream` (an S3 endpoint URL).

    Forwards every request unchanged (Host header included, so SigV4 signatures stay valid) except that PUTs lose
    their `If-None-Match` / `If-Match` headers: a store that ignores conditional writes. `strip=False` makes it a
    transparent proxy (with `gate()`, a way to make two writers' PUTs collide deterministically). Given
    `credentials`, requests it changed are re-signed with them (needed against an authenticated emulator when the
    client signed the removed header). `requests` records what went through, each with when it started and ended.
    `delay` (seconds, changeable while running) is added to every request before it is forwarded: a store whose
    round trip is that long, so that requests a client sends one after another take a delay each, and requests it
    sends side by side overlap (tests/round_trips.py counts them).
    """

    def __init__(
        self,
        upstream: str,
        *,
        strip: bool = True,
        credentials: Credentials | None = None,
        port: int = 0,
        delay: float = 0.0,
    ) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        if parsed.scheme != "http" or not parsed.hostname or not parsed.port:
            raise ValueError(f"upstream must be http://host:port, not {upstream!r}")
        self.upstream_host, self.upstream_port = parsed.hostname, parsed.port
        self.strip = strip
        self.credentials = credentials
        self.delay = delay
        self.gates: list[Gate] = []
        self.requests: list[ProxiedRequest] = []
        self._lost: list[list[Any]] = []
        self._lock = threading.Lock()
        self._server: _QuietServer | None = None
        self._thread: threading.Thread | None = None
        self._port = port

    def start(self) -> NoConditionalPutProxy:
        handler = type("Handler", (_ProxyHandler,), {"proxy": self})
        self._server = _QuietServer(("127.0.0.1", self._port), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="s3-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
            server.drop_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> NoConditionalPutProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("proxy not started")
        return self._server.server_address[1]

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def gate(self, path: str, *, method: str = "PUT", parties: int = 2, timeout: float = 10.0) -> Gate:
        """Install a `Gate` (see there) and return it."""
        gate = Gate(path, method=method, parties=parties, timeout=timeout)
        with self._lock:
            self.gates.append(gate)
        return gate

    def lose_responses(self, path: str, *, method: str = "PUT", times: int = 1) -> None:
        """The next `times` requests matching `method` and `path` (a regex searched in the URL path) reach the store,
        and then the connection is cut before the answer: the client cannot tell whether they took effect."""
        with self._lock:
            self._lost.append([re.compile(path), method, times])

    def _take_lost_response(self, method: str, targets: list[str]) -> bool:
        with self._lock:
            for rule in self._lost:
                pattern, wanted, left = rule
                if left > 0 and method == wanted and any(pattern.search(target) for target in targets):
                    rule[2] -= 1
                    return True
        return False

    def _record(self, request: ProxiedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _gate_for(self, method: str, targets: list[str]) -> Gate | None:
        with self._lock:
            for gate in self.gates:
                if gate.arrived < gate.parties and gate.matches(method, targets):
                    return gate
        return None


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.connections_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.connections_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def drop_connections(self) -> None:
        """Cut the kept-alive client connections too: a stopped proxy refuses, it does not keep serving."""
        with self.connections_lock:
            connections = list(self.connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:  # a client that hung up: not the test's noise
        pass


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive with the client
    proxy: NoConditionalPutProxy

    def log_message(self, format: str, *args: Any) -> None:  # no output on the test's stderr
        pass

    def setup(self) -> None:
        super().setup()
        self._upstream: http.client.HTTPConnection | None = None

    def finish(self) -> None:
        with contextlib.suppress(Exception):
            super().finish()
        if self._upstream is not None:
            self._upstream.close()

    def _read_body(self) -> tuple[bytes | None, bool]:
        """The request body (HTTP chunked framing decoded) and whether it came chunked."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                size_line = self.rfile.readline(65537)
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):  # trailers
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline(65537)
            return b"".join(chunks), True
        length = int(self.headers.get("Content-Length") or 0)
        return (self.rfile.read(length) if length else None), False

    def _forward(self) -> None:
        proxy = self.proxy
        body, chunked = self._read_body()
        parsed = urllib.parse.urlsplit(self.path)
        path = parsed.path
        if path.startswith(CONTROL):
            self._control(path[len(CONTROL) :], json.loads(body or b"{}"))
            return
        targets = _targets(urllib.parse.unquote(path), parsed.query, body)
        record = ProxiedRequest(self.command, self.path, started=time.monotonic())
        self._target = self.path
        if proxy.strip and self.command in ("PUT", "POST"):
            self._target, removed = _stripped_query(self.path)
            record.stripped.update(removed)
        if proxy.delay > 0:
            time.sleep(proxy.delay)
        headers: list[tuple[str, str]] = []
        for name, value in self.headers.items():
            lower = name.lower()
            if lower in HOP_BY_HOP or lower == "expect" or (chunked and lower == "transfer-encoding"):
                continue
            if proxy.strip and self.command == "PUT" and lower in CONDITIONAL_PUT_HEADERS:
                record.stripped[name] = value
                continue
            headers.append((name, value))
        if chunked:
            headers.append(("Content-Length", str(len(body or b""))))
        if record.stripped and proxy.credentials is not None:
            headers = _resign(self.command, self.path, headers, body, proxy.credentials)
        gate = proxy._gate_for(self.command, targets)
        ticket = gate.enter() if gate is not None else None
        status = 502
        try:
            response, data = self._send_upstream(headers, body)
            status = response.status
        except OSError as e:  # upstream down: answer like a gateway would
            record.status = 502
            record.ended = time.monotonic()
            proxy._record(record)
            self.send_error(502, f"upstream: {e}")
            self.close_connection = True
            return
        finally:
            if gate is not None and ticket is not None:
                gate.leave(ticket, status)
        record.status = status
        record.ended = time.monotonic()
        proxy._record(record)
        if proxy._take_lost_response(self.command, targets):
            # The store did the request; its answer never reaches the client (a timeout after the PUT was sent).
            record.response_lost = True
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.send_response_only(response.status, response.reason)
        for name, value in response.getheaders():
            if name.lower() in HOP_BY_HOP or name.lower() in ("transfer-encoding", "content-length"):
                continue
            self.send_header(name, value)
        if self.command == "HEAD" or response.status in (204, 304) or 100 <= response.status < 200:
            if response.getheader("Content-Length") is not None:
                self.send_header("Content-Length", response.getheader("Content-Length"))
        else:
            self.send_header("Content-Length", str(len(data)))
        if response.will_close or self.close_connection:
            self.send_header("Connection", "close")
            self.close_connection = True
        try:
            self.end_headers()
            if self.command != "HEAD" and data:
                self.wfile.write(data)
            self.wfile.flush()
        except OSError:  # the client gave up (its timeout): drop the connection
            self.close_connection = True

    def _send_upstream(self, headers: list[tuple[str, str]], body: bytes | None) -> tuple[http.client.HTTPResponse, bytes]:
        for attempt in range(2):  # a kept-alive upstream connection may have been closed by the server meanwhile
            if self._upstream is None:
                self._upstream = http.client.HTTPConnection(self.proxy.upstream_host, self.proxy.upstream_port, timeout=300)
            conn = self._upstream
            try:
                conn.putrequest(self.command, self._target, skip_host=True, skip_accept_encoding=True)
                for name, value in headers:
                    conn.putheader(name, value)
                conn.endheaders(body)
                response = conn.getresponse()
                data = response.read()
                if response.will_close:
                    conn.close()
                    self._upstream = None
                return response, data
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                conn.close()
                self._upstream = None
                if attempt == 1:
                    raise
        raise AssertionError("unreachable")

    def _control(self, action: str, arguments: dict[str, Any]) -> None:
        """The proxy's own API, for a ProxyProcess: install gates and lost responses, read what went through."""
        proxy = self.proxy
        if action == "gate":
            gate = proxy.gate(
                arguments["path"], method=arguments["method"], parties=arguments["parties"], timeout=arguments["timeout"]
            )
            answer: Any = {"id": proxy.gates.index(gate)}
        elif action.startswith("gate/"):
            gate = proxy.gates[int(action.split("/", 1)[1])]
            answer = {"arrived": gate.arrived, "timed_out": gate.timed_out, "statuses": gate.statuses}
        elif action == "lose":
            proxy.lose_responses(arguments["path"], method=arguments["method"], times=arguments["times"])
            answer = {}
        elif action == "requests":
            with proxy._lock:
                answer = [vars(request) for request in proxy.requests]
                if arguments.get("clear"):
                    proxy.requests.clear()
        elif action == "delay":
            proxy.delay = float(arguments["seconds"])
            answer = {}
        else:
            self.send_error(404, f"no proxy action {action!r}")
            return
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = _forward  # type: ignore[assignment]


def _resign(
    method: str, path: str, headers: list[tuple[str, str]], body: bytes | None, credentials: Credentials
) -> list[tuple[str, str]]:
    """Headers with a new SigV4 Authorization over what is left of the originally signed headers."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials as BotoCredentials

    authorization = next((v for k, v in headers if k.lower() == "authorization"), None)
    if authorization is None:
        return headers
    signed = authorization.partition("SignedHeaders=")[2].partition(",")[0].split(";")
    kept = {k: v for k, v in headers if k.lower() in signed}
    request = AWSRequest(method=method, url=path, data=body or b"", headers=kept)
    request.context["timestamp"] = next(v for k, v in headers if k.lower() == "x-amz-date")
    auth = S3SigV4Auth(BotoCredentials(credentials.access_key_id, credentials.secret_access_key), "s3", credentials.region)
    canonical = auth.canonical_request(request)
    signature = auth.signature(auth.string_to_sign(request, canonical), request)
    scope = authorization.partition("Credential=")[2].partition(",")[0]
    new = (
        f"AWS4-HMAC-SHA256 Credential={scope}, "
        f"SignedHeaders={auth.signed_headers(auth.headers_to_sign(request))}, Signature={signature}"
    )
    return [(k, new if k.lower() == "authorization" else v) for k, v in headers]
