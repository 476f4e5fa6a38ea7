"""The project's one user-facing error type."""


class InputError(ValueError):
    """Bad user input: one-line message naming the constraint and the values given."""
