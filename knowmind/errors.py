"""Domain errors raised by services; the HTTP layer maps them to status codes."""

from __future__ import annotations

__all__ = ["ConflictError", "InvalidInputError", "KnowmindError", "NotFoundError"]


class KnowmindError(Exception):
    status_code = 500


class InvalidInputError(KnowmindError):
    """Input that passed type checks but is still unusable; names the offending field."""

    status_code = 422

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class NotFoundError(KnowmindError):
    """Also used for ids that belong to another tenant: their existence is never revealed."""

    status_code = 404


class ConflictError(KnowmindError):
    """The request clashes with what is stored; names the field when one is to blame."""

    status_code = 409

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field
