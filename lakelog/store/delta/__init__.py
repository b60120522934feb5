"""The Delta log: its actions and schema, snapshots and checkpoints, the strict commit, and tables.

Built on `lakelog.store.io` only; every state change is one commit of exactly the next version.
"""
