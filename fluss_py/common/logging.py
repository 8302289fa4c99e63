"""Log file setup for server processes: ``<log.dir>/coordinator-server.log`` or ``tablet-server.log``.

Format (one line per record; the logger name is the component)::

    2026-11-29 12:00:00,123 INFO  [main] CoordinatorServer - Became coordinator leader with epoch 1

Loggers named ``fluss_py.<x>.<Component>`` are shown as ``<Component>``. Who may call: the CLI, once,
before the server starts.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

_FORMAT = "%(asctime)s %(levelname)-5s [%(threadName)s] %(component)s - %(message)s"


class _ComponentFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.component = record.name.rsplit(".", 1)[-1]
        return True


def setup_logging(log_dir: str | Path, file_name: str, level: str = "INFO") -> Path:
    """Send the root logger to ``<log_dir>/<file_name>`` (appending); return the file's path."""
    directory = Path(log_dir)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / file_name
    threading.current_thread().name = "main"
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter(_FORMAT))
    handler.addFilter(_ComponentFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.getLogger("kazoo").setLevel(max(logging.INFO, root.level))
    return path
