"""Two processes registering the same schemas at once, in opposite orders, get one id per schema (S2.2, S9.5).

Each registration is decided on the `__schemas` state at the log's end offset and appended only at that offset:
the loser of a race replays the winner's row and decides again, so ids are dense, one per schema, and the
subject has one version per schema, with no lock and no timing bound.
"""

from __future__ import annotations

import json
import multiprocessing

from lakelog.schema_registry import SchemaRegistryClient
from processes.schema_workers import register_schemas

SCHEMAS = 12


def test_S2_2_processes_registering_at_once_get_one_id_per_schema(root):
    schemas = [json.dumps({"type": "record", "name": f"R{n}", "fields": [{"name": "f", "type": "int"}]}) for n in range(SCHEMAS)]
    client = SchemaRegistryClient({"url": f"lakelog:{root}"})
    client.set_compatibility("shared-value", "NONE")
    context = multiprocessing.get_context("spawn")
    start, reports = context.Event(), context.Queue()
    orders = [schemas, schemas[::-1]]
    workers = [
        context.Process(target=register_schemas, args=(root, "shared-value", order, start, reports), daemon=True)
        for order in orders
    ]
    for worker in workers:
        worker.start()
    try:
        start.set()
        answers = [reports.get(timeout=300) for _ in workers]
        for kind, detail in answers:
            assert kind == "registered", detail
        first, second = (detail for _, detail in answers)
        assert first == second
        assert sorted(first.values()) == list(range(1, SCHEMAS + 1))
        versions = client.get_versions("shared-value")
        assert versions == list(range(1, SCHEMAS + 1))
        assert sorted(client.get_version("shared-value", v).schema_id for v in versions) == sorted(first.values())
    finally:
        for worker in workers:
            worker.join(30)
            if worker.is_alive():
                worker.kill()
