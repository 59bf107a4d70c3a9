"""Exception types of accpy's public surface."""


class LogicError(ValueError):
    """A nest's iteration logic is invalid (names the statement and what is wrong)."""


class ScheduleError(ValueError):
    """A schedule or plan would change the program's result, or breaks a rule."""


class CompileError(RuntimeError):
    """The C compiler rejected emitted code: carries the compiler's message and the file."""


class KernelError(RuntimeError):
    """A built kernel reported an error while running (bad CPU, model fault, DEBUG mismatch)."""


class InputWriteWarning(UserWarning):
    """Iteration logic writes to an INPUT array (Accera builds it): the array is treated as
    INPUT_OUTPUT. `warnings.simplefilter("error", acc.InputWriteWarning)` refuses it instead."""


class InputWriteError(LogicError, InputWriteWarning):
    """The refusal of a write to an INPUT array, when InputWriteWarning is turned into an error
    (a LogicError, as the strict check always raised, and the warning category itself)."""


class LimitError(ValueError):
    """A plan asks more of its target than the target has: threads per block, shared memory,
    registers, grid dimensions. The message names the limit, the target and what asked for it."""
