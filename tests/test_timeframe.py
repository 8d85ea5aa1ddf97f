"""Time expressions in German and English questions, resolved against a reference time (unit
tests: no database)."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from knowmind.recall.timeframe import asks_when, mentions_time, resolve_window

REFERENCE = datetime(2023, 7, 15, 12, 0, tzinfo=UTC)  # a Saturday


@pytest.mark.parametrize(
    ("question", "start", "end"),
    [
        ("What did Caroline do last week?", date(2023, 7, 3), date(2023, 7, 10)),
        ("Was hat Caroline letzte Woche gemacht?", date(2023, 7, 3), date(2023, 7, 10)),
        ("Wo war ich gestern?", date(2023, 7, 14), date(2023, 7, 15)),
        ("Where was I yesterday?", date(2023, 7, 14), date(2023, 7, 15)),
        ("Was hat Caroline im Mai 2023 gemacht?", date(2023, 5, 1), date(2023, 6, 1)),
        ("Who called on May 3, 2023?", date(2023, 5, 3), date(2023, 5, 4)),
        ("Wer hat am 3. Mai 2023 angerufen?", date(2023, 5, 3), date(2023, 5, 4)),
        ("Which book did she read in 2022?", date(2022, 1, 1), date(2023, 1, 1)),
        ("Was passierte vor zwei Jahren?", date(2021, 1, 1), date(2022, 1, 1)),
        ("What happened two years ago?", date(2021, 1, 1), date(2022, 1, 1)),
        # summer 2023 is still running: "last summer" is the one before
        ("What did we do last summer?", date(2022, 6, 1), date(2022, 9, 1)),
        ("Wie war der Urlaub im Sommer 2021?", date(2021, 6, 1), date(2021, 9, 1)),
        ("What did we do last month?", date(2023, 6, 1), date(2023, 7, 1)),
        # a month word that could be a verb is a month after a preposition of time
        ("Which outdoor spot did Joanna visit in May?", date(2023, 5, 1), date(2023, 6, 1)),
        # plans: what lies ahead of the reference time
        ("What will we do tomorrow?", date(2023, 7, 16), date(2023, 7, 17)),
        ("Was machen wir morgen?", date(2023, 7, 16), date(2023, 7, 17)),
        ("What is planned next week?", date(2023, 7, 17), date(2023, 7, 24)),
        ("Was steht nächsten Monat an?", date(2023, 8, 1), date(2023, 9, 1)),
        ("Where will she go next summer?", date(2024, 6, 1), date(2024, 9, 1)),
    ],
)
def test_a_time_expression_becomes_a_window(question, start, end):
    window = resolve_window(question, REFERENCE)
    assert window is not None, question
    assert (window.start.date(), window.end.date()) == (start, end)
    assert window.start.tzinfo is not None


def test_before_and_after_open_the_window_on_one_side():
    before = resolve_window("What did Jon do before May 2023?", REFERENCE)
    assert before is not None and before.end == datetime(2023, 5, 1, tzinfo=UTC)
    assert before.start.year == 1 and before.phrase == "before May 2023"
    after = resolve_window("Was hat John nach dem 10. Juni 2023 gemacht?", REFERENCE)
    assert after is not None and after.start == datetime(2023, 6, 11, tzinfo=UTC)
    assert after.end.year == 9999


def test_since_and_until_include_the_time_they_name():
    since = resolve_window("Was hat sie seit März 2023 gemacht?", REFERENCE)
    assert since is not None and since.start == datetime(2023, 3, 1, tzinfo=UTC)
    assert since.end.year == 9999
    until = resolve_window("How many pets did Andrew have, as of September 2023?", REFERENCE)
    assert until is not None and until.end == datetime(2023, 10, 1, tzinfo=UTC)
    assert until.start.year == 1 and until.phrase == "until September 2023"


def test_questions_without_a_time_name_no_window():
    for question in (
        "What may I do?",  # "may" the verb, not the month
        "Which city do I live in now?",
        "Wer leitet das Projekt Atlas?",
        "When did Maria donate her car?",  # asks for a time, names none
    ):
        assert resolve_window(question, REFERENCE) is None, question


def test_questions_that_ask_for_a_time():
    assert asks_when("When did Maria donate her car?")
    assert asks_when("Wann hat Maria ihr Auto gespendet?")
    assert asks_when("In welchem Jahr war das?")
    assert not asks_when("Who did Maria have dinner with?")
    assert not asks_when("Was hat Maria gespendet?")


def test_texts_that_state_a_time():
    for text in (
        "I went to a LGBTQ support group yesterday and it was so powerful.",
        "Wir waren letzte Woche in Hamburg.",
        "The concert was on 12 May 2023.",
        "Vor zwei Jahren habe ich angefangen zu malen.",
        "Alright, see you tomorrow!",  # a plan
        "Let's do it next month when the weather is better.",
        "I've had them for 3 years now and they bring me joy.",  # a span: dates its start
        "Ich spiele seit zwei Jahren Geige.",
        "It happened in May.",
        "We moved here last May.",
        "Die Kantine öffnet werktags um halb zwölf.",  # a time of day answers "wann" too
        "The stand-up is at 9:30 every morning.",
        "Der Server wird um drei Uhr gepatcht.",
        "We meet at 3 pm.",
    ):
        assert mentions_time(text), text
    for text in (
        "You may like it.",
        "Das Projekt Atlas leitet Jan Becker.",
        "Yes, that one!",
        "Guten Morgen, Jan!",  # a greeting, not "tomorrow"
        "I am at home.",
        "Version 2.10 is out.",
    ):
        assert not mentions_time(text), text
