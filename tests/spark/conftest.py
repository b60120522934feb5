"""One local Spark session for every Spark test (a cold start costs 7-10 s), and topic histories to read."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark(s3):
    """A shared local[2] session, small and quiet: no UI, two shuffle partitions, 2 GiB for the driver.

    Started after the S3 emulator (`s3`), whose AWS_* settings are then in os.environ: the JVM, and the
    Python workers it starts (the data source's planner among them), inherit them, so `s3://` roots
    named by a string resolve to the emulator there too.
    """
    from pyspark_lakelog import local_session

    session = local_session("lakelog-tests")
    yield session
    session.stop()
