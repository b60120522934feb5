"""`lakelog` command line: init, topics, produce, consume, load, transactions, groups, coordinator sweep, sql, spark-sql-init, jars,
quality (lakelog.quality.cli).

Every command takes `--root` (or $LAKELOG_ROOT): a folder, `file:///path` or
`s3://bucket/prefix`, with `--storage-option KEY=VALUE` overriding the `AWS_*`
environment. Bad input exits with code 2, any other failure with code 1, each
with one line on stderr naming the Kafka error code; never a traceback.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn, cast

from lakelog import version
from lakelog.cli_common import BadInput
from lakelog.cli_produce import STDIN_FORMAT
from lakelog.cli_produce import message_fields as _message_fields
from lakelog.client import (
    OFFSET_BEGINNING,
    OFFSET_END,
    AdminClient,
    Consumer,
    NewTopic,
    Producer,
    TopicPartition,
)
from lakelog.coordinator.compaction.internal_compaction import compact_internal_logs
from lakelog.coordinator.group.coordinator import GroupCoordinator
from lakelog.coordinator.transaction.coordinator import TransactionCoordinator
from lakelog.errors import (
    GroupIdNotFound,
    InvalidRequest,
    InvalidTxnState,
    KafkaError,
    KafkaException,
    NonEmptyGroup,
    OffsetOutOfRange,
    SaslAuthenticationFailed,
    TopicAlreadyExists,
    TransactionalIdNotFound,
    UnknownTopicOrPartition,
    UnresolvedRoot,
)
from lakelog.jobs.sink_records import sweep_sink_records
from lakelog.log import list_topics, retention, topic_config
from lakelog.log.partition import wall_clock_ms
from lakelog.store import Location, check_root, initialise_root, open_root

logger = logging.getLogger(__name__)

EXIT_BAD_INPUT = 2
EXIT_FAILURE = 1
# The coordinator sweep's steps, each of which `--skip` may leave out.
SWEEP_STEPS = ("transactions", "groups", "log-cleaner", "internal-compaction", "sink-records")
# Errors that say the command asked for something wrong (exit 2); every other error is a failure (exit 1).
BAD_INPUT_ERRORS = (
    InvalidRequest,
    InvalidTxnState,
    UnknownTopicOrPartition,
    TopicAlreadyExists,
    OffsetOutOfRange,
    GroupIdNotFound,
    NonEmptyGroup,
    SaslAuthenticationFailed,
    TransactionalIdNotFound,
    UnresolvedRoot,
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise BadInput(f"{self.prog}: {message}")


def main(argv: Sequence[str] | None = None) -> int:
    # Errors reach the user as one line below; log lines (WARNING and up by default, --log-level INFO shows what
    # lakelog does on the way) go to stderr too.
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
        _configure_logging(getattr(args, "log_level", None) or _env_log_level())
        if not getattr(args, "handler", None):
            raise BadInput(args.missing)
        if getattr(args, "takes_root", True):
            if not args.root:
                raise BadInput("lakelog: --root (or $LAKELOG_ROOT) is required")
            # Only the commands that make a root take one that is none yet (a typo is UnresolvedRoot, exit 2).
            opening = check_root if getattr(args, "makes_root", False) else open_root
            args.root = opening(args.root, _storage_options(args))
        return args.handler(args)
    except BadInput as error:
        print(str(error), file=sys.stderr)
        return EXIT_BAD_INPUT
    except KafkaException as error:
        print(f"lakelog: {error.error.name()}: {_one_line(str(error))}", file=sys.stderr)
        return EXIT_BAD_INPUT if isinstance(error, BAD_INPUT_ERRORS) else EXIT_FAILURE
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("lakelog: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001 - the CLI never prints a traceback
        print(f"lakelog: UNKNOWN: {type(error).__name__}: {_one_line(str(error))}", file=sys.stderr)
        return EXIT_FAILURE


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _env_log_level() -> str:
    level = os.environ.get("LAKELOG_LOG_LEVEL", "WARNING").strip().upper()
    if level not in LOG_LEVELS:
        raise BadInput(f"lakelog: $LAKELOG_LOG_LEVEL={level!r} is not one of {', '.join(LOG_LEVELS)}")
    return level


def _configure_logging(level: str) -> None:
    """The CLI's log lines go to stderr as `lakelog: LEVEL logger: message`; library code never prints."""
    logging.basicConfig(level=level, format="lakelog: %(levelname)s %(name)s: %(message)s", force=True)
    # The handler keeps the level too: a library that sets its own logger's level (Great Expectations sets INFO)
    # still shows nothing below the CLI's level.
    for handler in logging.getLogger().handlers:
        handler.setLevel(level)


def _one_line(text: str) -> str:
    return " / ".join(part.strip() for part in text.splitlines() if part.strip())


def _storage_options(args: argparse.Namespace) -> dict[str, str]:
    options: dict[str, str] = {}
    for item in getattr(args, "storage_option", None) or []:
        key, separator, value = item.partition("=")
        if not separator or not key:
            raise BadInput(f"lakelog: --storage-option takes KEY=VALUE, not {item!r}")
        options[key] = value
    return options


def _build_parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument(
        "--root",
        default=os.environ.get("LAKELOG_ROOT"),
        help="root: a folder, file:///path or s3://bucket/prefix (default $LAKELOG_ROOT)",
    )
    common.add_argument(
        "--storage-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a connection setting of the root's store, overriding its AWS_* variable (endpoint_url, region, "
        "access_key_id, secret_access_key, session_token, allow_http, timeout, ...); repeatable",
    )
    common.add_argument(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        default=None,
        help="show log lines from this level up on stderr (default $LAKELOG_LOG_LEVEL or WARNING)",
    )
    parser = _Parser(prog="lakelog", description="Kafka's exactly-once semantics on Delta Lake tables")
    parser.add_argument("--version", action="version", version=f"lakelog {version()}")
    commands = parser.add_subparsers(metavar="COMMAND", parser_class=_Parser)

    init = commands.add_parser(
        "init", parents=[common], help="make a lakelog root (its identity, __cluster_metadata); idempotent"
    )
    init.set_defaults(handler=_init, makes_root=True)

    topics = commands.add_parser("topics", help="create, list and describe topics").add_subparsers(
        metavar="ACTION", parser_class=_Parser
    )
    create = topics.add_parser("create", parents=[common], help="create a topic")
    create.add_argument("topic")
    create.add_argument("--partitions", type=int, default=None)
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="topic config, repeatable")
    create.set_defaults(handler=_topics_create, makes_root=True)
    listing = topics.add_parser("list", parents=[common], help="list topics")
    listing.set_defaults(handler=_topics_list)
    describe = topics.add_parser("describe", parents=[common], help="partitions, offsets and config of a topic")
    describe.add_argument("topic")
    describe.add_argument("--json", action="store_true")
    describe.set_defaults(handler=_topics_describe)
    delete_records = topics.add_parser(
        "delete-records", parents=[common], help="move partitions' log start offset: delete every record before an offset"
    )
    delete_records.add_argument("topic")
    delete_records.add_argument("--offset", type=int, required=True, help="delete the records before it; -1: the high watermark")
    delete_records.add_argument(
        "--partition", type=int, action="append", default=None, help="a partition, repeatable (default: every partition)"
    )
    delete_records.set_defaults(handler=_topics_delete_records)

    produce = commands.add_parser(
        "produce",
        parents=[common],
        help="produce JSON lines read from stdin",
        epilog=STDIN_FORMAT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    produce.add_argument("topic")
    produce.add_argument(
        "--partition", type=int, default=-1, help="partition of lines that name none (default -1: the Producer's partitioner)"
    )
    produce.add_argument("--linger-ms", type=int, default=50)
    produce.set_defaults(handler=_produce)

    consume = commands.add_parser("consume", parents=[common], help="print messages as JSON lines")
    consume.add_argument("topic")
    consume.add_argument("--partition", type=int, action="append", help="repeatable; default all")
    start = consume.add_mutually_exclusive_group()
    start.add_argument("--from-end", action="store_true", help="start at the high watermark (default: beginning)")
    start.add_argument("--offset", type=int, help="start offset (with one --partition)")
    consume.add_argument("--max-messages", type=int, default=None)
    consume.add_argument("--follow", action="store_true", help="keep waiting for new messages")
    consume.add_argument(
        "--isolation-level",
        default="read_committed",
        choices=("read_committed", "read_uncommitted"),
        help="read_committed (default): committed data up to the last stable offset; "
        "read_uncommitted: all data up to the high watermark",
    )
    consume.set_defaults(handler=_consume)

    from lakelog import cli_groups, cli_jars, cli_load, cli_transactions, cli_upgrade

    for module in (cli_load, cli_transactions, cli_groups, cli_jars, cli_upgrade):
        module.register(commands, common, _Parser)

    coordinator = commands.add_parser("coordinator", help="coordinator jobs").add_subparsers(
        metavar="ACTION", parser_class=_Parser
    )
    sweep = coordinator.add_parser(
        "sweep",
        parents=[common],
        help="abort timed-out transactions, roll decided ones forward, expire idle ids, remove dead group members",
    )
    sweep.add_argument(
        "--skip",
        action="append",
        default=[],
        choices=SWEEP_STEPS,
        metavar="STEP",
        help=f"leave out a step (repeatable): {', '.join(SWEEP_STEPS)}",
    )
    sweep.set_defaults(handler=_coordinator_sweep)

    sql = commands.add_parser(
        "sql", parents=[common], help="SQL in DuckDB over read_committed topics, <topic>_view and <topic>_status tables"
    )
    sql.add_argument("query", help='one query; quote "offset" (a reserved word in DuckDB)')
    sql.add_argument("--format", choices=("table", "csv", "json"), default="table", help="table (default), csv or JSON lines")
    sql.set_defaults(handler=_sql)
    sql_init = commands.add_parser(
        "spark-sql-init", parents=[common], help="write a spark-sql init file: a temporary view per topic, view and status table"
    )
    sql_init.add_argument("--output", "-o", help="file to write (default: standard output)")
    sql_init.add_argument("--register", action="store_true", help="views, status tables as Delta tables in a metastore")
    sql_init.add_argument(
        "--properties-file",
        help="with --register: also write the Spark properties a shell needs (jars, Delta, S3A with keys) to this file, "
        "readable by you only (0600), for spark-sql --properties-file",
    )
    sql_init.set_defaults(handler=_spark_sql_init)
    from lakelog.quality.cli import register as register_quality

    register_quality(commands, common, _Parser)
    _say_what_is_missing(parser, commands)
    return parser


def _say_what_is_missing(parser: argparse.ArgumentParser, commands: Any) -> None:
    """`lakelog` alone names the commands; `lakelog topics` alone names the topics actions, and so on."""
    parser.set_defaults(missing=f"lakelog: a command is required ({', '.join(commands.choices)}); see lakelog --help")
    for name, command in commands.choices.items():
        for action in command._actions:
            if isinstance(action, argparse._SubParsersAction):
                command.set_defaults(
                    missing=f"lakelog {name}: an action is required ({', '.join(action.choices)}); see lakelog {name} --help"
                )


def _init(args: argparse.Namespace) -> int:
    root: Location = args.root
    cluster_id = initialise_root(root)
    root.io.make_dirs((root / "topics").uri)
    print(f"root {root} is ready (cluster id {cluster_id})")
    return 0


def _topics_create(args: argparse.Namespace) -> int:
    config: dict[str, Any] = {}
    for item in args.config:
        key, separator, value = item.partition("=")
        if not separator or not key:
            raise BadInput(f"lakelog topics create: --config takes KEY=VALUE, not {item!r}")
        config[key] = value
    topic = NewTopic(args.topic, num_partitions=-1 if args.partitions is None else args.partitions, config=config)
    AdminClient({"lakelog.root": args.root}).create_topics([topic])[args.topic].result()
    print(f"created topic {args.topic} with {topic_config(args.root, args.topic).num_partitions} partition(s)")
    return 0


def _topics_list(args: argparse.Namespace) -> int:
    for name in list_topics(args.root):
        print(name)
    return 0


def _topics_describe(args: argparse.Namespace) -> int:
    description = AdminClient({"lakelog.root": args.root}).describe_topics([args.topic])[args.topic].result()
    if args.json:
        print(json.dumps(dataclasses.asdict(description)))
        return 0
    print(f"Topic: {description.name}\tPartitionCount: {len(description.partitions)}")
    print("Config: " + ", ".join(f"{k}={v}" for k, v in sorted(description.config.items())))
    print(
        f"{'Partition':>9} {'LogStartOffset':>14} {'HighWatermark':>13} {'LastStableOffset':>16} "
        f"{'LogEndOffset':>12} {'Files':>6} {'Version':>8}"
    )
    for p in description.partitions:
        print(
            f"{p.id:>9} {p.log_start_offset:>14} {p.high_watermark:>13} {p.last_stable_offset:>16} "
            f"{p.log_end_offset:>12} {p.files:>6} {p.table_version:>8}"
        )
    return 0


def _topics_delete_records(args: argparse.Namespace) -> int:
    """One line per partition: its log start offset afterwards (S9.1); the first refusal ends the command."""
    partitions = args.partition if args.partition is not None else range(topic_config(args.root, args.topic).num_partitions)
    requests = [TopicPartition(args.topic, partition, args.offset) for partition in partitions]
    futures = AdminClient({"lakelog.root": args.root}).delete_records(requests)
    for request in requests:
        deleted = futures[request].result()
        print(json.dumps({"topic": request.topic, "partition": request.partition, "low_watermark": deleted.low_watermark}))
    return 0


def _produce(args: argparse.Namespace) -> int:
    """Read and check every stdin line first, so bad input writes nothing at all."""
    num_partitions = topic_config(args.root, args.topic).num_partitions
    messages = []
    for number, line in enumerate(sys.stdin, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise BadInput(f"lakelog produce: stdin line {number} is not JSON: {error.msg}") from None
        fields = _message_fields(record, number)
        fields.setdefault("partition", args.partition)
        if fields["partition"] != -1 and not 0 <= fields["partition"] < num_partitions:
            raise BadInput(
                f"lakelog produce: stdin line {number}: topic {args.topic} has partitions 0-{num_partitions - 1}, "
                f"not {fields['partition']}"
            )
        messages.append(fields)
    producer = Producer({"lakelog.root": args.root, "linger.ms": args.linger_ms})
    failures: list[KafkaError] = []
    delivered = 0

    def report(error: KafkaError | None, message: Any) -> None:
        nonlocal delivered
        if error is None:
            delivered += 1
        else:
            failures.append(error)

    for fields in messages:
        producer.produce(args.topic, on_delivery=report, **fields)
        producer.poll(0)
    producer.flush()
    if not failures:
        print(f"delivered {delivered} message(s), 0 failed", file=sys.stderr)
        return 0
    # One line, with the first failure's Kafka code, as every CLI error.
    first = failures[0]
    others = sum(1 for failure in failures[1:] if failure.str() != first.str())
    print(
        f"lakelog: {first.name()}: delivered {delivered} message(s), {len(failures)} failed: {_one_line(first.str())}"
        + (f" (and {others} other error(s))" if others else ""),
        file=sys.stderr,
    )
    return 1


def _consume(args: argparse.Namespace) -> int:
    partitions = args.partition or list(range(topic_config(args.root, args.topic).num_partitions))
    if args.offset is not None and len(partitions) != 1:
        raise BadInput("lakelog consume: --offset needs exactly one --partition")
    start = args.offset if args.offset is not None else (OFFSET_END if args.from_end else OFFSET_BEGINNING)
    conf = {"lakelog.root": args.root, "enable.partition.eof": True, "isolation.level": args.isolation_level}
    printed = 0
    with Consumer(conf) as consumer:
        consumer.assign([TopicPartition(args.topic, p, start) for p in partitions])
        at_end: set[int] = set()
        while args.max_messages is None or printed < args.max_messages:
            message = consumer.poll(1.0)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(cast(int, message.partition()))  # a partition-EOF event names its partition
                    if not args.follow and at_end >= set(partitions):
                        break
                continue
            at_end.discard(message.partition())
            print(json.dumps(_message_json(message)))
            printed += 1
    return 0


def _message_json(message: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"topic": message.topic(), "partition": message.partition(), "offset": message.offset()}
    for name, raw in (("key", message.key()), ("value", message.value())):
        if raw is None:
            out[name] = None
            continue
        try:
            out[name] = raw.decode()
        except UnicodeDecodeError:
            out[name + "_base64"] = base64.b64encode(raw).decode()
    out["timestamp"] = message.timestamp()[1]
    if message.headers():
        out["headers"] = {k: (v.decode(errors="replace") if v is not None else None) for k, v in message.headers()}
    return out


def _coordinator_sweep(args: argparse.Namespace) -> int:
    root = args.root
    skip = set(args.skip)
    report: dict[str, Any] = {}
    if "transactions" not in skip:
        report.update(dataclasses.asdict(TransactionCoordinator(root).sweep()))
    if "groups" not in skip:
        # S6.5: members past their session or rebalance timeout leave their groups.
        report["members_expired"] = [{"group": group, "member_id": member} for group, member in GroupCoordinator(root).sweep()]
    if "log-cleaner" not in skip:
        # S9.1, S9.3: retention and compaction of every topic, on the wall clock.
        report["log_cleaner"] = [dataclasses.asdict(done) for done in retention.clean_topics(root, wall_clock_ms())]
    if "internal-compaction" not in skip:
        # S9.3: __consumer_offsets and __transaction_state compacted by their record keys.
        report["internal_compaction"] = [dataclasses.asdict(done) for done in compact_internal_logs(root)]
    if "sink-records" not in skip:
        # S9.4: batch records whose rows are all gone are tombstoned; __sink_batches is compacted by key (S9.3).
        report["sink_records"] = [dataclasses.asdict(done) for done in sweep_sink_records(root, wall_clock_ms())]
    print(json.dumps(report))
    return 0


def _sql(args: argparse.Namespace) -> int:
    from lakelog import sql

    result = sql.query(args.root, args.query)
    if args.format == "table":
        import duckdb

        with duckdb.connect() as connection:
            connection.register("result", result)
            connection.sql("SELECT * FROM result").show(max_rows=1000, max_width=200)
        return 0
    rows = result.to_pylist()
    if args.format == "json":
        for row in rows:
            print(json.dumps({name: _json_value(value) for name, value in row.items()}, default=str))
        return 0
    import csv

    writer = csv.writer(sys.stdout)
    writer.writerow(result.column_names)
    for row in rows:
        writer.writerow([_json_value(value) for value in row.values()])
    return 0


def _json_value(value: Any) -> Any:
    """Bytes as text if they are UTF-8, else base64 (as `consume` prints them); nested values likewise."""
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            return base64.b64encode(value).decode()
    if isinstance(value, list):
        return [_json_value(item) for item in value]
    if isinstance(value, dict):
        return {key: _json_value(item) for key, item in value.items()}
    return value


def _spark_sql_init(args: argparse.Namespace) -> int:
    from lakelog import catalog

    script = catalog.spark_sql_register(args.root) if args.register else catalog.spark_sql_init(args.root)
    shell = ""
    if args.register:
        from lakelog.spark_sql_shell import shell_arguments, shell_properties, write_properties_file

        if args.properties_file:
            write_properties_file(args.properties_file, shell_properties(args.root, secrets=True))
            shell = f"--properties-file {args.properties_file} "
        elif not args.root.is_local:
            # No key on the command line or in a file: S3A reads them from the shell's AWS_* environment.
            shell = shell_arguments(shell_properties(args.root, secrets=False)) + " "
    if args.output:
        with open(args.output, "w") as output:
            output.write(script)
        run = f"once: spark-sql {shell}-f {args.output}" if args.register else f"spark-sql -i {args.output}"
        print(f"wrote {script.count('CREATE ')} table(s) to {args.output}; run {run}", file=sys.stderr)
    else:
        sys.stdout.write(script)
    if shell:
        print(f"a spark-sql shell over these tables: spark-sql {shell}-e 'SELECT ...'", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
