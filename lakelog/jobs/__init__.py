"""Exactly-once jobs built on the client: bulk loads (whole and by unit), the transactional batch writer and its
sink records, the consume-transform-produce run, the wait for committed data, the coordinator sweep, the protocol
upgrade, and the view and status tables the Spark applications keep (their engine a parameter: no Spark import)."""
