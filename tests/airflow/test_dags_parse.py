"""Every DAG in airflow/dags parses with Airflow's own DagBag, with and without a lakelog connection defined."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

DAGS = Path(__file__).resolve().parents[2] / "airflow" / "dags"
SHIPPED = {"lakelog_sweep", "lakelog_views", "lakelog_daily_backfill", "lakelog_transform"}


@pytest.mark.parametrize("connection", [False, True], ids=["no connection", "connection"])
def test_the_shipped_dags_parse(monkeypatch, tmp_path, connection):
    from airflow.dag_processing.dagbag import DagBag

    if connection:
        monkeypatch.setenv("AIRFLOW_CONN_LAKELOG_DEFAULT", json.dumps({"conn_type": "lakelog", "extra": {"root": str(tmp_path)}}))
    else:
        monkeypatch.delenv("AIRFLOW_CONN_LAKELOG_DEFAULT", raising=False)
    bag = DagBag(str(DAGS))
    assert bag.import_errors == {}
    assert SHIPPED <= set(bag.dag_ids)
    assert bag.dags["lakelog_daily_backfill"].get_task("load_day").topic == "events"
