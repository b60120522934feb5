"""Great Expectations is imported lazily (issue 13 item 5): importing lakelog, the CLI and lakelog.quality, and
producing to an ungated topic, never import it (it costs 2-7 s)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_S11_1_an_ungated_producer_never_imports_great_expectations_nor_creates_results(tmp_path):
    script = textwrap.dedent(
        """
        import sys
        import lakelog, lakelog.cli, lakelog.sql, lakelog.quality
        from lakelog.client import Producer
        from lakelog.log import create_topic
        from lakelog.quality import read_suite, read_results

        root = sys.argv[1]
        create_topic(root, "plain", 1)
        assert read_suite(root, "plain") is None
        producer = Producer({"lakelog.root": root, "transactional.id": "t"})
        producer.init_transactions()
        producer.begin_transaction()
        producer.produce("plain", b'{"amount_cents": 1}', key=b"k")
        producer.commit_transaction()
        read_results(root)
        from lakelog.quality.results import results_log_exists
        assert not results_log_exists(root)  # no gated topic written: no results log created
        print("great_expectations imported:", "great_expectations" in sys.modules)
        """
    )
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "great_expectations imported: False"
