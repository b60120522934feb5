"""The CLI's log lines: `--log-level` (or $LAKELOG_LOG_LEVEL) picks the level, WARNING by default (issue 12, item 7).

Results go to stdout, log lines and the one-line error to stderr; library code never prints.
"""

from __future__ import annotations

from lakelog.cli import EXIT_BAD_INPUT


def test_log_level_info_shows_what_lakelog_does_and_the_default_shows_warnings_only(lakelog, lake):
    assert lakelog("init", "--root", lake).returncode == 0
    quiet = lakelog("topics", "create", "quiet", "--root", lake)
    assert quiet.returncode == 0, quiet.stderr
    assert "INFO" not in quiet.stderr
    told = lakelog("topics", "create", "told", "--root", lake, "--log-level", "info")
    assert told.returncode == 0, told.stderr
    assert "lakelog: INFO lakelog.log.topics: created topic told with 1 partition(s)" in told.stderr
    assert "INFO" not in told.stdout
    from_env = lakelog("topics", "create", "env", "--root", lake, env={"LAKELOG_LOG_LEVEL": "INFO"})
    assert "created topic env" in from_env.stderr


def test_a_bad_log_level_is_bad_input_in_one_line(lakelog, lake):
    assert lakelog("init", "--root", lake).returncode == 0
    flag = lakelog("topics", "list", "--root", lake, "--log-level", "loud")
    assert flag.returncode == EXIT_BAD_INPUT and "--log-level" in flag.stderr and len(flag.stderr.strip().splitlines()) == 1
    env = lakelog("topics", "list", "--root", lake, env={"LAKELOG_LOG_LEVEL": "loud"})
    assert env.returncode == EXIT_BAD_INPUT and "LAKELOG_LOG_LEVEL" in env.stderr
