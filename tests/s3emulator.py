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
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
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


@contextlib.contextmanager
def exported_env(settings: dict[str, str]) -> Iterator[None]:
    """`settings` in os.environ while the block runs, the previous values restored afterwards."""
    saved = {key: os.environ.get(key) for key in settings}
    os.environ.update(settings)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


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

    def __init__(
        self, *, authenticated: bool = False, log_path: str | os.PathLike[str] | None = None, start_timeout: float = 30.0
    ) -> None:
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
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=[listener.fileno()],
                env={
                    **os.environ,
                    "PYTHONUNBUFFERED": "1",
                    "INITIAL_NO_AUTH_ACTION_COUNT": "inf",
                    "WERKZEUG_RUN_MAIN": "true",
                    "WERKZEUG_SERVER_FD": str(listener.fileno()),
                },
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
        with exported_env(self.env()):
            yield self

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
            UserName="lakelog-test",
            PolicyName="allow-all",
            PolicyDocument=json.dumps(
                {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
            ),
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
            service,
            endpoint_url=self.endpoint_url,
            region_name=credentials.region,
            aws_access_key_id=credentials.access_key_id,
            aws_secret_access_key=credentials.secret_access_key,
            config=Config(retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=5, read_timeout=30),
        )

    def filesystem(self, credentials: Credentials | None = None, endpoint_url: str | None = None, **kwargs: Any) -> Any:
        """A pyarrow S3FileSystem on this emulator."""
        import pyarrow.fs as pafs

        credentials = credentials or self.credentials
        return pafs.S3FileSystem(
            endpoint_override=endpoint_url or self.endpoint_url,
            scheme="http",
            access_key=credentials.access_key_id,
            secret_key=credentials.secret_access_key,
            region=credentials.region,
            **kwargs,
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
# Real S3 decides a conditional PUT (If-None-Match: *) atomically. moto 5.2.5 looks for the key, then puts it, on its
# request threads, so two racing creates could both be answered 200 (seen: two processes both created one topic's
# partition 0). One lock around moto's PutObject makes the emulator's put-if-absent atomic, as the store's is.
import threading
from moto.s3.responses import S3Response
_put_object, _put_lock = S3Response.put_object, threading.Lock()
def _atomic_put_object(self):
    with _put_lock:
        return _put_object(self)
S3Response.put_object = _atomic_put_object
sys.argv = ["moto.server"] + sys.argv[2:]
runpy.run_module("moto.server", run_name="__main__", alter_sys=True)
"""
