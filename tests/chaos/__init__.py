"""Jepsen-style chaos checks: generator (what to do), client (do it and record a history), nemesis
(faults), checker (judge the history). Modelled on Jepsen's Kafka workload (`jepsen/tests/kafka.clj`)."""
