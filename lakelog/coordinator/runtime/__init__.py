"""What every coordinator runs on: the state log, the record codec, the one Outcome, the key hash."""
