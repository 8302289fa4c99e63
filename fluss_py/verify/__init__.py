"""``fluss-py verify``: a Jepsen-style check of a cluster under faults (see docs/fault-testing.md).

- ``history``   the events of a run (sends, acks, failures, reads, faults) and their JSON-lines codec
- ``workload``  the client process: idempotent acks=all producers with unique values + tailing consumers
- ``checker``   pure: history + final log + replicas -> violations (lost, duplicated, moved, reordered, ...)
- ``schedule``  pure: a seeded random schedule of faults
- ``runner``    starts the cluster on test hosts, runs workload and schedule, heals, reads, checks, reports
- ``plot``      the timeline (each send's latency over time, fault intervals shaded) as SVG
"""
