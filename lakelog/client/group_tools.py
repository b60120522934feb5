"""What `lakelog groups` does beyond the Admin API's group calls (lakelog.client.admin.groups), as
kafka-consumer-groups.sh does beyond Kafka's: member counts of every listed group read through one coordinator, and
the deletion of a group set aside by a `__consumer_offsets` record that does not decode."""

from __future__ import annotations

from collections.abc import Iterable

from lakelog.client.admin import groups as group_admin
from lakelog.coordinator.group.coordinator import GroupCoordinator
from lakelog.store import Location


def list_groups_with_members(
    root: str | Location, states: Iterable[group_admin.ConsumerGroupState] | None = None
) -> list[tuple[group_admin.ConsumerGroupListing, int | None]]:
    """Every group (of `states`, default all) with its member count: None for a group set aside by a corrupt record
    (UNKNOWN, with no members to count) or deleted since it was listed."""
    wanted = None if states is None else set(states)
    coordinator = GroupCoordinator(root)
    found: list[tuple[group_admin.ConsumerGroupListing, int | None]] = []
    for listing in group_admin.list_groups(root):
        if wanted is not None and listing.state not in wanted:
            continue
        unknown = listing.state is group_admin.ConsumerGroupState.UNKNOWN
        described = None if unknown else coordinator.describe(listing.group_id)
        found.append((listing, None if described is None else len(described.members)))
    return found


def delete_corrupt_group(root: str | Location, group_id: str) -> None:
    """Delete a group set aside by a record that does not decode, discarding its committed offsets; decided on the
    latest state (InvalidRequest if the group is no longer set aside, S8.3)."""
    GroupCoordinator(root).delete_group(group_id, discard_corrupt=True)


__all__ = ["delete_corrupt_group", "list_groups_with_members"]
