"""A progress line on stderr: `tuning sgemm: measuring [#######---------] 21/50, best 3.1 ms`."""
from __future__ import annotations

import sys
from typing import Optional, TextIO


class Progress:
    """Redrawn in place on a terminal; on a pipe or file, one line when a phase ends."""

    def __init__(self, label: str, enabled: bool = True, stream: Optional[TextIO] = None, width: int = 24):
        self.label, self.enabled, self.width = label, enabled, width
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def start(self, phase: str, total: int) -> None:
        """Begin a phase (e.g. building, measuring) of `total` steps."""
        self.phase, self.total = phase, total
        self.update(0)

    def update(self, done: int, note: str = "") -> None:
        """Show `done` of the phase's steps, with an optional note."""
        if not self.enabled:
            return
        filled = self.width * done // max(self.total, 1)
        line = (f"tuning {self.label}: {self.phase} [{'#' * filled}{'-' * (self.width - filled)}] "
                f"{done}/{self.total}" + (f", {note}" if note else ""))
        if self.tty:
            self.stream.write("\r\x1b[K" + line + ("\n" if done >= self.total else ""))
        elif done >= self.total:  # a log gets one line per phase
            self.stream.write(line + "\n")
        self.stream.flush()

    def message(self, text: str) -> None:
        """Print a line of text (when progress output is enabled)."""
        if self.enabled:
            self.stream.write(text + "\n")
            self.stream.flush()
