"""The one user-facing error type: the CLI turns it into one stderr line and an exit code."""

from __future__ import annotations

# Exit codes of every command (docs/commands.md): 0 success; 1 the thing asked about is
# absent or wrong; 2 usage or environment error.
EXIT_OK = 0
EXIT_ABSENT = 1
EXIT_USAGE = 2


class MpsdError(Exception):
    """A problem the user can act on. ``str(err)`` is one sentence that says what to do next."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code
