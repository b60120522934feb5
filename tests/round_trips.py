"""What a caller waits for on an object store: the requests a delaying proxy (tests/s3proxy.py) recorded, counted by
kind and by *sequential depth*: the longest chain of requests each of which started only after the one before it
in the chain had ended. On a store whose every request takes a round trip D, an operation waits about depth x D;
requests sent side by side overlap and add one round between them, not one each.

Shared by the test suite (counts, never times: tests/integration/test_round_trips.py) and the benchmark
(bench/round_trips.py, which also measures rounds as a difference of times at two delays).
"""

from __future__ import annotations

import collections
import contextlib
import urllib.parse
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from cloud_emulators import Emulator
from s3emulator import S3Emulator, exported_env
from s3proxy import ProxiedRequest
from s3proxy_process import ProxyProcess


def kind(request: ProxiedRequest) -> str:
    """PUT, HEAD, GET, LIST (a GET of a bucket listing) or DELETE/POST, in S3's words on every store, so that one
    operation's requests compare across stores:

    - S3 and Azure (Put Blob, Get Blob, Get Blob Properties, Delete Blob) use these methods; a GET of a listing
      (S3's `list-type`/`prefix`, Azure's `comp=list`) is LIST.
    - GCS's JSON API: an upload (a POST to `/upload/storage/v1/...`, the create a commit is) is PUT; a GET of an
      object's media (`alt=media`, or under `/download/`) is GET; a GET of its metadata (`/storage/v1/b/<bucket>/o/
      <name>`, what the client's `get_blob` sends) or of a bucket's is HEAD; a GET of `/storage/v1/b/<bucket>/o` is
      LIST.
    """
    parts = urllib.parse.urlsplit(request.path)
    query = urllib.parse.parse_qs(parts.query)
    path = parts.path
    if path.startswith(("/upload/storage/v1/", "/storage/v1/", "/download/storage/v1/")):
        return _gcs_kind(request.method, path, query)
    if request.method == "GET":
        if "list-type" in query or "prefix" in query or query.get("comp") == ["list"] or path.strip("/").count("/") == 0:
            return "LIST"
    return request.method


def _gcs_kind(method: str, path: str, query: dict[str, list[str]]) -> str:
    if method == "POST" and path.startswith("/upload/"):
        return "PUT"
    if method == "GET":
        if path.startswith("/download/") or query.get("alt") == ["media"]:
            return "GET"
        if path.rstrip("/").endswith("/o"):
            return "LIST"
        return "HEAD"  # an object's or a bucket's metadata
    return method


def depth(requests: Sequence[ProxiedRequest], delay: float) -> int:
    """The longest chain of requests in which each started after its predecessor ended.

    Each request took at least `delay` (the proxy's), so two sent side by side overlap by about `delay`; one sent
    after another's answer starts at or after that answer. Half a delay of slack separates the two cases whatever
    the client's own time between them."""
    slack = delay / 2
    ordered = sorted(requests, key=lambda request: request.started)
    chain: list[int] = []
    for index, request in enumerate(ordered):
        before = [chain[other] for other in range(index) if ordered[other].ended - slack <= request.started]
        chain.append(1 + max(before, default=0))
    return max(chain, default=0)


@dataclass(frozen=True)
class Trace:
    """The requests of one operation: how many of each kind, and how deep their chain was."""

    requests: tuple[ProxiedRequest, ...]
    delay: float

    @property
    def count(self) -> int:
        return len(self.requests)

    @property
    def depth(self) -> int:
        return depth(self.requests, self.delay)

    @property
    def mix(self) -> collections.Counter[str]:
        return collections.Counter(kind(request) for request in self.requests)

    def show(self) -> str:
        """One line per request, in start order, for an assertion's message."""
        start = min((request.started for request in self.requests), default=0.0)
        return "\n".join(
            f"{(request.started - start) * 1e3:8.1f} ms {(request.ended - request.started) * 1e3:6.1f} ms "
            f"{kind(request):6} {urllib.parse.urlsplit(request.path).path}"
            for request in sorted(self.requests, key=lambda request: request.started)
        )


class DelayedStore:
    """An emulator (S3Emulator, or tests/cloud_emulators.py's Azurite or FakeGcs) behind a ProxyProcess that adds
    `delay` to every request; `env()` is the emulator's settings pointing clients at the proxy (S3's AWS_ENDPOINT_URL,
    Azure's connection string with the proxy as its BlobEndpoint, GCS's STORAGE_EMULATOR_HOST)."""

    def __init__(self, emulator: S3Emulator | Emulator, delay: float) -> None:
        self.emulator = emulator
        self.proxy = ProxyProcess(emulator.endpoint_url, strip=False, delay=delay)
        self.delay = delay

    def __enter__(self) -> DelayedStore:
        self.proxy.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.proxy.stop()

    def env(self) -> dict[str, str]:
        return self.emulator.env(endpoint_url=self.proxy.endpoint_url)

    @contextlib.contextmanager
    def exported(self) -> Iterator[DelayedStore]:
        """The proxy's settings (`env()`) in os.environ, restored afterwards."""
        with exported_env(self.env()):
            yield self

    def set_delay(self, seconds: float) -> None:
        self.proxy.set_delay(seconds)
        self.delay = seconds

    @contextlib.contextmanager
    def traced(self) -> Iterator[list[Trace]]:
        """The requests made inside the block, as one Trace appended to the yielded list when the block ends."""
        self.proxy.take_requests()
        traces: list[Trace] = []
        yield traces
        traces.append(Trace(tuple(self.proxy.take_requests()), self.delay))
