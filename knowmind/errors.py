"""Domain errors raised by services; the HTTP layer maps them to status codes."""

from __future__ import annotations

from uuid import UUID

__all__ = [
    "ConflictError",
    "ForbiddenError",
    "InvalidInputError",
    "KnowmindError",
    "NotFoundError",
    "OverloadedError",
]


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


class ForbiddenError(KnowmindError):
    """The caller may see the thing but not do this to it (a user-bound token and the
    tenant's shared memories, or another user)."""

    status_code = 403


class ConflictError(KnowmindError):
    """The request clashes with what is stored; names the field when one is to blame."""

    status_code = 409

    def __init__(
        self, message: str, field: str | None = None, *, existing_id: UUID | None = None
    ) -> None:
        super().__init__(message)
        self.field = field
        self.existing_id = existing_id  # the stored thing it clashes with (a tenant's name)


class OverloadedError(KnowmindError):
    """Work refused at once rather than queued for minutes: 429 when the tenant's share is
    used up, 503 when the server as a whole is; ``retry_after_s`` hints when to come back."""

    def __init__(self, message: str, *, whole_server: bool, retry_after_s: float) -> None:
        super().__init__(message)
        self.status_code = 503 if whole_server else 429
        self.retry_after_s = retry_after_s
