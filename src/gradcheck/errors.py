"""The domain exceptions: the CLI turns each into a clean message and exit code 2."""


class GradcheckError(Exception):
    """A problem the user can fix; its message says what to change."""


class UsageError(GradcheckError):
    """A command line that cannot be acted on: a bad option, engine or path."""
