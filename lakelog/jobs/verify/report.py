"""The text `lakelog verify` prints: a table of the partitions, then the findings, the notes and the repairs."""

from __future__ import annotations

from lakelog.jobs.verify.findings import SUMMARY_HEADERS, Finding
from lakelog.jobs.verify.root import VerifyReport


def report_lines(report: VerifyReport) -> list[str]:
    """The report as lines: tab-separated tables, as the other commands print."""
    lines = ["\t".join(SUMMARY_HEADERS)]
    lines += ["\t".join(summary.row()) for summary in report.partitions]
    lines += _section("findings", report.findings)
    lines += _section("notes", report.notes)
    lines += _section("repairs", report.repairs)
    lost = sorted({span for finding in report.findings for span in finding.lost})
    verdict = "clean" if report.clean else f"{len(report.findings)} finding(s)"
    lines.append(f"verify: {len(report.partitions)} partition table(s), {verdict}")
    if lost:
        tables = sorted({finding.table for finding in report.findings if finding.lost})
        lines.append(f"verify: offsets lost in {', '.join(tables)}: see the findings")
    return lines


def _section(title: str, items: list[Finding]) -> list[str]:
    if not items:
        return []
    return ["", f"{title}:", *(item.line() for item in items)]


__all__ = ["report_lines"]
