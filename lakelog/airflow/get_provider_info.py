"""What Airflow's ProvidersManager reads through the `apache_airflow_provider` entry point.

Importing this module imports nothing of Airflow or of lakelog's clients, so
discovery stays cheap. The layout follows apache-airflow-providers-apache-spark.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "lakelog",
        "name": "lakelog",
        "description": "Kafka's exactly-once semantics on Delta Lake tables: load, transform and wait on committed data.\n",
        "integrations": [
            {
                "integration-name": "lakelog",
                "external-doc-url": "https://github.com/lakelog/lakelog",
                "tags": ["software"],
            }
        ],
        "hooks": [
            {
                "integration-name": "lakelog",
                "python-modules": ["lakelog.airflow.hooks.lakelog", "lakelog.airflow.hooks.spark_submit"],
            }
        ],
        "operators": [
            {
                "integration-name": "lakelog",
                "python-modules": [
                    "lakelog.airflow.operators.load",
                    "lakelog.airflow.operators.transform",
                    "lakelog.airflow.operators.sweep",
                    "lakelog.airflow.operators.sink",
                    "lakelog.airflow.operators.spark_submit",
                ],
            }
        ],
        "sensors": [{"integration-name": "lakelog", "python-modules": ["lakelog.airflow.sensors.committed"]}],
        "triggers": [{"integration-name": "lakelog", "python-modules": ["lakelog.airflow.triggers.committed"]}],
        "connection-types": [{"hook-class-name": "lakelog.airflow.hooks.lakelog.LakelogHook", "connection-type": "lakelog"}],
        "asset-uris": [{"schemes": ["lakelog"], "handler": "lakelog.airflow.assets.sanitize_uri"}],
    }
