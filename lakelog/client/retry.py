"""lakelog's one retry policy, as the clients and the jobs built on them apply it: `retry.backoff.ms` doubling up
to `retry.backoff.max.ms` with full jitter (RetryPolicy.from_config reads a client's config), and a Backoff that says how
long to wait before the next attempt and when to give up. Defined in lakelog.store.io.retry, the layer every write
retries in; applications (pipelines/, the Airflow provider) take it from here."""

from __future__ import annotations

from lakelog.store.io.retry import DEFAULT_POLICY, Backoff, RetryPolicy

__all__ = ["DEFAULT_POLICY", "Backoff", "RetryPolicy"]
