"""What every coordinator runs on: the state log, the record codec and keys, internal compaction, the one Outcome."""
