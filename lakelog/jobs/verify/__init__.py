"""`lakelog verify`: check a root's logs as a file system check would, without trusting the snapshot loader.

chain.py reads each table's commits raw; files.py checks the files its state names; transactions.py judges open
transactions and committed offsets; repair.py rebuilds checkpoints from the commits; root.py runs them over a
root; report.py prints what was found.
"""

from lakelog.jobs.verify.findings import Finding, PartitionSummary
from lakelog.jobs.verify.report import report_lines
from lakelog.jobs.verify.root import VerifyReport, verify_root

__all__ = ["Finding", "PartitionSummary", "VerifyReport", "report_lines", "verify_root"]
