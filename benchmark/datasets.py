"""Evaluation datasets: public origin, sha256-verified local files, uniform shape.

Each loader returns documents, queries and graded relevance judgements (qrels). Nothing the
systems ingest comes from the judgements: MuSiQue's ``is_supporting`` flags and DBpedia's qrels
are read only to score.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

__all__ = ["DATASETS", "Dataset", "Doc", "Query", "Source", "load", "with_typo"]


@dataclass(frozen=True, slots=True)
class Source:
    repository: str
    commit: str
    path: str
    sha256: str

    @property
    def url(self) -> str:
        return f"https://raw.githubusercontent.com/{self.repository}/{self.commit}/{self.path}"


XQUAD = "google-deepmind/xquad", "7d30520c717524000f0d9d2f9c10a069acd9d285"
HIPPORAG = "OSU-NLP-Group/HippoRAG", "b144c46df14cabe5f5822d8caded4bec5f709461"
LEADERBOARD = "agentset-ai/embedding-leaderboard", "7a1376ca20a006b470e3bbb4a08b17affd380d90"
LOCOMO = "snap-research/LoCoMo", "3eb6f2c585f5e1699204e3c3bdf7adc5c28cb376"
FILES = {
    "xquad/xquad.de.json": Source(*XQUAD, "xquad.de.json",
        "990b5d746746ed65ed4702ea5f35f99ffa4e2f1c390c07d003642acd937916f9"),
    "xquad/xquad.en.json": Source(*XQUAD, "xquad.en.json",
        "e4c57d1c9143aaa1c5d265ba5987a65f4e69528d2a98f29d6e75019b10344f29"),
    "musique/musique_train.json": Source(*HIPPORAG, "data/musique_train.json",
        "bca674746844637f5c68408a96b67bc0542d98e7c53715f3acafe144bd5e4ff4"),
    "musique/musique_train_corpus.json": Source(*HIPPORAG, "data/musique_train_corpus.json",
        "79845dd085f9df49c8ce440208763e2611aeb86c81ee0bdad2094504381bb651"),
    "dbpedia/corpus.jsonl": Source(*LEADERBOARD, "datasets/dbpedia/corpus.jsonl",
        "61b717c96ff548d27ad3d7fbfc2682c43daa538e3e9d0cd39d4ae9e99c1d306c"),
    "dbpedia/queries.jsonl": Source(*LEADERBOARD, "datasets/dbpedia/queries.jsonl",
        "93f48e1e465351fbb8d3b5c711c08034e1277e1225553230341bad7e39f16362"),
    "dbpedia/qrels/test.tsv": Source(*LEADERBOARD, "datasets/dbpedia/qrels/test.tsv",
        "e92204355209bd2c52eab3ae1b3e09819cd61f4b1f446e413a4872100519e3d0"),
    # conversations 2-9 of data/locomo10.json (items 2-9 of the source's list), as shared here
    "locomo/locomo_conv2-9.json": Source(*LOCOMO, "data/locomo10.json",
        "bb59da2a04413e9bc743e11395e45ec3b0c457ef1469a1007b25275b03968974"),
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Doc:
    id: str
    title: str
    text: str
    relations: tuple[dict[str, str], ...] = ()  # inline relations remembered with the doc
    partition: str = ""  # docs and queries of one partition share a tenant of their own
    occurred_at: datetime | None = None  # when it was said (a conversation's turn)
    speaker: str | None = None
    session: str | None = None  # the conversation session it belongs to


@dataclass(frozen=True, slots=True)
class Query:
    id: str
    text: str
    partition: str = ""
    kind: str = ""  # a category reported apart (LoCoMo's category, a relation path's hops)
    reference_time: datetime | None = None  # when it is asked ("last week" is relative to it)


@dataclass(slots=True)
class Dataset:
    name: str
    language: str  # the tenant's full-text configuration
    docs: list[Doc]
    queries: list[Query]
    qrels: dict[str, dict[str, int]]  # query id -> doc id -> grade (> 0 relevant)
    titles_as_entities: bool = False  # build the graph from passage titles (no gold used)
    sources: list[Source] = field(default_factory=list)
    # entities created before the docs are remembered: (name, class, aliases)
    entities: list[tuple[str, str, list[str]]] = field(default_factory=list)
    # remembered session by session through the conversation call (the docs are its turns);
    # turn_context: the window of earlier turns each is embedded with (None: the setting's)
    conversational: bool = False
    turn_context: int | None = None

    def parts(self) -> list[Dataset]:
        """One dataset per partition (each is searched in a tenant of its own)."""
        names = sorted({d.partition for d in self.docs})
        if len(names) <= 1:
            return [self]
        return [
            replace(
                self,
                docs=[d for d in self.docs if d.partition == name],
                queries=[q for q in self.queries if q.partition == name],
                qrels={q.id: self.qrels[q.id] for q in self.queries if q.partition == name},
            )
            for name in names
        ]


class DatasetFileError(RuntimeError):
    pass


def _read(data_dir: Path, relative: str) -> bytes:
    source = FILES[relative]
    path = data_dir / relative
    if not path.exists():
        raise DatasetFileError(f"{path} missing: download it from {source.url}")
    raw = path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    if digest != source.sha256:
        raise DatasetFileError(f"{path}: sha256 {digest} != {source.sha256} ({source.url})")
    return raw


def _xquad(data_dir: Path, lang: str) -> tuple[dict[str, Doc], dict[str, tuple[str, str]]]:
    """Paragraph docs by id, and question id -> (question, paragraph id)."""
    data = json.loads(_read(data_dir, f"xquad/xquad.{lang}.json"))
    docs, questions = {}, {}
    for a, article in enumerate(data["data"]):
        for p, paragraph in enumerate(article["paragraphs"]):
            doc_id = f"{lang}-{a}-{p}"
            docs[doc_id] = Doc(doc_id, article["title"], paragraph["context"])
            for qa in paragraph["qas"]:
                questions[qa["id"]] = (qa["question"], doc_id)
    return docs, questions


def _xquad_set(data_dir: Path, name: str, query_lang: str, doc_langs: tuple[str, ...]) -> Dataset:
    pools = {lang: _xquad(data_dir, lang) for lang in {query_lang, *doc_langs}}
    docs = [d for lang in doc_langs for d in pools[lang][0].values()]
    queries, qrels = [], {}
    for qid, (text, paragraph) in pools[query_lang][1].items():
        queries.append(Query(f"{query_lang}-{qid}", text))
        grades = {}
        for lang in doc_langs:  # the paragraph in the question's language ranks above its twin
            twin = f"{lang}{paragraph[2:]}"
            grades[twin] = 2 if lang == query_lang or len(doc_langs) == 1 else 1
        qrels[f"{query_lang}-{qid}"] = grades
    language = (
        "german"
        if "de" in doc_langs and len(doc_langs) == 1
        else ("english" if doc_langs == ("en",) else "simple")
    )
    sources = [FILES[f"xquad/xquad.{lang}.json"] for lang in sorted(pools)]
    return Dataset(name, language, docs, queries, qrels, sources=sources)


def _xquad_mixed(data_dir: Path) -> Dataset:
    german = _xquad_set(data_dir, "xquad-mixed", "de", ("de", "en"))
    english = _xquad_set(data_dir, "xquad-mixed", "en", ("de", "en"))
    german.queries += english.queries
    german.qrels |= english.qrels
    return german


def _musique(data_dir: Path) -> Dataset:
    questions = json.loads(_read(data_dir, "musique/musique_train.json"))
    corpus = json.loads(_read(data_dir, "musique/musique_train_corpus.json"))
    ids = {(p["title"], p["text"]): f"p{i}" for i, p in enumerate(corpus)}
    docs = [Doc(f"p{i}", p["title"], p["text"]) for i, p in enumerate(corpus)]
    queries, qrels = [], {}
    for q in questions:
        gold = {
            ids[(p["title"], p["paragraph_text"])]: 1
            for p in q["paragraphs"]
            if p["is_supporting"] and (p["title"], p["paragraph_text"]) in ids
        }
        if gold:
            queries.append(Query(q["id"], q["question"]))
            qrels[q["id"]] = gold
    sources = [FILES["musique/musique_train.json"], FILES["musique/musique_train_corpus.json"]]
    return Dataset("musique", "english", docs, queries, qrels, True, sources)


def _dbpedia(data_dir: Path) -> Dataset:
    docs = [
        Doc(d["_id"], d["title"], d["text"])
        for d in map(json.loads, _read(data_dir, "dbpedia/corpus.jsonl").decode().splitlines())
    ]
    queries = [
        Query(q["_id"], q["text"])
        for q in map(json.loads, _read(data_dir, "dbpedia/queries.jsonl").decode().splitlines())
    ]
    qrels: dict[str, dict[str, int]] = {}
    for line in _read(data_dir, "dbpedia/qrels/test.tsv").decode().splitlines()[1:]:
        qid, doc_id, grade = line.split("\t")
        if int(grade) > 0:
            qrels.setdefault(qid, {})[doc_id] = int(grade)
    queries = [q for q in queries if q.id in qrels]
    sources = [FILES[f] for f in FILES if f.startswith("dbpedia/")]
    return Dataset("dbpedia", "english", docs, queries, qrels, True, sources)


LOCOMO_FIRST = 2  # the shared file holds conversations 2-9 of the source's ten
LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


def _locomo(data_dir: Path) -> Dataset:
    """LoCoMo: each conversation a partition (a tenant), each turn a memory said by its speaker
    at its session's date and time; questions of categories 1-4 (5, adversarial, has no answer
    in the conversation), asked after the last session, judged by their evidence turns."""
    items = json.loads(_read(data_dir, "locomo/locomo_conv2-9.json"))
    docs, queries, qrels = [], [], {}
    for n, item in enumerate(items, start=LOCOMO_FIRST):
        conv = f"c{n}"
        talk = item["conversation"]
        last = datetime.min.replace(tzinfo=UTC)
        for key, turns in talk.items():
            if not key.startswith("session_") or key.endswith("date_time"):
                continue
            when = _locomo_time(talk[f"{key}_date_time"])
            last = max(last, when)
            for turn in turns:
                text = turn["text"]
                if turn.get("blip_caption"):
                    text += f" [shares a photo: {turn['blip_caption']}]"
                speaker = turn["speaker"]
                doc_id = f"{conv}:{turn['dia_id']}"
                docs.append(Doc(doc_id, speaker, text, (), conv, when, speaker, key))
        for i, qa in enumerate(item["qa"]):
            category = qa.get("category")
            gold = {f"{conv}:{e}": 1 for e in qa.get("evidence", []) if isinstance(e, str)}
            if category not in LOCOMO_CATEGORIES or not gold:
                continue
            qid = f"{conv}:q{i}"
            kind = LOCOMO_CATEGORIES[category]
            queries.append(Query(qid, qa["question"], conv, kind, last))
            qrels[qid] = gold
    sources = [FILES[_LOCOMO_FILE]]
    return Dataset("locomo", "english", docs, queries, qrels, sources=sources, conversational=True)


def _locomo_time(text: str) -> datetime:
    """A session's date and time as LoCoMo writes it ("1:56 pm on 8 May, 2023"), read as UTC."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


_LOCOMO_FILE = "locomo/locomo_conv2-9.json"
RELATIONS_FILE = Path(__file__).with_name("corpora") / "relations.json"


def _relations(_: Path) -> Dataset:
    """The relation corpus written for this project (benchmark/corpora/relations.json):
    company memories in German and English with inline relations, questions along them."""
    data = json.loads(RELATIONS_FILE.read_text())
    docs = [
        Doc(m["key"], m.get("title") or "", m["content"], tuple(m.get("relations", ())))
        for m in data["memories"]
    ]
    queries = [Query(q["id"], q["text"], kind=f"{q['hops']}-hop") for q in data["questions"]]
    qrels = {q["id"]: {k: int(g) for k, g in q["gold"].items()} for q in data["questions"]}
    entities = [(e["name"], e["class"], list(e.get("aliases", []))) for e in data["entities"]]
    return Dataset("relations", "german", docs, queries, qrels, entities=entities)


# Short function words are never the word a typo goes into.
_FUNCTION_WORDS = frozenset((
    "welche", "welcher", "welches", "wurde", "wurden", "werden", "zwischen", "während",
    "nachdem", "gegenüber", "which", "where", "whose", "whom", "there", "their", "about",
    "after", "before", "during", "between", "through",
))  # fmt: skip
_WORD = re.compile(r"[^\W\d_]+")
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def with_typo(query_id: str, text: str) -> str:
    """One edit (deletion, insertion, substitution or adjacent transposition, chosen by an RNG
    seeded with the query id) in the longest content word of the question (the first of equal
    length); the edit always changes the word."""
    words = [m for m in _WORD.finditer(text) if m.group().lower() not in _FUNCTION_WORDS]
    if not words:
        return text
    target = max(words, key=lambda m: len(m.group()))
    word = target.group()
    rng = random.Random(hashlib.sha1(query_id.encode()).hexdigest())
    edited = word
    while edited == word:
        op = rng.choice(("delete", "insert", "substitute", "transpose"))
        i = rng.randrange(len(word))
        if op == "delete" and len(word) > 1:
            edited = word[:i] + word[i + 1 :]
        elif op == "insert":
            edited = word[:i] + rng.choice(_LETTERS) + word[i:]
        elif op == "substitute":
            edited = word[:i] + rng.choice(_LETTERS) + word[i + 1 :]
        elif op == "transpose" and i + 1 < len(word):
            edited = word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    return text[: target.start()] + edited + text[target.end() :]


def _typo_set(data_dir: Path, base: str) -> Dataset:
    """The questions of ``base`` with one typo each; same paragraphs and judgements."""
    clean = DATASETS[base](data_dir)
    clean.name = f"{base}-typo"
    clean.queries = [Query(q.id, with_typo(q.id, q.text)) for q in clean.queries]
    return clean


DATASETS: dict[str, Callable[[Path], Dataset]] = {
    "xquad-de": lambda d: _xquad_set(d, "xquad-de", "de", ("de",)),
    "xquad-de-typo": lambda d: _typo_set(d, "xquad-de"),
    "xquad-en": lambda d: _xquad_set(d, "xquad-en", "en", ("en",)),
    "xquad-en-de": lambda d: _xquad_set(d, "xquad-en-de", "en", ("de",)),
    "xquad-mixed": _xquad_mixed,
    "musique": _musique,
    "dbpedia": _dbpedia,
    "locomo": _locomo,
    # the ablation of the window of earlier turns: each turn embedded alone
    "locomo-no-context": lambda d: replace(_locomo(d), name="locomo-no-context", turn_context=0),
    "relations": _relations,
}


def quick(dataset: Dataset, max_queries: int, max_docs: int, seed: int = 7) -> Dataset:
    """A deterministic subset: the first queries, every doc they judge, then random others."""
    queries = dataset.queries[:max_queries]
    judged = {d for q in queries for d in dataset.qrels[q.id]}
    partitions = {q.partition for q in queries}  # the others' tenants would go unasked
    rest = [d for d in dataset.docs if d.id not in judged and d.partition in partitions]
    random.Random(seed).shuffle(rest)
    keep = judged | {d.id for d in rest[: max(0, max_docs - len(judged))]}
    docs = [d for d in dataset.docs if d.id in keep]
    qrels = {q.id: dataset.qrels[q.id] for q in queries}
    return replace(dataset, docs=docs, queries=queries, qrels=qrels)


def load(name: str, data_dir: Path, quick_mode: bool = False) -> Dataset:
    dataset = DATASETS[name](data_dir)
    return quick(dataset, 40, 200) if quick_mode else dataset
