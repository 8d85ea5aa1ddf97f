"""Offline language identification (py3langid, BSD, model shipped in the wheel), answered as
the PostgreSQL text-search configuration of the language."""

from __future__ import annotations

from functools import cache
from typing import Any

__all__ = ["LANGUAGE_CONFIGS", "LanguageDetector", "language_detector"]

# ISO 639-1 code → PostgreSQL snowball configuration, for the languages both know.
LANGUAGE_CONFIGS = {
    "ar": "arabic",
    "ca": "catalan",
    "da": "danish",
    "de": "german",
    "el": "greek",
    "en": "english",
    "es": "spanish",
    "eu": "basque",
    "fi": "finnish",
    "fr": "french",
    "ga": "irish",
    "hi": "hindi",
    "hu": "hungarian",
    "hy": "armenian",
    "id": "indonesian",
    "it": "italian",
    "lt": "lithuanian",
    "ne": "nepali",
    "nl": "dutch",
    "no": "norwegian",
    "pt": "portuguese",
    "ro": "romanian",
    "ru": "russian",
    "sr": "serbian",
    "sv": "swedish",
    "ta": "tamil",
    "tr": "turkish",
}


class LanguageDetector:
    """Which configured language a text is in; None when unsure (short or mixed text)."""

    def __init__(self, min_confidence: float = 0.8) -> None:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier

        self._identifier: Any = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        self._identifier.set_languages(sorted(LANGUAGE_CONFIGS))
        self.min_confidence = min_confidence

    def detect(self, text: str) -> str | None:
        code, confidence = self._identifier.classify(text)
        if confidence < self.min_confidence:
            return None
        return LANGUAGE_CONFIGS.get(str(code))


@cache
def language_detector() -> LanguageDetector:
    """The process-wide detector (loading the model takes about half a second)."""
    return LanguageDetector()
