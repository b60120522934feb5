"""What Spark's own event log (`spark.eventLog.enabled`) says about where an application's tasks ran.

The log is JSON lines; `SparkListenerJobStart` names a job's stages and its description (`setJobDescription`),
`SparkListenerTaskEnd` gives each task attempt's stage, executor, partition index, speculative flag and end reason.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TaskEnd:
    stage_id: int
    index: int
    attempt: int
    executor_id: str
    speculative: bool
    reason: str


@dataclass(frozen=True)
class EventLog:
    tasks: tuple[TaskEnd, ...]
    # Job description (None: no description) -> the ids of its stages.
    stages_by_job: dict[str | None, tuple[int, ...]]

    @classmethod
    def read(cls, folder: Path) -> EventLog:
        """The one application's log in `folder` (a folder per application: `spark.eventLog.dir`)."""
        (path,) = [path for path in folder.iterdir() if not path.name.startswith(".")]
        # Spark 4 rolls its logs by default: a folder `eventlog_v2_<app>` of `events_<n>_<app>` files.
        files = sorted(path.glob("events_*"), key=lambda file: int(file.name.split("_")[1])) if path.is_dir() else [path]
        lines = [line for file in files for line in file.read_text().splitlines()]
        tasks, stages = [], defaultdict(list)
        for line in lines:
            event = json.loads(line)
            if event["Event"] == "SparkListenerJobStart":
                description = (event.get("Properties") or {}).get("spark.job.description")
                stages[description].extend(event["Stage IDs"])
            elif event["Event"] == "SparkListenerTaskEnd":
                info = event["Task Info"]
                tasks.append(
                    TaskEnd(
                        event["Stage ID"],
                        info["Index"],
                        info["Attempt"],
                        info["Executor ID"],
                        bool(info.get("Speculative")),
                        event["Task End Reason"]["Reason"],
                    )
                )
        return cls(tuple(tasks), {key: tuple(value) for key, value in stages.items()})

    def executors_by_stage(self, description: str | None = None) -> dict[int, list[str]]:
        """Stage id -> the distinct executor ids its task attempts ran on (of the jobs with this description, or all)."""
        wanted = set(self.stages_by_job.get(description, ())) if description is not None else None
        found: dict[int, set[str]] = defaultdict(set)
        for task in self.tasks:
            if wanted is None or task.stage_id in wanted:
                found[task.stage_id].add(task.executor_id)
        return {stage: sorted(executors) for stage, executors in sorted(found.items())}

    def spread_over_two(self, description: str) -> bool:
        """Whether some stage of the jobs with `description` ran tasks in two executors or more."""
        return any(len(executors) >= 2 for executors in self.executors_by_stage(description).values())


__all__ = ["EventLog", "TaskEnd"]
