"""Rebalance: the pure planner (``planner.py``), trigger checks (``triggers.py``) and the executor that runs
a plan on the coordinator's event loop (``executor.py``). Design: ``docs/rebalance.md``."""
