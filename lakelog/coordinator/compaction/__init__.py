"""Compaction of the internal logs by record key (S9.3): the keys, and the pass the sweep runs over both coordinators."""
