"""A real S3 emulator on loopback for tests: moto's server in a subprocess, and a proxy that drops conditional writes.

A plain module (the pytest fixtures live in conftest and call it)::

    with S3Emulator() as s3:                 # python -m moto.server -H 127.0.0.1 -p <free port>, output to s3.log_path
        s3.create_bucket("lake")             # bucket names: 3+ chars, lower case, no underscores
        os.environ.update(s3.env())          # AWS_ENDPOINT_URL, AWS_REGION, keys, AWS_ALLOW_HTTP=true
        s3.pause(); ...; s3.resume()         # SIGSTOP / SIGCONT: requests hang meanwhile, then are served; data kept

    with NoConditionalPutProxy(s3.endpoint_url) as proxy:   # a store that ignores If-None-Match / If-Match on PUT
        env = s3.env(endpoint_url=proxy.endpoint_url)

Findings (moto 5.2.5, deltalake 1.6.6, pyarrow 26; pinned by tests/integration/test_s3_emulator.py):

* moto answers `If-None-Match: *` on an existing key with 412 and delta-rs turns it into CommitFailedError
  ("Failed to commit transaction: 0" with max_commit_retries=0). But a sequential race (handles a and b at v1,
  a commits v2, then b) never reaches that PUT: delta-rs lists the log first, sees v2 and refuses b without
  writing, so it passes even on a store without conditional writes. The PUTs only collide when both writers
  listed before either wrote: `NoConditionalPutProxy.gate()` holds the matching PUTs until both arrived, then
  forwards them one at a time. Transparent proxy (strip=False): upstream statuses [200, 412], loser refused.
  Stripping proxy: [200, 200], both writers return normally and the second one's commit file replaces the first.
* Authentication: moto checks nothing unless INITIAL_NO_AUTH_ACTION_COUNT (moto/settings.py; env var, default
  inf) is finite; past that many requests, every request's SigV4 signature is verified against the access keys of
  its IAM users and their policies are evaluated (moto/core/authorization.py, moto/iam/access_control.py).
  `S3Emulator(authenticated=True)` starts with auth off, creates IAM user "lakelog-test" with an inline allow-all
  policy and an access key through boto3, then POSTs "0" to /moto-api/reset-auth; from then on only that key
  pair (`credentials`, `env()`) works. Wrong keys give 403:
    delta-rs: OSError, text "...403 Forbidden ... <Code>InvalidAccessKeyId</Code><Message>The AWS Access Key Id
      you provided does not exist in our records.</Message>..." (unknown key id, also the dummy "testing") or
      "<Code>SignatureDoesNotMatch</Code>" (known key id, wrong secret). DeltaTable(uri) / write_deltalake on an
      existing table: "Kernel error -> The operation lacked the necessary privileges to complete for path
      t/_delta_log/_last_checkpoint ... 403 Forbidden ...<Code>InvalidAccessKeyId</Code>...".
    pyarrow: OSError "When getting information for key 'k' in bucket 'b': AWS Error ACCESS_DENIED during
      HeadObject operation: No response body." (HEAD: get_file_info, open_input_stream); with an XML body:
      "AWS Error INVALID_ACCESS_KEY_ID during ListObjectsV2 operation: The AWS Access Key Id you provided does not
      exist in our records. (Request ID: ...)" or "AWS Error SIGNATURE_DOES_NOT_MATCH during ...".
  Auth adds ~0.4 s to start (IAM set-up) and nothing measurable per commit.
* delta-rs signs If-None-Match, so against an authenticated emulator the stripping proxy turns every commit PUT
  into 403 SignatureDoesNotMatch, unless it is given the key pair (`credentials=s3.credentials`): it then
  re-signs the requests it changed. The Host header is forwarded unchanged, so untouched requests stay valid.
* A commit PUT that outlives the client's timeout (delta-rs storage option "timeout") is not retried: the writer
  gets OSError "... Error performing PUT .../_delta_log/00000000000000000001.json in 2.000865102s - HTTP error
  ... operation timed out", yet the request is still queued and the commit can land afterwards (reproduced with
  timeout=2s and a gate holding that PUT 5 s: OSError at 2 s, version 1 there at 5 s). A pause longer than the
  client's timeout therefore leaves the writer not knowing its commit's outcome. pyarrow waited out a 6 s pause.
* Measured on a 2-core box under load: server start (until it answers) 0.7-1.3 s, authenticated 1.1-1.4 s;
  a 1-row delta-rs append (7 requests: PUT parquet, LIST, PUT commit, LIST, 2 GETs, LIST) p50 65-105 ms
  (p90 100-200 ms) over 50 commits, the same with auth, +0-25 ms through the proxy; 11 ms on a local folder.
* pyarrow.fs.FileSystem.from_uri("s3://...") honours AWS_ENDPOINT_URL, but S3FileSystem() without arguments does
  not (it goes to <bucket>.s3.<region>.amazonaws.com): pass endpoint_override (`S3Emulator.filesystem()` does).
* The proxy runs in threads of the test process: a client call that blocks while holding the GIL deadlocks with
  it until the client times out (seen: a pyarrow output stream closed by its destructor, not by close()/with).
  delta-rs and pyarrow's normal calls release the GIL.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

REGION = "us-east-1"
DUMMY_KEY_ID = "testing"
DUMMY_SECRET = "testing"


def _listen(port: int | None) -> socket.socket:
    """A listening TCP socket on 127.0.0.1: on `port` if given and free, else on a free port."""
    for candidate in ([port] if port else []) + [0]:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", candidate))
            sock.listen(128)
            return sock
        except OSError:
            sock.close()
            if candidate == 0:
                raise
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class Credentials:
    access_key_id: str
    secret_access_key: str
    region: str = REGION


def client_env(endpoint_url: str, credentials: Credentials) -> dict[str, str]:
    """The AWS_* variables that delta-rs, pyarrow and boto3 read to reach `endpoint_url` with `credentials`."""
    return {
        "AWS_ENDPOINT_URL": endpoint_url,
        "AWS_REGION": credentials.region,
        "AWS_DEFAULT_REGION": credentials.region,
        "AWS_ACCESS_KEY_ID": credentials.access_key_id,
        "AWS_SECRET_ACCESS_KEY": credentials.secret_access_key,
        "AWS_ALLOW_HTTP": "true",
    }


class S3Emulator:
    """moto's S3 server as a subprocess on 127.0.0.1 at a free port.

    `authenticated=True`: requests must be SigV4-signed with the key pair `env()` / `credentials` return (an IAM
    user with an allow-all policy); any other key is refused with 403 (InvalidAccessKeyId / SignatureDoesNotMatch).
    The server's output goes to `log_path` (a temporary file unless given).
    """

    def __init__(self, *, authenticated: bool = False, log_path: str | os.PathLike[str] | None = None,
                 start_timeout: float = 30.0) -> None:
        self.authenticated = authenticated
        self.start_timeout = start_timeout
        self._own_log_dir: tempfile.TemporaryDirectory[str] | None = None
        if log_path is None:
            self._own_log_dir = tempfile.TemporaryDirectory(prefix="s3emulator-")
            log_path = os.path.join(self._own_log_dir.name, "moto.log")
        self.log_path = os.fspath(log_path)
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.credentials = Credentials(DUMMY_KEY_ID, DUMMY_SECRET)
        self.paused = False
        self.start_seconds: float | None = None

    # -- lifecycle ---------------------------------------------------------------------------------------------

    def start(self) -> S3Emulator:
        """Start the server and wait until it answers. After stop(), starts again (empty) on the same port if free.

        This process binds the listening socket and hands it to the server (werkzeug's WERKZEUG_SERVER_FD), so
        there is no race for the port and whatever answers on it is this server.
        """
        if self.process is not None:
            raise RuntimeError("S3Emulator already started")
        started = time.monotonic()
        listener = _listen(self.port)
        self.port = listener.getsockname()[1]
        with open(self.log_path, "ab") as log, listener:
            log.write(f"--- s3emulator: starting moto on port {self.port}\n".encode())
            log.flush()
            # Dies with this process (PR_SET_PDEATHSIG is tied to the forking thread: main thread only).
            watch = os.getpid() if threading.current_thread() is threading.main_thread() else 0
            self.process = subprocess.Popen(
                [sys.executable, "-c", _BOOT, str(watch), "-H", "127.0.0.1", "-p", str(self.port)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, pass_fds=[listener.fileno()],
                env={**os.environ, "PYTHONUNBUFFERED": "1", "INITIAL_NO_AUTH_ACTION_COUNT": "inf",
                     "WERKZEUG_RUN_MAIN": "true", "WERKZEUG_SERVER_FD": str(listener.fileno())},
            )
        # (Our copy of the socket is closed: once the server is gone, connecting is refused, not queued.)
        if not self._wait_until_up(started + self.start_timeout):
            self._kill()
            raise RuntimeError(f"moto server did not start; see {self.log_path}:\n{self.log_tail()}")
        if self.authenticated:
            self._enable_auth()
        self.start_seconds = time.monotonic() - started
        return self

    def stop(self) -> None:
        """Stop the server (resuming it first if paused). Idempotent; never leaves a stopped child behind."""
        process, self.process = self.process, None
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            if process.poll() is None:
                process.send_signal(signal.SIGCONT)  # a SIGSTOPped process would not act on SIGTERM
                process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        self.paused = False

    def _kill(self) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
            self.process.wait()
            self.process = None

    def close(self) -> None:
        self.stop()
        if self._own_log_dir is not None:
            self._own_log_dir.cleanup()
            self._own_log_dir = None

    def __enter__(self) -> S3Emulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def pause(self) -> None:
        """SIGSTOP the server: connections still queue in the kernel, requests hang; the stored data stays."""
        self._require_running().send_signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        """SIGCONT the server: it serves the requests that queued up while it was paused."""
        self._require_running().send_signal(signal.SIGCONT)
        self.paused = False

    @contextlib.contextmanager
    def exported(self) -> Iterator[S3Emulator]:
        """This emulator's AWS_* settings in os.environ (so child processes reach it too), restored afterwards."""
        saved = {key: os.environ.get(key) for key in self.env()}
        os.environ.update(self.env())
        try:
            yield self
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    @contextlib.contextmanager
    def paused_for(self) -> Iterator[None]:
        self.pause()
        try:
            yield
        finally:
            self.resume()

    def _require_running(self) -> subprocess.Popen[bytes]:
        if self.process is None or self.process.poll() is not None:
            raise RuntimeError("S3Emulator is not running")
        return self.process

    def _wait_until_up(self, deadline: float) -> bool:
        assert self.process is not None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                status, _ = self._moto_api("GET", "/moto-api/", timeout=1.0)
                if status == 200:
                    return True
            except OSError:
                pass
            time.sleep(0.02)
        return False

    def _moto_api(self, method: str, path: str, body: bytes | None = None, timeout: float = 10.0) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def log_tail(self, lines: int = 40) -> str:
        with contextlib.suppress(OSError), open(self.log_path, errors="replace") as log:
            return "".join(log.readlines()[-lines:])
        return ""

    # -- authentication ----------------------------------------------------------------------------------------

    def _enable_auth(self) -> None:
        iam = self.client("iam")
        iam.create_user(UserName="lakelog-test")
        iam.put_user_policy(
            UserName="lakelog-test", PolicyName="allow-all",
            PolicyDocument=json.dumps({"Version": "2012-10-17",
                                       "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}),
        )
        key = iam.create_access_key(UserName="lakelog-test")["AccessKey"]
        self.credentials = Credentials(key["AccessKeyId"], key["SecretAccessKey"])
        # From now on every request (the reset-auth call itself is not counted) must be signed by a known key.
        status, body = self._moto_api("POST", "/moto-api/reset-auth", b"0")
        if status != 200:
            raise RuntimeError(f"moto refused reset-auth: {status} {body!r}")

    # -- clients -----------------------------------------------------------------------------------------------

    @property
    def endpoint_url(self) -> str:
        if self.port is None:
            raise RuntimeError("S3Emulator not started")
        return f"http://127.0.0.1:{self.port}"

    def env(self, *, endpoint_url: str | None = None, credentials: Credentials | None = None) -> dict[str, str]:
        """AWS_* variables for a client of this emulator (or of `endpoint_url`, e.g. a proxy in front of it)."""
        return client_env(endpoint_url or self.endpoint_url, credentials or self.credentials)

    def storage_options(self, **overrides: str) -> dict[str, str]:
        """The same settings as delta-rs storage options (`DeltaTable(uri, storage_options=...)`)."""
        return {**{k.lower(): v for k, v in self.env().items() if k != "AWS_DEFAULT_REGION"}, **overrides}

    def client(self, service: str = "s3", credentials: Credentials | None = None) -> Any:
        import boto3
        from botocore.config import Config

        credentials = credentials or self.credentials
        return boto3.session.Session().client(
            service, endpoint_url=self.endpoint_url, region_name=credentials.region,
            aws_access_key_id=credentials.access_key_id, aws_secret_access_key=credentials.secret_access_key,
            config=Config(retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=5, read_timeout=30),
        )

    def filesystem(self, credentials: Credentials | None = None, endpoint_url: str | None = None, **kwargs: Any) -> Any:
        """A pyarrow S3FileSystem on this emulator."""
        import pyarrow.fs as pafs

        credentials = credentials or self.credentials
        return pafs.S3FileSystem(
            endpoint_override=endpoint_url or self.endpoint_url, scheme="http",
            access_key=credentials.access_key_id, secret_key=credentials.secret_access_key,
            region=credentials.region, **kwargs,
        )

    def create_bucket(self, name: str) -> str:
        """Create bucket `name`; returns `s3://name`."""
        self.client().create_bucket(Bucket=name)
        return f"s3://{name}"

    def reset(self) -> None:
        """Drop every bucket and object (moto's /moto-api/reset). In authenticated mode the IAM user goes too."""
        if self.authenticated:
            raise RuntimeError("reset() would delete the IAM user; start a new authenticated emulator instead")
        status, body = self._moto_api("POST", "/moto-api/reset")
        if status != 200:
            raise RuntimeError(f"moto refused reset: {status} {body!r}")


# The server's entry point: `python -m moto.server ARGS` (serving the inherited socket), after asking the kernel to SIGKILL it when the test
# process (argv[1], 0 for no watch) dies, even while it is SIGSTOPped. Not preexec_fn: unsafe with threads.
_BOOT = """
import os, signal, sys, runpy
watch = int(sys.argv[1])
if watch and sys.platform.startswith("linux"):
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != watch:
        sys.exit("s3emulator: parent already gone")
sys.argv = ["moto.server"] + sys.argv[2:]
runpy.run_module("moto.server", run_name="__main__", alter_sys=True)
"""


# -- the proxy ---------------------------------------------------------------------------------------------------

# URL paths under this prefix are the proxy's own API (ProxyProcess), never forwarded.
CONTROL = "/__proxy__/"
HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization", "te",
              "trailer", "upgrade"}
CONDITIONAL_PUT_HEADERS = ("if-none-match", "if-match")


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

    def matches(self, method: str, path: str) -> bool:
        return method == self.method and self.pattern.search(path) is not None

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


class NoConditionalPutProxy:
    """A threaded HTTP reverse proxy on 127.0.0.1 in front of `upstream` (an S3 endpoint URL).

    Forwards every request unchanged (Host header included, so SigV4 signatures stay valid) except that PUTs lose
    their `If-None-Match` / `If-Match` headers: a store that ignores conditional writes. `strip=False` makes it a
    transparent proxy (with `gate()`, a way to make two writers' PUTs collide deterministically). Given
    `credentials`, requests it changed are re-signed with them (needed against an authenticated emulator when the
    client signed the removed header). `requests` records what went through.
    """

    def __init__(self, upstream: str, *, strip: bool = True, credentials: Credentials | None = None,
                 port: int = 0) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        if parsed.scheme != "http" or not parsed.hostname or not parsed.port:
            raise ValueError(f"upstream must be http://host:port, not {upstream!r}")
        self.upstream_host, self.upstream_port = parsed.hostname, parsed.port
        self.strip = strip
        self.credentials = credentials
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

    def _take_lost_response(self, method: str, path: str) -> bool:
        with self._lock:
            for rule in self._lost:
                pattern, wanted, left = rule
                if left > 0 and method == wanted and pattern.search(path):
                    rule[2] -= 1
                    return True
        return False

    def _record(self, request: ProxiedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _gate_for(self, method: str, path: str) -> Gate | None:
        with self._lock:
            for gate in self.gates:
                if gate.arrived < gate.parties and gate.matches(method, path):
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
        path = urllib.parse.urlsplit(self.path).path
        if path.startswith(CONTROL):
            self._control(path[len(CONTROL):], json.loads(body or b"{}"))
            return
        record = ProxiedRequest(self.command, self.path)
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
        gate = proxy._gate_for(self.command, path)
        ticket = gate.enter() if gate is not None else None
        status = 502
        try:
            response, data = self._send_upstream(headers, body)
            status = response.status
        except OSError as e:  # upstream down: answer like a gateway would
            record.status = 502
            proxy._record(record)
            self.send_error(502, f"upstream: {e}")
            self.close_connection = True
            return
        finally:
            if gate is not None and ticket is not None:
                gate.leave(ticket, status)
        record.status = status
        proxy._record(record)
        if proxy._take_lost_response(self.command, path):
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
                self._upstream = http.client.HTTPConnection(self.proxy.upstream_host, self.proxy.upstream_port,
                                                            timeout=300)
            conn = self._upstream
            try:
                conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
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
            gate = proxy.gate(arguments["path"], method=arguments["method"], parties=arguments["parties"],
                              timeout=arguments["timeout"])
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
        else:
            self.send_error(404, f"no proxy action {action!r}")
            return
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = _forward  # type: ignore[assignment]


def _resign(method: str, path: str, headers: list[tuple[str, str]], body: bytes | None,
            credentials: Credentials) -> list[tuple[str, str]]:
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
    auth = S3SigV4Auth(BotoCredentials(credentials.access_key_id, credentials.secret_access_key), "s3",
                       credentials.region)
    canonical = auth.canonical_request(request)
    signature = auth.signature(auth.string_to_sign(request, canonical), request)
    scope = authorization.partition("Credential=")[2].partition(",")[0]
    new = (f"AWS4-HMAC-SHA256 Credential={scope}, "
           f"SignedHeaders={auth.signed_headers(auth.headers_to_sign(request))}, Signature={signature}")
    return [(k, new if k.lower() == "authorization" else v) for k, v in headers]


# -- the proxy in a process of its own -----------------------------------------------------------------------------

_PROXY_BOOT = """
import json, signal, sys, threading
sys.path.insert(0, sys.argv[1])
from s3emulator import Credentials, NoConditionalPutProxy
settings = json.loads(sys.argv[2])
credentials = Credentials(**settings["credentials"]) if settings["credentials"] else None
proxy = NoConditionalPutProxy(settings["upstream"], strip=settings["strip"], credentials=credentials).start()
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

    def __init__(self, upstream: str, *, strip: bool = True, credentials: Credentials | None = None) -> None:
        self.upstream = upstream
        self.strip = strip
        self.credentials = credentials
        self.process: subprocess.Popen[str] | None = None
        self.port: int | None = None

    def start(self) -> ProxyProcess:
        settings = {"upstream": self.upstream, "strip": self.strip,
                    "credentials": vars(self.credentials) if self.credentials else None}
        self.process = subprocess.Popen(
            [sys.executable, "-c", _PROXY_BOOT, os.path.dirname(os.path.abspath(__file__)), json.dumps(settings)],
            stdout=subprocess.PIPE, text=True,
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
