"""Importable harness of real processes for tests and the ``fluss-py cluster`` command.

- ``ports``      one allocator of free loopback ports (never the same port twice in a process)
- ``procs``      ``ProcessHandle`` (PID + start time, signal/stop), ``wait_until(cond, timeout)``
- ``zookeeper``  ``ZooKeeperProcess``: a real standalone ZooKeeper, ``four_letter(cmd)``
- ``cluster``    ``LocalCluster``: ZooKeeper + coordinators + tablet servers as detached processes
- ``faults``     kill / pause / resume helpers
"""
