"""Time expressions in German and English questions, resolved against a reference time into a
window of event time (``occurred_at``).

The expressions are found by patterns (cheap: most questions have none, and those cost a few
regular-expression scans); each found phrase is then dated by ``dateparser`` relative to the
reference time, and its period (day, week, month, year) becomes the window. Seasons, which
``dateparser`` does not know, and "before/after <time>" are handled here; a question asked with
"when"/"wann" is recognised as asking for a time.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

__all__ = ["TimeWindow", "asks_when", "mentions_time", "resolve_window"]

_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "januar|jänner|februar|märz|maerz|mai|juni|juli|oktober|dezember|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|okt|nov|dec|dez"
)
_UNITS_EN = r"days?|weeks?|months?|years?"
_UNITS_DE = r"tag(?:en|e)?|wochen?|monat(?:en|e)?|jahr(?:en|e)?"
_NUMBER = (
    r"\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|a few|few|couple of|a couple of|"
    r"einem|einer|zwei|drei|vier|fünf|sechs|sieben|acht|neun|zehn|ein paar|einigen"
)
_WEEKDAYS = (
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
    r"montag|dienstag|mittwoch|donnerstag|freitag|samstag|sonnabend|sonntag"
)
_LAST = r"last|past|previous|this|letzte[nmrs]?|vergangene[nmrs]?|vorige[nmrs]?|diese[nmrs]?"
_NEXT = r"next|coming|nächste[nmrs]?|kommende[nmrs]?"
_PERIOD_WORDS = r"week|month|year|weekend|woche|monat|jahr|wochenende|" + _WEEKDAYS
_SEASONS = {
    "spring": 3, "frühling": 3, "frühjahr": 3, "summer": 6, "sommer": 6,
    "autumn": 9, "fall": 9, "herbst": 9, "winter": 12,
}  # fmt: skip
_SEASON_WORDS = "|".join(_SEASONS)

# Each alternative is one expression dateparser can date (or a season, handled here).
_EXPRESSION = re.compile(
    r"(?P<expr>"
    r"\b(?:yesterday|today|tonight|tomorrow|vorgestern|gestern|heute|übermorgen)\b"
    r"|(?<!guten )(?<!heute )(?<!gestern )\bmorgen\b"
    rf"|\b(?:{_NUMBER})\s+(?:{_UNITS_EN})\s+ago\b"
    rf"|\bvor\s+(?:{_NUMBER})\s+(?:{_UNITS_DE})\b"
    rf"|\bin\s+(?:{_NUMBER})\s+(?:{_UNITS_EN}|{_UNITS_DE})\b"
    rf"|\b(?:{_LAST}|{_NEXT})\s+(?:{_PERIOD_WORDS}|{_SEASON_WORDS})\b"
    rf"|\b(?:in\s+|im\s+)?(?:{_SEASON_WORDS})(?:\s+(?:of\s+)?\d{{4}})?\b"
    rf"|\b\d{{1,2}}\.?\s+(?:{_MONTHS})\.?(?:,?\s+\d{{4}})?\b"
    rf"|\b(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?\b"
    rf"|\b(?:{_MONTHS})\.?(?:\s+(?:of\s+)?\d{{4}})?\b"
    r"|\b\d{4}-\d{2}-\d{2}\b"
    r"|\b\d{1,2}\.\d{1,2}\.\d{4}\b"
    r"|\b(?:in|im\s+jahr|im|during|year)\s+(?:19|20)\d{2}\b"
    r")",
    re.IGNORECASE,
)
# A span of time a text states ("for three years", "seit zwei Wochen", "four months now"): it
# dates what it speaks of (against when it was said) but names no window of its own.
_DURATION = re.compile(
    rf"\b(?:for|seit)\s+(?:about\s+|almost\s+|over\s+|etwa\s+|fast\s+|über\s+)?"
    rf"(?:{_NUMBER})\s+(?:{_UNITS_EN}|{_UNITS_DE})\b"
    rf"|\b(?:{_NUMBER})\s+(?:{_UNITS_EN})\s+(?:now|later|earlier|before|after)\b",
    re.IGNORECASE,
)
# A time of day ("at 3 pm", "15:30", "um halb zwölf", "um 14 Uhr", "at noon"): it answers a
# "when"/"wann" question as a date does, but names no window.
_CLOCK = re.compile(
    r"\b\d{1,2}:\d{2}\b"
    r"|\b\d{1,2}(?:[.:]\d{2})?\s*(?:a\.m\.|p\.m\.|am\b|pm\b|uhr\b|o'clock\b)"
    r"|\b(?:at|um|gegen|ab)\s+(?:halb|viertel nach|viertel vor|kurz nach|kurz vor)?\s*"
    r"(?:\w+)\s+(?:uhr|o'clock)\b"
    r"|\bum\s+halb\s+\w+"
    r"|\b(?:at|um|gegen)\s+(?:noon|midnight|mittag|mitternacht)\b",
    re.IGNORECASE,
)
# Every alternative of _EXPRESSION and _DURATION holds one of these words, or a year (a date's too).
_TIME_WORDS = frozenset((
    "yesterday", "today", "tonight", "tomorrow", "vorgestern", "gestern", "heute", "morgen",
    "übermorgen", "ago", "day", "days", "week", "weeks", "month", "months", "year", "years",
    "weekend", "woche", "wochen", "wochenende", "monat", "monate", "monaten", "jahr", "jahre",
    "jahren", "tag", "tage", "tagen", *f"{_MONTHS}|{_WEEKDAYS}|{_SEASON_WORDS}".split("|"),
))  # fmt: skip
_WORD = re.compile(r"\w+")
_YEAR = re.compile(r"(?:19|20)\d\d")
_MENTIONS: dict[int, bool] = {}
_REMEMBERED = 50_000  # texts (a hash and a bool each: about 4 MB)
_REACH = 40  # characters: "a couple of weeks ago", "vor ein paar Jahren", "12. Dezember 2023"
_BEFORE = re.compile(r"\b(?:before|prior to|vor dem|vor der|vorher)\s*$", re.IGNORECASE)
# up to the end of the time named: "as of December 2023", "by May", "bis Ende Mai"
_UNTIL = re.compile(r"\b(?:as of|by|until|till|bis(?: zum| zur| ende| end)?)\s*$", re.IGNORECASE)
_AFTER = re.compile(r"\b(?:after|nach dem|nach der|nach)\s*$", re.IGNORECASE)
_SINCE = re.compile(r"\b(?:since|seit(?: dem| der)?)\s*$", re.IGNORECASE)  # the time named included
_WHEN = re.compile(
    r"^\s*(?:when|what (?:date|day|month|year|time)|which (?:date|day|month|year)|"
    r"how long ago|wann|an welchem tag|in welchem (?:jahr|monat)|seit wann|wie lange her)\b",
    re.IGNORECASE,
)
# "may" alone is a verb far more often than a month; so is "march" now and then — unless a
# preposition that takes a time stands before it ("in May", "since March", "im Mai")
_AMBIGUOUS = {"may", "mar", "march", "jan", "sep", "aug", "dec", "nov", "oct"}
_TIME_PREPOSITION = re.compile(
    r"\b(?:in|im|during|since|until|till|by|before|after|of|early|late|mid|last|this|next|"
    r"seit|bis|vor|nach|ab|anfang|ende|mitte)\s*$",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class TimeWindow:
    start: datetime  # inclusive
    end: datetime  # exclusive
    phrase: str  # the words it was read from

    def explain(self) -> dict[str, str]:
        return {"from": self.start.isoformat(), "to": self.end.isoformat(), "phrase": self.phrase}


def asks_when(question: str) -> bool:
    """A question that asks for a time ("When did …", "Wann …")."""
    return bool(_WHEN.search(question))


def mentions_time(text: str) -> bool:
    """Whether a text names a time ("yesterday", "last week", "im Mai 2023", "2022-05-07"):
    the memories that answer a "when" question usually do. Read per candidate on every
    recall: remembered per text (by its hash, for the last ``_REMEMBERED`` texts)."""
    key = hash(text)
    known = _MENTIONS.get(key)
    if known is None:
        if len(_MENTIONS) >= _REMEMBERED:
            _MENTIONS.clear()
        known = _MENTIONS[key] = _mentions_time(text)
    return known


def _mentions_time(text: str) -> bool:
    """The expression runs only around the words every time expression contains (a day,
    month, season or period word, a unit, "ago", a year): ``_REACH`` characters either side
    hold the longest expression, and most texts have few such words. A time of day counts."""
    if _CLOCK.search(text):
        return True
    for word in _WORD.finditer(text):
        token = word.group().lower()
        if token not in _TIME_WORDS and not _YEAR.fullmatch(token):
            continue
        start = text.rfind(" ", 0, max(0, word.start() - _REACH)) + 1
        end = text.find(" ", word.end() + _REACH)
        window = text[start : len(text) if end < 0 else end]
        if any(True for _ in _time_phrases(window)) or _DURATION.search(window):
            return True
    return False


def _time_phrases(text: str) -> Iterator[re.Match[str]]:
    """The time expressions in ``text``, but for a lone ambiguous month word ("may") with no
    preposition before it."""
    for match in _EXPRESSION.finditer(text):
        phrase = match["expr"].strip().lower()
        if phrase in _AMBIGUOUS and not _TIME_PREPOSITION.search(text[: match.start()]):
            continue
        yield match


def resolve_window(question: str, reference: datetime) -> TimeWindow | None:
    """The event-time window the question's first time expression names, relative to
    ``reference`` (which must be timezone-aware); None when it names none."""
    for match in _time_phrases(question):
        phrase = match["expr"].strip()
        try:
            window = _window(phrase, reference)
        except (ValueError, OverflowError):  # a window beyond the years 1 to 9999
            continue
        if window is None:
            continue
        before = question[: match.start()]
        if _BEFORE.search(before):
            return TimeWindow(_EPOCH, window.start, f"before {phrase}")
        if _AFTER.search(before):
            return TimeWindow(window.end, _FAR, f"after {phrase}")
        if _SINCE.search(before):
            return TimeWindow(window.start, _FAR, f"since {phrase}")
        if _UNTIL.search(before):
            return TimeWindow(_EPOCH, window.end, f"until {phrase}")
        return window
    return None


_EPOCH = datetime(1, 1, 1, tzinfo=UTC)
_FAR = datetime(9999, 12, 31, tzinfo=UTC)


def _window(phrase: str, reference: datetime) -> TimeWindow | None:
    season = _season(phrase, reference)
    if season is not None:
        return season
    parsed = _date_data(phrase, reference)
    if parsed is None or parsed.date_obj is None:
        return None
    moment = parsed.date_obj if parsed.date_obj.tzinfo else parsed.date_obj.replace(tzinfo=UTC)
    day = moment.date()
    period = parsed.period or "day"
    if period == "week":
        start = day - timedelta(days=day.weekday())
        return _span(start, start + timedelta(days=7), phrase, reference)
    if period == "month":
        start = day.replace(day=1)
        return _span(start, _add_months(start, 1), phrase, reference)
    if period == "year":
        return _span(date(day.year, 1, 1), date(day.year + 1, 1, 1), phrase, reference)
    return _span(day, day + timedelta(days=1), phrase, reference)


def _season(phrase: str, reference: datetime) -> TimeWindow | None:
    words = phrase.lower().split()
    name = next((w for w in words if w in _SEASONS), None)
    if name is None:
        return None
    first = _SEASONS[name]
    year = next((int(w) for w in words if w.isdigit() and len(w) == 4), None)
    if year is None:  # the most recent such season that has begun, the one before if "last"
        year = reference.year if reference.month >= first else reference.year - 1
        if any(w.startswith(("last", "letzt", "vergangen", "vorig", "past")) for w in words):
            begun = date(year, first, 1)
            ends = _add_months(begun, 3)
            if ends > reference.date():  # still running: "last summer" is the one before
                year -= 1
        elif any(w.startswith(("next", "coming", "nächst", "kommend")) for w in words):
            year = reference.year + (reference.month >= first)  # the next one not yet begun
    start = date(year, first, 1)
    return _span(start, _add_months(start, 3), phrase, reference)


def _span(start: date, end: date, phrase: str, reference: datetime) -> TimeWindow:
    zone = reference.tzinfo or UTC
    return TimeWindow(
        datetime(start.year, start.month, start.day, tzinfo=zone),
        datetime(end.year, end.month, end.day, tzinfo=zone),
        phrase,
    )


def _add_months(day: date, months: int) -> date:
    month = day.month - 1 + months
    return date(day.year + month // 12, month % 12 + 1, 1)


def _date_data(phrase: str, reference: datetime) -> Any:
    """dateparser's reading of one phrase (German or English) relative to ``reference``."""
    from dateparser.date import DateDataParser

    settings = {
        "RELATIVE_BASE": reference.replace(tzinfo=None),
        "PREFER_DATES_FROM": "past",
        "RETURN_TIME_AS_PERIOD": True,
        "PREFER_DAY_OF_MONTH": "first",
    }
    return DateDataParser(languages=["en", "de"], settings=settings).get_date_data(phrase)
