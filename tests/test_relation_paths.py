"""The relation-path stage on the real database: questions that name an entity and ask along
one to three relations (German and English, active and passive), answered by the memories that
state the path's final hop, then its bridges; nothing when no path fits, and no statement when
the question names no entity or asks for no relation."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import pytest

from knowmind.linking.matching import MatchedEntity, match_entities
from knowmind.recall.base import RecallRequest, StageContext
from knowmind.recall.paths import RelationPathStage
from knowmind.recall.relation_phrases import parse_question
from knowmind.store.search import MemoryFilters
from tests.conftest import TenantAccess, make_tenant


def rel(subject: str, subject_class: str, predicate: str, obj: str, obj_class: str) -> dict:
    return {
        "subject": subject,
        "subject_class": subject_class,
        "predicate": predicate,
        "object": obj,
        "object_class": obj_class,
    }


MIRIAM = ("Miriam Hoffmann", "Person")
JAN = ("Jan Becker", "Person")
TOBIAS = ("Tobias Wolf", "Person")
LENA = ("Lena Graf", "Person")
ATLAS = ("Projekt Atlas", "Project")
BAKERY = ("Bäckerei Wolf", "Organization")
NORDLICHT = ("Nordlicht Logistik", "Organization")
KIEL = ("Kiel Digital", "Organization")

MEMORIES: dict[str, dict[str, Any]] = {
    "miriam_atlas": {
        "content": "Miriam Hoffmann arbeitet seit März im Projekt Atlas mit.",
        "relations": [rel(*MIRIAM, "WORKS_ON", *ATLAS)],
    },
    "jan_atlas": {
        "content": "Jan Becker has been leading Project Atlas since spring.",
        "relations": [rel(*JAN, "LEADS", *ATLAS)],
    },
    "jan_profile": {
        "title": "Jan Becker",
        "content": "Jan Becker ist Senior Consultant und segelt am Wochenende auf der Förde.",
    },
    "tobias_bakery": {
        "content": "Tobias Wolf führt die Bäckerei Wolf in dritter Generation.",
        "relations": [rel(*TOBIAS, "LEADS", *BAKERY)],
    },
    "nordlicht_bakery": {
        "content": "Nordlicht Logistik delivers flour to the Wolf bakery every Monday.",
        "relations": [rel(*NORDLICHT, "SUPPLIES", *BAKERY)],
    },
    "atlas_client": {
        "content": "Projekt Atlas setzen wir für Kiel Digital um.",
        "relations": [rel(*KIEL, "HAS_PROJECT", *ATLAS)],
        "tags": ["kiel"],
    },
    "kiel_contact": {
        "content": "Lena Graf ist unsere Ansprechpartnerin bei Kiel Digital.",
        "relations": [rel(*LENA, "CONTACT_PERSON_FOR", *KIEL)],
        "tags": ["kiel"],
    },
    "canteen": {"content": "Die Kantine bietet freitags Fisch an."},
}


@dataclass
class Corpus:
    tenant: TenantAccess
    memories: dict[str, UUID]

    @property
    def id(self) -> UUID:
        return UUID(self.tenant.id)


@pytest.fixture(scope="module")
async def corpus(client) -> Corpus:
    tenant = await make_tenant(client)
    memories = {}
    for key, body in MEMORIES.items():
        stored = await client.post("/v1/memories?wait=true", json=body, headers=tenant.write)
        assert stored.status_code == 201, stored.text
        memories[key] = UUID(stored.json()["id"])
    return Corpus(tenant, memories)


def _context(db: Any, tenant: UUID, question: str) -> StageContext:
    async def entities() -> list[MatchedEntity]:
        async with db.read(tenant, custom_plans=True) as conn:
            return await match_entities(conn, tenant, question)

    async def never(*_: Any) -> Any:
        raise AssertionError("the relation stage needs neither embeddings nor other stages")

    return StageContext(db, never, entities, never)


async def ask(
    db: Any, corpus: Corpus, question: str, **options: Any
) -> tuple[list[str], StageContext]:
    ctx = _context(db, corpus.id, question)
    query = RecallRequest(text=question, tenant_id=corpus.id, candidates=10, **options)
    found = await RelationPathStage().search(query, ctx)
    keys = {memory_id: key for key, memory_id in corpus.memories.items()}
    assert [c.score for c in found] == sorted((c.score for c in found), reverse=True)
    return [keys[c.memory_id] for c in found], ctx


@pytest.mark.parametrize(
    "question",
    [
        "Who leads the project that Miriam Hoffmann works on?",
        "Wer leitet das Projekt, an dem Miriam Hoffmann mitarbeitet?",
    ],
)
async def test_two_hops_rank_the_final_hop_then_the_bridge(db, corpus, question):
    ranked, ctx = await ask(db, corpus, question)
    assert ranked[:2] == ["jan_atlas", "miriam_atlas"]
    assert "jan_profile" in ranked[2:]  # the answer's profile comes after
    evidence = ctx.evidence["relations"]
    assert evidence[corpus.memories["jan_atlas"]] == {
        "path_hops": 2.0,
        "path_match": 1.0,
        "path_final": 1.0,
    }
    assert evidence[corpus.memories["miriam_atlas"]]["path_final"] == 0.0
    assert ctx.signals["relations"] == {"paths": 1.0, "implied_predicates": 2.0, "best_match": 1.0}


async def test_passive_and_inverse_phrasings_walk_the_twin_edges(db, corpus):
    ranked, _ = await ask(
        db, corpus, "Which logistics company delivers to the bakery run by Tobias Wolf?"
    )
    assert ranked[:2] == ["nordlicht_bakery", "tobias_bakery"]
    ranked, _ = await ask(db, corpus, "Who works on the project led by Jan Becker?")
    assert ranked[:2] == ["miriam_atlas", "jan_atlas"]
    ranked, _ = await ask(
        db, corpus, "Welche Spedition beliefert die Bäckerei, die Tobias Wolf leitet?"
    )
    assert ranked[:2] == ["nordlicht_bakery", "tobias_bakery"]
    # "Tobias Wolf's bakery": the relation to the bakery is left unsaid
    ranked, _ = await ask(db, corpus, "Wer beliefert die Bäckerei von Tobias Wolf?")
    assert ranked[:2] == ["nordlicht_bakery", "tobias_bakery"]


async def test_three_hops(db, corpus):
    question = "Who is the contact person at the client of the project Miriam Hoffmann works on?"
    ranked, ctx = await ask(db, corpus, question, explain=True)
    assert ranked[:3] == ["kiel_contact", "atlas_client", "miriam_atlas"]
    assert ctx.evidence["relations"][corpus.memories["kiel_contact"]]["path_hops"] == 3.0


async def test_explain_names_the_path(db, corpus):
    _, ctx = await ask(
        db, corpus, "Who leads the project that Miriam Hoffmann works on?", explain=True
    )
    best = ctx.explain["relation_paths"][0]
    assert best["path"] == [
        "Miriam Hoffmann",
        "WORKS_ON",
        "Projekt Atlas",
        "IS_LED_BY",
        "Jan Becker",
    ]
    assert best["match"] == 1.0
    assert best["memories"] == [str(corpus.memories[k]) for k in ("jan_atlas", "miriam_atlas")]
    assert {s["text"] for s in ctx.explain["relation_slots"]} == {"leads", "works on"}


async def test_a_named_entity_without_a_fitting_path_gives_nothing(db, corpus):
    ranked, ctx = await ask(db, corpus, "Who supplies Jan Becker?")
    assert ranked == [] and ctx.signals["relations"]["paths"] == 0.0
    ranked, _ = await ask(db, corpus, "Wer ist mit Jan Becker verheiratet?")
    assert ranked == []


async def test_filters_are_honoured(db, corpus):
    question = "Wer ist der Ansprechpartner beim Kunden von Projekt Atlas?"
    ranked, _ = await ask(db, corpus, question, filters=MemoryFilters(tags=["kiel"]))
    assert ranked[:2] == ["kiel_contact", "atlas_client"]
    # memories outside the filters state no hop: the path is not there to walk
    ranked, _ = await ask(db, corpus, question, filters=MemoryFilters(tags=["elsewhere"]))
    assert ranked == []
    before = MemoryFilters(as_of=datetime(2000, 1, 1, tzinfo=UTC))
    ranked, _ = await ask(db, corpus, question, filters=before)
    assert ranked == []


class Untouchable:
    """A database that fails the test when the stage reaches for it."""

    def read(self, *_: Any, **__: Any) -> Any:
        raise AssertionError("the stage touched the database")


async def test_no_relation_or_no_entity_asks_the_database_nothing():
    async def no_entities() -> list[MatchedEntity]:
        return []

    async def never(*_: Any) -> Any:
        raise AssertionError("the stage asked for the question's entities")

    stage, tenant = RelationPathStage(), UUID(int=1)
    ask_about = "Who leads the project that Miriam Hoffmann works on?"
    ctx = StageContext(Untouchable(), never, no_entities, never)  # type: ignore[arg-type]
    assert await stage.search(RecallRequest(text=ask_about, tenant_id=tenant), ctx) == []
    ctx = StageContext(Untouchable(), never, never, never)  # type: ignore[arg-type]
    assert (
        await stage.search(RecallRequest(text="Wer ist Jan Becker?", tenant_id=tenant), ctx) == []
    )
    assert ctx.signals["relations"]["implied_predicates"] == 0.0


async def test_the_stage_runs_in_the_pipeline(client, corpus):
    body = {"query": "Who leads the project that Miriam Hoffmann works on?", "k": 3}
    response = await client.post(
        "/v1/recall", json=body | {"stages": ["relations"]}, headers=corpus.tenant.read
    )
    assert response.status_code == 200, response.text
    top = response.json()["results"][0]
    assert top["memory_id"] == str(corpus.memories["jan_atlas"]) and top["stages"]["relations"] == 1


def slots(question: str, masked: tuple[str, ...] = ()) -> list[set[str]]:
    return [set(slot.predicates) for slot in parse_question(question, masked).slots]


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Who leads the project that Miriam Hoffmann works on?", [{"IS_LED_BY"}, {"WORKED_ON_BY"}]),
        ("Who is the client of the project led by Jan?", [{"FOR_CLIENT"}, {"IS_LED_BY"}]),
        ("Wer ist Anna Meier?", []),
        # a derived relation: the application's container's host
        ("Auf welchem Server läuft das Filialportal?", [{"DEPLOYED_TO", "HOSTED_ON", "RUNS_ON"}]),
        ("Wer hat die Projektleitung bei Projekt Lotse?", [{"IS_LED_BY"}]),  # a compound
    ],
)
def test_phrases_signal_predicate_families(question, expected):
    assert slots(question) == expected


def test_a_role_noun_asked_for_is_one_relation_with_its_verb():
    assert slots("Welcher Lieferant beliefert die Bäckerei Korn?") == [{"SUPPLIED_BY"}]
    # the boss reports to someone: two relations
    assert slots("An wen berichtet die Vorgesetzte von Emre Yilmaz?", ("emre yilmaz",)) == [
        {"HAS_DIRECT_REPORT"},
        {"HAS_DIRECT_REPORT"},
    ]


def test_a_role_noun_asked_for_as_the_subject_of_another_relation_describes_the_answer():
    assert slots("Which customer operates TourPlan?") == [{"HAS_OPERATED_APPLICATION"}]
    # the object of the verb: a relation of its own
    assert (
        len(slots("Für welche Kunden arbeitet das Team von Felix Neumann?", ("felix neumann",)))
        == 3
    )


def test_some_phrases_ask_for_a_relation_twice():
    assert slots("Who is Miriam Hoffmann's skip-level manager?", ("miriam hoffmann",)) == [
        {"HAS_DIRECT_REPORT"},
        {"HAS_DIRECT_REPORT"},
    ]


def test_a_class_word_an_entity_owns_asks_for_a_hop_to_that_class():
    for question, name in [
        ("Which app does Yusuf Arslan's team develop?", "yusuf arslan"),
        ("Welche App entwickelt Yusuf Arslans Team?", "yusuf arslan"),
        ("Welche App entwickelt das Team von Yusuf Arslan?", "yusuf arslan"),
    ]:
        assert slots(question, (name,)) == [{"DEVELOPED_BY"}, {"@Organization"}] or slots(
            question, (name,)
        ) == [{"@Organization"}, {"DEVELOPED_BY"}]


def test_entity_names_signal_nothing_and_nouns_are_read():
    assert slots("Who leads Lieferdienst Nord?") == [{"IS_LED_BY"}]
    assert slots("Wo ist der Zulieferervertrag?")  # "Zulieferer…": a role noun
    assert slots("Wo ist der Zulieferervertrag?", ("zulieferervertrag",)) == []
    parsed = parse_question("Welche Spedition beliefert das Projekt Atlas?", ("projekt atlas",))
    assert parsed.classes == {"Organization"} and not parsed.wh
    assert parsed.nouns == {"spedition"}
    assert parse_question("Who runs it?").wh["Person"] == 1.0
