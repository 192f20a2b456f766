"""Stopping a run on Ctrl-C (or SIGTERM) at the next iteration boundary, so it can be saved.

A KeyboardInterrupt can land anywhere, also between the updates of two parameters inside
the optimiser step; the state then is no state the run ever had. Instead, the first Ctrl-C
only raises a flag that the trainer reads after each optimiser step, where the model, the
optimiser and the generators agree; it then writes a checkpoint and returns. A second Ctrl-C
raises KeyboardInterrupt at once, leaving the last checkpoint as it was.
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopRequest:
    """Context manager: while active, ``requested`` turns true on the first SIGINT/SIGTERM.

    Signal handlers can only be installed from the main thread; elsewhere the manager does
    nothing and Ctrl-C raises KeyboardInterrupt as usual.
    """

    def __init__(self, message: str = "") -> None:
        self.requested = False
        self.message = message
        self._previous: dict[int, object] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:
            self._restore()
            raise KeyboardInterrupt
        self.requested = True
        if self.message:
            print(self.message, file=sys.stderr, flush=True)

    def _restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._restore()
