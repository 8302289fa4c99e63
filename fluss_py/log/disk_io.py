"""The decorator of a ``LogTablet`` call that touches the disk (docs/storage.md §10)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from fluss_py.errors import StorageError

if TYPE_CHECKING:
    from fluss_py.log.tablet import LogTablet

IoErrorHook = Callable[["LogTablet", BaseException], None]
_F = TypeVar("_F", bound=Callable[..., Any])


def disk_io(method: _F) -> _F:
    """A call that touches the disk: an ``OSError`` (or the ``StorageError`` wrapping one) is reported to
    the tablet's ``io_error`` hook (the data dir's failure handling, docs/storage.md §10) and re-raised."""

    @functools.wraps(method)
    def wrapper(self: LogTablet, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except (OSError, StorageError) as e:
            if self.io_error is not None and not self.closed:  # a closed log's EBADF says nothing of the disk
                self.io_error(self, e)
            raise

    return wrapper  # type: ignore[return-value]
