"""Topic Assets: `lakelog://<root>/<topic>`, so downstream DAGs can be scheduled on committed data.

The root is written as its scheme, then its path: an S3 root `s3://bucket/prefix`
gives `lakelog://s3/bucket/prefix/orders` (Azure's `az://` and GCS's `gs://` likewise), a local root `/data/lake` (that is,
`file:///data/lake`) gives `lakelog://file/data/lake/orders`.
The operators emit an event on their topic's Asset when their transaction
commits, never before, so a DAG scheduled on it reads committed rows.
"""

from __future__ import annotations

import logging
import urllib.parse
from typing import Any

from lakelog.client.roots import Location

logger = logging.getLogger(__name__)


def topic_asset_uri(root: str | Location, topic: str, storage_options: Any = None) -> str:
    location = Location.of(root, storage_options)
    if location.is_local:
        scheme, path = "file", location.uri
    else:
        scheme, path = location.uri.split("://", 1)
    return f"lakelog://{scheme}/{urllib.parse.quote(path.strip('/'))}/{urllib.parse.quote(topic)}"


def topic_asset(topic: str, root: str | Location | None = None, *, lakelog_conn_id: str | None = None) -> Any:
    """The Asset of `topic` under `root`, or under the root of connection `lakelog_conn_id` (default lakelog_default)."""
    from airflow.sdk import Asset

    if root is None:
        from lakelog.airflow.hooks.lakelog import DEFAULT_CONN_ID, LakelogHook

        root = LakelogHook(lakelog_conn_id or DEFAULT_CONN_ID).root
    return Asset(uri=topic_asset_uri(root, topic), group="lakelog")


def parse_time_asset(topic: str, lakelog_conn_id: str) -> Any | None:
    """The topic's Asset if the connection resolves while the DAG file is parsed, else None (logged)."""
    if "{{" in topic:
        return None
    try:
        return topic_asset(topic, lakelog_conn_id=lakelog_conn_id)
    except Exception as error:  # a DAG must parse even when its connection is not yet defined
        logger.warning("no Asset for topic %s: connection %s does not resolve at parse time (%s)", topic, lakelog_conn_id, error)
        return None


def emit_topic_event(operator: Any, context: Any, topic: str, root: str, extra: dict[str, Any]) -> None:
    """Put `extra` (the task's result) on the event of `topic`'s Asset among the operator's outlets.

    An outlet that is that Asset gets `extra`; an AssetAlias gets the Asset added
    (so a templated topic, unknown at parse time, still gets its event). A failure
    here leaves the committed result standing: it is logged, not raised.
    """
    from airflow.sdk import Asset, AssetAlias

    events = context.get("outlet_events")
    if events is None:
        return
    asset = topic_asset(topic, root)
    for outlet in operator.outlets:
        try:
            if isinstance(outlet, AssetAlias):
                events[outlet].add(asset, extra=extra)
            elif isinstance(outlet, Asset) and outlet.uri == asset.uri:
                events[outlet].extra = extra
        except (KeyError, TypeError, AttributeError) as error:
            operator.log.warning("no event for %s on outlet %s: %s", asset.uri, outlet, error)


def sanitize_uri(uri: urllib.parse.SplitResult) -> urllib.parse.SplitResult:
    """Airflow's URI normaliser for the `lakelog` scheme: a topic under a root, nothing else."""
    if uri.query or uri.fragment:
        raise ValueError("a lakelog Asset URI has no query or fragment: lakelog://<root>/<topic>")
    if uri.netloc not in ("file", "s3", "az", "gs") or "/" not in uri.path.strip("/"):
        raise ValueError(
            "a lakelog Asset URI names a root and a topic: lakelog://file/<path>/<topic> or "
            "lakelog://<s3|az|gs>/<bucket>/<prefix>/<topic>"
        )
    return uri


__all__ = ["emit_topic_event", "parse_time_asset", "sanitize_uri", "topic_asset", "topic_asset_uri"]
