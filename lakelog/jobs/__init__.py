"""Exactly-once jobs built on the client: bulk loads (whole and by unit), the transactional batch writer and its
sink records, the consume-transform-produce run, and the wait for committed data."""
