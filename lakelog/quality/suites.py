"""Expectation suites attached to topics: `<root>/quality/<topic>.json`, in Great Expectations' own JSON.

A suite is GX 1.x's `ExpectationSuite` JSON (`name`, `expectations` each with
`type` and `kwargs`, `meta`). lakelog's settings live in `meta.lakelog`:

    {"mode": "enforce" | "warn" | "dead-letter",   # default enforce
     "parse": "module:function",                   # optional: rows -> columns to validate
     "digest": "<sha256>"}                         # written by lakelog, checked on every read

A suite is written as one object put through the root's file IO (a rename on
a local folder, one PUT on S3), so a reader sees the old suite or the new one.
The digest covers everything else in the document: an object that is cut
short or edited by hand no longer matches, and the reader refuses it
(CorruptRecord) instead of gating writes on half a suite. A suite is parsed
with GX itself before it is stored; GX is imported only then (and when a
gated write validates), never by producers of ungated topics.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from lakelog.config import validate_name
from lakelog.errors import CorruptRecord, InvalidConfig, InvalidRequest, NotImplementedWithoutExtra
from lakelog.log.topics import topic_config  # not lakelog.log's: there it also names a module
from lakelog.store import Location, check_root

logger = logging.getLogger(__name__)

QUALITY_DIR = "quality"
MODES = ("enforce", "warn", "dead-letter")
DEFAULT_MODE = "enforce"
# The Kafka source's columns (lakelog.log.scan.KAFKA_SCHEMA) a suite may name, besides `value.<field>`.
KAFKA_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers")
# The kwargs of GX expectations that name columns.
COLUMN_KWARGS = ("column", "column_A", "column_B")
COLUMN_LIST_KWARGS = ("column_list",)
GX_0_FORMAT = (
    'Great Expectations 0.x\'s format ("expectation_suite_name", "expectation_type"); lakelog reads GX 1.x\'s: '
    'rename "expectation_suite_name" to "name" and each expectation\'s "expectation_type" to "type"'
)


@dataclass(frozen=True)
class Suite:
    """A topic's suite: GX's document (with lakelog's meta) and the settings lakelog reads from it."""

    topic: str
    name: str
    document: dict[str, Any] = field(repr=False)
    mode: str = DEFAULT_MODE
    parse: str | None = None

    @property
    def expectations(self) -> list[dict[str, Any]]:
        return self.document["expectations"]

    def to_json(self) -> str:
        return json.dumps(self.document, indent=2, sort_keys=True) + "\n"


def suite_location(root: str | Location, topic: str) -> Location:
    """`<root>/quality/<topic>.json`; InvalidTopic for a name that is not a topic's (`../x`), so none leaves the root."""
    return check_root(root) / QUALITY_DIR / f"{validate_name(topic)}.json"


def expectation_columns(expectation: dict[str, Any]) -> list[str]:
    """The columns an expectation's kwargs name (column, column_A/B, column_list)."""
    kwargs = expectation.get("kwargs") or {}
    names = [kwargs[key] for key in COLUMN_KWARGS if isinstance(kwargs.get(key), str)]
    for key in COLUMN_LIST_KWARGS:
        if isinstance(kwargs.get(key), list):
            names.extend(name for name in kwargs[key] if isinstance(name, str))
    return names


def parse_suite(text: str | bytes, topic: str, *, mode: str | None = None, parse: str | None = None) -> Suite:
    """A suite from a user's JSON, checked (JSON, GX's schema, mode, parse, columns); InvalidRequest/InvalidConfig."""
    try:
        document = json.loads(text)
    except (ValueError, UnicodeDecodeError) as error:
        raise InvalidRequest(f"the suite for topic {topic} is not JSON: {error}", topic=topic) from None
    if isinstance(document, dict) and "name" not in document and "expectation_suite_name" in document:
        raise InvalidRequest(f"the suite for topic {topic} is in {GX_0_FORMAT}", topic=topic)
    if not isinstance(document, dict) or not isinstance(document.get("name"), str) or not document.get("name"):
        raise InvalidRequest(f'the suite for topic {topic} is not a GX expectation suite: it needs a "name"', topic=topic)
    if not isinstance(document.get("expectations"), list):
        raise InvalidRequest(
            f'the suite {document["name"]} for topic {topic} is not a GX expectation suite: "expectations" must be a list',
            topic=topic,
        )
    meta: dict[str, Any] = document["meta"] if isinstance(document.get("meta"), dict) else {}
    settings = dict(meta.get("lakelog") or {}) if isinstance(meta.get("lakelog", {}), dict) else None
    if settings is None:
        raise InvalidConfig(f"the suite for topic {topic}: meta.lakelog must be an object", key="meta.lakelog")
    settings.pop("digest", None)
    if mode is not None:
        settings["mode"] = mode
    if parse is not None:
        settings["parse"] = parse
    settings.setdefault("mode", DEFAULT_MODE)
    if settings["mode"] not in MODES:
        raise InvalidConfig(
            f"the suite for topic {topic}: mode {settings['mode']!r} is not one of {', '.join(MODES)}", key="mode"
        )
    if settings.get("parse") is not None:
        _check_parse_name(topic, settings["parse"])
    document = _gx_document(topic, document)
    document["meta"] = {**document.get("meta", {}), "lakelog": settings}
    if not settings.get("parse"):
        _check_columns(topic, document)
    return _suite(topic, document)


def write_suite(
    root: str | Location, topic: str, text: str | bytes, *, mode: str | None = None, parse: str | None = None
) -> Suite:
    """Attach (or replace) `topic`'s suite: checked first, then stored as one object; nothing is stored if refused."""
    root = check_root(root)
    topic_config(root, topic)  # UnknownTopicOrPartition: a gate on a topic that does not exist
    suite = parse_suite(text, topic, mode=mode, parse=parse)
    document = dict(suite.document)
    document["meta"] = {**document["meta"], "lakelog": {**document["meta"]["lakelog"], "digest": _digest(document)}}
    if suite.mode == "dead-letter":
        from lakelog.quality.dead_letter import ensure_dlq_topic

        ensure_dlq_topic(root, topic)  # before the suite: a gate never meets a dead-letter suite without its topic
    location = suite_location(root, topic)
    location.io.write(location.uri, (json.dumps(document, indent=2, sort_keys=True) + "\n").encode())
    logger.info(
        "topic %s is gated by suite %s (mode %s, %d expectations)", topic, suite.name, suite.mode, len(suite.expectations)
    )
    return _suite(topic, document)


def read_suite(root: str | Location, topic: str) -> Suite | None:
    """The topic's suite, or None if the topic is not gated; CorruptRecord if the stored object is not whole.

    The stored document was parsed with GX when it was set; reading it imports no GX.
    """
    location = suite_location(root, topic)
    try:
        data = location.io.read(location.uri)
    except FileNotFoundError:
        return None
    try:
        document = json.loads(data)
        settings = document["meta"]["lakelog"]
        stored_digest = settings["digest"]
    except (ValueError, UnicodeDecodeError, KeyError, TypeError):
        raise CorruptRecord(
            f"the quality suite {location.uri} is incomplete or not lakelog's (set it again with lakelog quality set)",
            topic=topic,
            uri=location.uri,
        ) from None
    if _digest(document) != stored_digest:
        raise CorruptRecord(
            f"the quality suite {location.uri} does not match its digest: it was cut short or edited in place "
            f"(set it again with lakelog quality set)",
            topic=topic,
            uri=location.uri,
        )
    return _suite(topic, document)


def delete_suite(root: str | Location, topic: str) -> None:
    """Detach the topic's suite; InvalidRequest if it has none (nothing is deleted)."""
    location = suite_location(root, topic)
    if not location.io.delete(location.uri):
        raise InvalidRequest(f"topic {topic} has no quality suite under {check_root(root)}", topic=topic)
    logger.info("topic %s is no longer gated", topic)


def _suite(topic: str, document: dict[str, Any]) -> Suite:
    settings = document["meta"]["lakelog"]
    return Suite(
        topic=topic,
        name=document["name"],
        document=document,
        mode=settings.get("mode", DEFAULT_MODE),
        parse=settings.get("parse"),
    )


def _digest(document: dict[str, Any]) -> str:
    """sha256 of the document's canonical JSON without the digest itself."""
    meta = dict(document.get("meta") or {})
    meta["lakelog"] = {key: value for key, value in (meta.get("lakelog") or {}).items() if key != "digest"}
    canonical = json.dumps({**document, "meta": meta}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def require_great_expectations() -> None:
    """Great Expectations is importable, or NotImplementedWithoutExtra names the extra that installs it."""
    from lakelog.quality.gx_import import import_great_expectations

    try:
        import_great_expectations()
    except ModuleNotFoundError as error:
        if error.name != "great_expectations":
            raise
        raise NotImplementedWithoutExtra.missing("a quality suite", "Great Expectations", "quality") from None


def _gx_document(topic: str, document: dict[str, Any]) -> dict[str, Any]:
    """The document as GX itself reads and writes it: unknown expectation types and bad kwargs refused."""
    require_great_expectations()
    from great_expectations.core.expectation_suite import ExpectationSuite
    from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

    configurations = []
    for index, expectation in enumerate(document["expectations"]):
        if not isinstance(expectation, dict) or not isinstance(expectation.get("type"), str):
            old_format = isinstance(expectation, dict) and "expectation_type" in expectation
            raise InvalidRequest(
                f'the suite {document["name"]} for topic {topic}: expectation {index} has no "type"'
                + (f"; it is in {GX_0_FORMAT}" if old_format else ""),
                topic=topic,
            )
        try:
            configuration = ExpectationConfiguration(
                type=expectation["type"],
                kwargs=dict(expectation.get("kwargs") or {}),
                meta=expectation.get("meta"),
                notes=expectation.get("notes"),
            )
            configuration.to_domain_obj()  # GX's own check: the type exists and its kwargs fit it
        except Exception as error:  # noqa: BLE001 - GX raises many kinds; the user gets one line
            lines = [line.strip() for line in str(error).splitlines() if line.strip()]
            message = " / ".join(lines[:3]) or type(error).__name__
            raise InvalidRequest(
                f"the suite {document['name']} for topic {topic}: expectation {index} ({expectation['type']}) "
                f"is not valid GX: {message}",
                topic=topic,
            ) from None
        configurations.append(configuration)
    try:
        suite = ExpectationSuite(
            name=document["name"],
            expectations=configurations,
            meta=dict(document.get("meta") or {}),
            notes=document.get("notes"),
        )
        rendered = suite.to_json_dict()
    except Exception as error:  # noqa: BLE001
        raise InvalidRequest(f"the suite for topic {topic} is not a valid GX expectation suite: {error}", topic=topic) from None
    rendered.pop("id", None)
    return json.loads(json.dumps(rendered, default=str))


def _check_columns(topic: str, document: dict[str, Any]) -> None:
    """Every column named must be a Kafka-source column or a `value.<field>` of the JSON values."""
    for index, expectation in enumerate(document["expectations"]):
        for column in expectation_columns(expectation):
            if column in KAFKA_COLUMNS or (column.startswith("value.") and len(column) > len("value.")):
                continue
            raise InvalidRequest(
                f"the suite {document['name']} for topic {topic}: expectation {index} ({expectation['type']}) names "
                f"column {column!r}, which does not exist (columns: {', '.join(KAFKA_COLUMNS)}, value.<field>; "
                f"or name a parse function)",
                topic=topic,
                column=column,
            )


def _check_parse_name(topic: str, name: Any) -> None:
    if not isinstance(name, str) or name.count(":") != 1 or not all(name.split(":")):
        raise InvalidConfig(f'the suite for topic {topic}: parse must be "module:function", not {name!r}', key="parse")


__all__ = [
    "DEFAULT_MODE",
    "KAFKA_COLUMNS",
    "MODES",
    "QUALITY_DIR",
    "Suite",
    "delete_suite",
    "expectation_columns",
    "parse_suite",
    "read_suite",
    "suite_location",
    "write_suite",
]
