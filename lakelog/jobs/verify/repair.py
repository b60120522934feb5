"""`lakelog verify --repair`: what can be brought back from the commits, and nothing else.

A checkpoint is the state of a version written out, so a truncated or unreadable one is rebuilt from the commits
it summed up (an older checkpoint, or `0.json`, and every commit after it up to its version) and written again in
its place; a `_last_checkpoint` that is unreadable or names a checkpoint that is gone is pointed at the newest
checkpoint that reads. Commit files are never rewritten nor deleted: a damaged or missing commit, or a missing data
file, cannot be repaired, and the finding says which offsets are lost. Orphan data files are left to vacuum.
"""

from __future__ import annotations

from lakelog.errors import KafkaException
from lakelog.jobs.verify import findings as kinds
from lakelog.jobs.verify.chain import Chain, snapshot_at
from lakelog.jobs.verify.findings import Finding
from lakelog.store import Location
from lakelog.store.delta.commit import deleted_file_retention_ms
from lakelog.store.delta.log import LAST_CHECKPOINT, DeltaLog


def repair_checkpoints(location: Location, chain: Chain, now_ms: int) -> list[Finding]:
    """Rebuild the table's unreadable checkpoints and its `_last_checkpoint`; one note per repair or refusal."""
    done: list[Finding] = []
    delta_log = DeltaLog(location)
    for version in sorted(set(chain.bad_checkpoints)):
        snapshot = snapshot_at(location, chain, version)
        if snapshot is None:
            done.append(
                Finding(
                    chain.table,
                    f"checkpoint {version}",
                    kinds.REPAIRED,
                    f"not repaired: the commits up to version {version} are not all kept, so its state cannot be rebuilt",
                )
            )
            continue
        try:
            cutoff_ms = now_ms - deleted_file_retention_ms(snapshot.configuration)
            delta_log.write_checkpoint(snapshot, cutoff_ms)
        except (KafkaException, OSError) as error:
            done.append(
                Finding(chain.table, f"checkpoint {version}", kinds.REPAIRED, f"not repaired: writing it failed: {error}")
            )
            continue
        done.append(
            Finding(
                chain.table,
                f"checkpoint {version}",
                kinds.REPAIRED,
                f"rebuilt from the commits ({len(snapshot.adds)} active file(s)); nothing was lost",
            )
        )
    if _last_checkpoint_needs_repair(chain):
        good = [v for v in sorted(chain.checkpoints, reverse=True) if v not in chain.bad_checkpoints or _rebuilt(done, v)]
        snapshot = snapshot_at(location, chain, good[0]) if good else None
        if snapshot is None:
            done.append(Finding(chain.table, LAST_CHECKPOINT, kinds.REPAIRED, "not repaired: no checkpoint reads"))
        else:
            # It names a newer checkpoint than any that reads, or none: write the one it should name.
            delta_log.io.delete(delta_log.file_uri(LAST_CHECKPOINT))
            delta_log.write_checkpoint(snapshot, now_ms - deleted_file_retention_ms(snapshot.configuration))
            done.append(Finding(chain.table, LAST_CHECKPOINT, kinds.REPAIRED, f"now names checkpoint {good[0]}"))
    return done


def _last_checkpoint_needs_repair(chain: Chain) -> bool:
    return any(finding.kind == kinds.BAD_LAST_CHECKPOINT for finding in chain.findings)


def _rebuilt(done: list[Finding], version: int) -> bool:
    return any(f.where == f"checkpoint {version}" and not f.message.startswith("not repaired") for f in done)


__all__ = ["repair_checkpoints"]
