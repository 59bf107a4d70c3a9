"""Exception types of accpy's public surface."""


class LogicError(ValueError):
    """A nest's iteration logic is invalid (names the statement and what is wrong)."""


class ScheduleError(ValueError):
    """A schedule or plan would change the program's result, or breaks a rule."""


class CompileError(RuntimeError):
    """The C compiler rejected emitted code: carries the compiler's message and the file."""


class KernelError(RuntimeError):
    """A built kernel reported an error while running (bad CPU, model fault, DEBUG mismatch)."""
