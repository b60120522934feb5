"""`lakelog groups`: list, describe, reset and delete consumer groups (like kafka-consumer-groups.sh).

Registered on the `lakelog` command line by lakelog.cli.main; bad input raises BadInput (exit 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lakelog.cli.common import BadInput
from lakelog.cli.common import print_rows as _print_rows
from lakelog.errors import CorruptRecord, GroupIdNotFound, NonEmptyGroup

if TYPE_CHECKING:
    from lakelog.client import TopicPartition

# The values of ConsumerGroupState, lower-cased, for --state: written out so that building the parser (and
# `lakelog --help`) imports no client; tests/cli/test_cli_startup.py checks they are the enum's.
GROUP_STATES = ("empty", "assigning", "reconciling", "stable", "unknown")


def register(commands: Any, common: argparse.ArgumentParser, parser_class: type) -> None:
    """Add `groups` and its actions to the command line's subparsers."""
    groups = commands.add_parser(
        "groups", help="list, describe, reset and delete consumer groups (like kafka-consumer-groups.sh)"
    ).add_subparsers(metavar="ACTION", parser_class=parser_class)
    listing = groups.add_parser("list", parents=[common], help="every group with its state and member count")
    listing.add_argument(
        "--state",
        action="append",
        choices=GROUP_STATES,
        help="only groups in this state (repeatable)",
    )
    listing.set_defaults(handler=_groups_list)
    describe = groups.add_parser("describe", parents=[common], help="a group's state, epochs and members")
    describe.add_argument("--group", required=True)
    describe.add_argument("--json", action="store_true")
    describe.set_defaults(handler=_groups_describe)
    offsets = groups.add_parser("offsets", parents=[common], help="committed offsets and lag against HW and LSO")
    offsets.add_argument("--group", required=True)
    offsets.add_argument("--json", action="store_true")
    offsets.set_defaults(handler=_groups_offsets)
    reset = groups.add_parser(
        "reset-offsets", parents=[common], help="set a group's committed offsets (dry run unless --execute)"
    )
    reset.add_argument("--group", required=True)
    scope = reset.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", metavar="TOPIC[:P,P...]", help="a topic, or some of its partitions")
    scope.add_argument("--all-topics", action="store_true", help="every partition the group has an offset for")
    strategy = reset.add_mutually_exclusive_group(required=True)
    strategy.add_argument("--to-earliest", action="store_true", help="the log start offset")
    strategy.add_argument("--to-latest", action="store_true", help="the high watermark")
    strategy.add_argument("--to-current", action="store_true", help="the committed offset (no change)")
    strategy.add_argument("--to-offset", type=int, metavar="N", help="this offset (clamped to the log)")
    strategy.add_argument("--shift-by", type=int, metavar="N", help="the committed offset plus N (clamped)")
    reset.add_argument("--execute", action="store_true", help="commit the new offsets (default: only print them)")
    reset.set_defaults(handler=_groups_reset_offsets)
    delete = groups.add_parser("delete", parents=[common], help="delete empty groups and their offsets")
    delete.add_argument("--group", action="append", required=True, help="repeatable")
    delete.add_argument(
        "--discard-corrupt",
        action="store_true",
        help="delete groups set aside by a __consumer_offsets record that does not decode (every request to such "
        "a group is refused with CORRUPT_MESSAGE), discarding their committed offsets: the group starts again "
        "empty and its consumers follow auto.offset.reset. Stop its consumers first. Refused for a group "
        "that is served.",
    )
    delete.set_defaults(handler=_groups_delete)


def _groups_list(args: argparse.Namespace) -> int:
    from lakelog.client.admin import groups as group_admin
    from lakelog.client.group_tools import list_groups_with_members

    states = None if args.state is None else {group_admin.ConsumerGroupState(state.upper()) for state in args.state}
    rows = [
        (listing.group_id, listing.state.value, "-" if members is None else members)
        for listing, members in list_groups_with_members(args.root, states)
    ]
    _print_rows(("Group", "State", "Members"), rows)
    return 0


def _groups_describe(args: argparse.Namespace) -> int:
    from lakelog.client.admin import groups as group_admin

    description = group_admin.describe_group(args.root, args.group)
    if args.json:
        print(json.dumps(_jsonable(dataclasses.asdict(description))))
        return 0
    _print_rows(
        ("Group", "State", "Assignor", "GroupEpoch", "TargetAssignmentEpoch", "Members"),
        [
            (
                description.group_id,
                description.state.value,
                description.partition_assignor,
                description.group_epoch,
                description.target_assignment_epoch,
                len(description.members),
            )
        ],
    )
    print()
    _print_rows(
        ("MemberId", "GroupInstanceId", "MemberEpoch", "RevocationEpoch", "Assignment", "TargetAssignment", "PendingRevocation"),
        [
            (
                m.member_id,
                m.group_instance_id or "-",
                m.member_epoch,
                m.revocation_epoch,
                _tp_list(m.assignment),
                _tp_list(m.target_assignment),
                _tp_list(m.pending_revocation),
            )
            for m in description.members
        ],
    )
    return 0


def _groups_offsets(args: argparse.Namespace) -> int:
    from lakelog.client.admin import groups as group_admin

    rows = group_admin.group_offsets(args.root, args.group)
    if args.json:
        print(json.dumps([{**dataclasses.asdict(row), "lag": row.lag, "lag_lso": row.lag_lso} for row in rows]))
        return 0
    _print_rows(
        (
            "Group",
            "Topic",
            "Partition",
            "CurrentOffset",
            "PendingOffset",
            "LogEndOffset",
            "LastStableOffset",
            "Lag",
            "LagLso",
            "MemberId",
        ),
        [
            (
                args.group,
                r.topic,
                r.partition,
                _dash(r.committed_offset),
                _dash(r.pending_offset),
                r.high_watermark,
                r.last_stable_offset,
                _dash(r.lag),
                _dash(r.lag_lso),
                r.member_id or "-",
            )
            for r in rows
        ],
    )
    return 0


def _groups_reset_offsets(args: argparse.Namespace) -> int:
    from lakelog.client.admin import groups as group_admin
    from lakelog.client.roots import partition_count

    if args.all_topics:
        group = group_admin.read_group(args.root, args.group)
        partitions = sorted(group.offsets) if group is not None else []
        if not partitions:
            raise BadInput(f"lakelog groups reset-offsets: group {args.group!r} has no committed offsets (--all-topics)")
    else:
        partitions = []
        for item in args.topic:
            topic, _, numbers = item.partition(":")
            count = partition_count(args.root, topic)
            try:
                wanted = [int(n) for n in numbers.split(",")] if numbers else list(range(count))
            except ValueError:
                raise BadInput(f"lakelog groups reset-offsets: --topic takes TOPIC or TOPIC:P,P..., not {item!r}") from None
            outside = [n for n in wanted if not 0 <= n < count]
            if outside:
                raise BadInput(f"lakelog groups reset-offsets: topic {topic} has partitions 0-{count - 1}, not {outside}")
            partitions.extend((topic, n) for n in wanted)
    for name in ("to_earliest", "to_latest", "to_current"):
        if getattr(args, name):
            strategy, value = name.replace("_", "-"), None
    if args.to_offset is not None:
        strategy, value = "to-offset", args.to_offset
    if args.shift_by is not None:
        strategy, value = "shift-by", args.shift_by
    plan = group_admin.plan_reset(args.root, args.group, partitions, strategy, value)
    if args.execute:
        group_admin.alter_offsets(args.root, args.group, {tp: (offset, "") for tp, offset in plan.items()})
    _print_rows(("Group", "Topic", "Partition", "NewOffset"), [(args.group, t, p, o) for (t, p), o in plan.items()])
    if not args.execute:
        print("(dry run: nothing was committed; add --execute)", file=sys.stderr)
    return 0


def _groups_delete(args: argparse.Namespace) -> int:
    from lakelog.client.admin import groups as group_admin
    from lakelog.client.group_tools import delete_corrupt_group

    for group_id in args.group:  # all checked before any is deleted
        try:
            group = group_admin.read_group(args.root, group_id)
        except CorruptRecord as error:
            if args.discard_corrupt:
                continue
            raise CorruptRecord(
                f"{error}; `lakelog groups delete --discard-corrupt` deletes it, discarding its committed offsets",
                **error.details,
            ) from None
        if args.discard_corrupt:
            why = "does not exist" if group is None else "is served"
            raise BadInput(
                f"lakelog groups delete: group {group_id!r} {why}, not set aside by a corrupt record: "
                "--discard-corrupt deletes only such a group"
            )
        if group is None:
            raise GroupIdNotFound(f"group {group_id!r} does not exist")  # as groups describe says it
        if not group.is_empty():
            raise NonEmptyGroup(f"group {group_id!r} has {len(group.members)} member(s); stop its consumers first")
    for group_id in args.group:
        if args.discard_corrupt:
            # Decided again on the latest state: InvalidRequest if the group is no longer set aside.
            delete_corrupt_group(args.root, group_id)
            print(f"deleted group {group_id} (set aside by a corrupt record; its committed offsets are discarded)")
        else:
            group_admin.delete_group(args.root, group_id)
            print(f"deleted group {group_id}")
    return 0


def _tp_list(partitions: Sequence[TopicPartition]) -> str:
    return ",".join(f"{p.topic}-{p.partition}" for p in partitions) or "-"


def _dash(value: Any) -> Any:
    return "-" if value is None else value


def _jsonable(value: Any) -> Any:
    """dataclasses.asdict output made JSON-able: enums by value, TopicPartitions as topic-partition text."""
    from lakelog.client import TopicPartition
    from lakelog.client.admin import groups as group_admin

    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if isinstance(value, TopicPartition):
        return f"{value.topic}-{value.partition}"
    if isinstance(value, group_admin.ConsumerGroupState):
        return value.value
    return value
