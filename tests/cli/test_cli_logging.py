"""The CLI's log lines: `--log-level` (or $LAKELOG_LOG_LEVEL) picks the level, WARNING by default (issue 12, item 7).

Results go to stdout, log lines and the one-line error to stderr; library code never prints.
"""

from __future__ import annotations

from lakelog.cli import EXIT_BAD_INPUT


def test_log_level_info_shows_what_lakelog_does_and_the_default_shows_warnings_only(lakelog, lake):
    assert lakelog("init", "--root", lake).returncode == 0
    quiet = lakelog("topics", "create", "--topic", "quiet", "--root", lake)
    assert quiet.returncode == 0, quiet.stderr
    assert "INFO" not in quiet.stderr
    told = lakelog("topics", "create", "--topic", "told", "--root", lake, "--log-level", "info")
    assert told.returncode == 0, told.stderr
    assert "lakelog: INFO lakelog.log.topics: created topic told with 1 partition(s)" in told.stderr
    assert "INFO" not in told.stdout
    from_env = lakelog("topics", "create", "--topic", "env", "--root", lake, env={"LAKELOG_LOG_LEVEL": "INFO"})
    assert "created topic env" in from_env.stderr


def test_a_bad_log_level_is_bad_input_in_one_line(lakelog, lake):
    assert lakelog("init", "--root", lake).returncode == 0
    flag = lakelog("topics", "list", "--root", lake, "--log-level", "loud")
    assert flag.returncode == EXIT_BAD_INPUT and "--log-level" in flag.stderr and len(flag.stderr.strip().splitlines()) == 1
    env = lakelog("topics", "list", "--root", lake, env={"LAKELOG_LOG_LEVEL": "loud"})
    assert env.returncode == EXIT_BAD_INPUT and "LAKELOG_LOG_LEVEL" in env.stderr


def test_great_expectations_info_lines_stay_below_the_default_level(lakelog, lake, tmp_path):
    """GX sets its loggers to INFO ("Created temporary directory ..."): a gated load prints only its one-line error."""
    assert lakelog("init", "--root", lake).returncode == 0
    assert lakelog("topics", "create", "--topic", "orders", "--root", lake).returncode == 0
    suite = tmp_path / "suite.json"
    suite.write_text(
        '{"name": "o", "expectations": [{"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "value.c"}}]}'
    )
    assert lakelog("quality", "set", "--topic", "orders", "--suite", suite, "--root", lake).returncode == 0
    source = tmp_path / "day.jsonl"
    source.write_text('{"c": 1}\n{"c": null}\n')
    refused = lakelog("load", "--topic", "orders", source, "--no-progress", "--root", lake)
    assert refused.returncode != 0
    assert refused.stderr.splitlines() == [refused.stderr.strip()] and refused.stderr.startswith("lakelog: POLICY_VIOLATION: ")
    told = lakelog("load", "--topic", "orders", source, "--no-progress", "--root", lake, "--log-level", "INFO")
    assert "lakelog: INFO great_expectations" in told.stderr  # shown when asked for
