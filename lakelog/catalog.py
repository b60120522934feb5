"""What a root holds for queries: topics, materialized views and partition-status tables.

```
<root>/topics/<topic>/<partition>/   partition logs (read through a read_committed scan)
<root>/views/<topic>/                 the topic's materialized read_committed view (Delta)
<root>/status/<topic>/                HW, LSO, open and aborted transactions per partition (Delta)
<root>/quality/results/0/             quality gates' validation results, `quality_results` (the internal log
                                      __quality_results, read_committed, lakelog.quality.results)
```

Topics whose names start with `__` are internal and never listed here.
"""

from __future__ import annotations

import logging

import pyarrow as pa

from lakelog.config import NAME_PATTERN, validate_name
from lakelog.errors import UnknownTopicOrPartition
from lakelog.log import list_topics
from lakelog.log.scan import KAFKA_SCHEMA
from lakelog.store import Location, Table, TableNotFoundError, check_root

logger = logging.getLogger(__name__)

VIEWS_DIR = "views"
STATUS_DIR = "status"

# A materialized view holds the topic's read_committed rows in the Kafka source's columns.
VIEW_SCHEMA = KAFKA_SCHEMA

# One row per partition: where its log stands, as of `table_version` of its table (S5.1, S5.3).
STATUS_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("table_version", pa.int64()),
        pa.field("log_start_offset", pa.int64()),
        pa.field("high_watermark", pa.int64()),
        pa.field("last_stable_offset", pa.int64()),
        pa.field(
            "open_transactions",
            pa.list_(pa.struct([pa.field("producer_id", pa.int64()), pa.field("first_offset", pa.int64())])),
        ),
        pa.field(
            "aborted_transactions",
            pa.list_(
                pa.struct(
                    [
                        pa.field("producer_id", pa.int64()),
                        pa.field("first_offset", pa.int64()),
                        pa.field("marker_offset", pa.int64()),
                    ]
                )
            ),
        ),
        pa.field("updated_at", pa.timestamp("us", tz="UTC")),
    ]
)


# The quality gates' results (the internal log __quality_results, lakelog.quality.results) as queries name them.
QUALITY_RESULTS = "quality_results"
# A Spark SQL setting: a Python data source's error reaches the user as its one line ("[PYTHON_DATA_SOURCE_ERROR]
# ...: lakelog.errors.UnknownTopicOrPartition: topic t does not exist under ..."), not a Python traceback.
SPARK_HIDE_TRACEBACK = "spark.sql.execution.pyspark.udf.hideTraceback.enabled"


def quality_results_path(root: str | Location) -> Location:
    """The folder of the results log's partition tables (`<root>/quality/results/`)."""
    from lakelog.quality.results import results_location

    return results_location(root)


def has_quality_results(root: str | Location) -> bool:
    from lakelog.quality.results import results_log_exists

    return results_log_exists(root)


def view_path(root: str | Location, topic: str) -> Location:
    """`<root>/views/<topic>`; InvalidTopic for a name that is not a topic's, so none leaves the root."""
    return check_root(root) / VIEWS_DIR / validate_name(topic)


def status_path(root: str | Location, topic: str) -> Location:
    """`<root>/status/<topic>`; InvalidTopic for a name that is not a topic's, so none leaves the root."""
    return check_root(root) / STATUS_DIR / validate_name(topic)


def user_topics(root: str | Location) -> list[str]:
    """Topics of the root, internal ones (`__*`) left out, sorted."""
    return [topic for topic in list_topics(root) if not topic.startswith("__")]


def list_views(root: str | Location) -> list[str]:
    """Topics that have a materialized view, sorted."""
    return _tables_in(check_root(root) / VIEWS_DIR)


def list_status_tables(root: str | Location) -> list[str]:
    """Topics that have a partition-status table, sorted."""
    return _tables_in(check_root(root) / STATUS_DIR)


def open_view(root: str | Location, topic: str) -> Table:
    """The materialized view of `topic` at its latest version; UnknownTopicOrPartition if there is none."""
    return _open(view_path(root, topic), f"topic {topic} has no materialized view under {root}", topic)


def open_status(root: str | Location, topic: str) -> Table:
    """The partition-status table of `topic`; UnknownTopicOrPartition if there is none."""
    return _open(status_path(root, topic), f"topic {topic} has no partition-status table under {root}", topic)


def read_quality_results(root: str | Location) -> pa.Table:
    """The quality gates' read_committed results (RESULTS_SCHEMA); UnknownTopicOrPartition if none were recorded."""
    from lakelog.quality.results import read_results

    if not has_quality_results(root):
        raise UnknownTopicOrPartition(f"no quality results under {root}", topic=QUALITY_RESULTS)
    return read_results(root)


def spark_sql_init(root: str | Location) -> str:
    """A spark-sql init file (`spark-sql -i FILE`): a temporary view for every topic, view and status table.

    Topics read in read_committed (`<topic>`); materialized views are
    `<topic>_view` and partition-status tables `<topic>_status`, all through the
    `lakelog` data source, so every query reads the latest snapshot.
    """
    root = check_root(root)
    lines = [
        f"-- lakelog tables of {root}; use with: spark-sql -i <this file>",
        f"-- (add --conf {SPARK_HIDE_TRACEBACK}=true to see lakelog's errors as one line, without a Python traceback)",
    ]
    names: set[str] = set()

    def view(name: str, options: dict[str, str]) -> None:
        if name in names:
            lines.append(f"-- skipped {name}: the name is taken by a table above")
            return
        names.add(name)
        rendered = ", ".join(f"`{key}` '{_sql_string(value)}'" for key, value in options.items())
        lines.append(f"CREATE OR REPLACE TEMPORARY VIEW `{name}` USING lakelog OPTIONS ({rendered});")

    for topic in user_topics(root):
        view(topic, {"root": root.uri, "topic": topic, "isolation.level": "read_committed"})
    for topic in list_views(root):
        view(f"{topic}_view", {"root": root.uri, "view": topic})
    for topic in list_status_tables(root):
        view(f"{topic}_status", {"root": root.uri, "status": topic})
    if has_quality_results(root):
        # Its read_committed rows, decoded (a result appended in a transaction shows only once it commits, S11.2).
        view(QUALITY_RESULTS, {"root": root.uri, "quality": "results"})
    return "\n".join(lines) + "\n"


def spark_sql_register(root: str | Location) -> str:
    """Statements registering every view and status table in spark-sql's persistent catalog (`spark-sql -f FILE`,
    once): `<topic>_view` and `<topic>_status` as Delta tables at their locations, read by Delta Lake's Spark
    connector (lakelog's JVM jars, `lakelog jars conf`), so a new shell on that metastore queries them with no init
    file. Topics are not registered: Delta reads a partition table read_uncommitted; `spark_sql_init`'s views read
    them in read_committed.
    """
    root = check_root(root)
    lines = [f"-- lakelog's views and status tables of {root}; register once with: spark-sql -f <this file>"]
    tables = [(f"{topic}_view", view_path(root, topic)) for topic in list_views(root)]
    tables += [(f"{topic}_status", status_path(root, topic)) for topic in list_status_tables(root)]
    for name, location in tables:
        lines.append(f"CREATE TABLE IF NOT EXISTS `{name}` USING delta LOCATION '{_sql_string(location.uri)}';")
    return "\n".join(lines) + "\n"


def _sql_string(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")


def _open(location: Location, missing: str, topic: str) -> Table:
    try:
        return Table.open(location)
    except TableNotFoundError:
        raise UnknownTopicOrPartition(missing, topic=topic) from None


def _tables_in(folder: Location) -> list[str]:
    # A folder whose name is no topic's (made by hand) is no view or status table: view_path would refuse it.
    return sorted(entry.name for entry in folder.children() if NAME_PATTERN.fullmatch(entry.name) and Table.exists(entry))


__all__ = [
    "QUALITY_RESULTS",
    "SPARK_HIDE_TRACEBACK",
    "STATUS_DIR",
    "STATUS_SCHEMA",
    "VIEW_SCHEMA",
    "VIEWS_DIR",
    "list_status_tables",
    "has_quality_results",
    "list_views",
    "open_status",
    "open_view",
    "quality_results_path",
    "read_quality_results",
    "spark_sql_init",
    "spark_sql_register",
    "status_path",
    "user_topics",
    "view_path",
]
