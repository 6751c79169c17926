"""The domain exceptions: the CLI turns each into a clean message and exit code 2."""


class GradcheckError(Exception):
    """A problem the user can fix; its message says what to change."""


class UsageError(GradcheckError):
    """A command line that cannot be acted on: a bad option, engine or path."""


class CaseFileError(UsageError):
    """A case file, or a path that should hold some, cannot be used.

    `message` says what is wrong and `line` (1-based) where, when known; reporters
    print ``file:line: message``.
    """

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


class CaseProblems(CaseFileError):
    """Several problems of one case, each a `CaseFileError`, in the order of their lines."""

    def __init__(self, problems: list[CaseFileError]) -> None:
        self.problems = sorted(problems, key=lambda p: p.line or 0)
        first = self.problems[0]
        super().__init__(first.message, first.line)
