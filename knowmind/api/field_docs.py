"""What each field of the API's bodies and each parameter means, for the OpenAPI document.

A field's own ``Meta(description=...)`` wins; otherwise ``SCHEMA_FIELDS`` (one schema's field)
and then ``FIELDS`` (a name that means the same wherever it appears) describe it. The tests
(tests/test_openapi_docs.py) fail on a field or parameter left undescribed and on an entry
here that no schema uses any more.
"""

from __future__ import annotations

__all__ = ["FIELDS", "PARAMETERS", "SCHEMA_FIELDS"]

#: Field names that mean the same in every body that has them.
FIELDS: dict[str, str] = {
    "memory_id": "the memory's id",
    "chunk_id": "the id of the chunk (passage) of the memory",
    "document_id": "the document the memory belongs to (null: a memory stored on its own)",
    "title": "the memory's title",
    "content": "the text",
    "source": "where the text comes from (free text, e.g. a URL or a system's name)",
    "domain": "a subject area the text belongs to (free text)",
    "memory_type": "semantic, episodic, procedural or reference",
    "tags": "free-form labels",
    "metadata": "any JSON object, stored and returned as it is",
    "created_at": "when it was stored (UTC)",
    "valid_from": "valid time: since when it holds",
    "valid_to": "valid time: until when it held (null: it holds now)",
    "occurred_at": "when it happened or was said (ISO 8601)",
    "speaker": "who said it (a name)",
    "role": "the speaker's role: user, assistant, …",
    "user_id": "the end user it belongs to (null: shared by the tenant)",
    "agent_id": "the agent it belongs to",
    "session_id": "the session it belongs to",
    "job_id": "the background job to poll at GET /v1/jobs/{job_id} (null: none queued)",
    "chunks": "how many chunks (passages) were stored",
    "entity_class": "the entity's class, e.g. Person, Organization, Place",
    "aliases": "other names of the entity",
    "confidence": "how certain the relation or entity is (0–1)",
    "degraded": "true when a stage was skipped or failed (see degraded_reasons)",
    "degraded_reasons": "why the answer is degraded, one reason per skipped or failed stage",
    "timings_ms": "milliseconds spent per stage, and the total",
    "k": "how many results (1–25)",
    "rerank": "rerank with the cross-encoder (default: when one is loaded)",
    "filters": "narrow the memories searched (all given filters must match)",
    "predicate": "the relation's type, e.g. WORKS_FOR",
    "marker": "the number the answer cites the passage by ([1], [2], …)",
    "created": "how many were stored new",
    "unchanged": "how many were stored already and left as they were",
    "index": "the position in the request's list (from 0)",
    "scopes": "read, write and/or admin (admin ⊃ write ⊃ read)",
    "tenant_id": "the tenant's id",
}

#: Fields that mean something of their own in one schema: {schema: {field: description}}.
SCHEMA_FIELDS: dict[str, dict[str, str]] = {
    "AnswerIn": {
        "question": "the question to answer",
        "compress": "shorten the passages to their sentences relevant to the question",
        "parent_context": "give the model each passage's neighbouring chunks as context too",
        "llm_model": "the language model to answer with (default: the tenant's, else the server's)",
        "max_tokens": "the most tokens the answer may have",
        "conversation_id": "continue this conversation (its earlier questions and answers "
        "are context); a new id starts one",
    },
    "AnswerOut": {
        "answer": "the answer with citation markers, or null when none could be given "
        "(degraded_reasons says why)",
        "supported": "true when the answer cites at least one passage and does not say the "
        "sources hold no answer",
        "citations": "the passages the answer cites, by marker",
        "passages": "the passages the answer was generated from",
        "method": "the retrieval method that was used",
        "method_details": "what the method did (e.g. the rephrased queries of multi_query)",
        "tokens": "tokens the language model read (prompt) and wrote (completion)",
        "model": "the language model that answered (null: none was called)",
    },
    "AnswerPassage": {
        "content": "the passage's text",
        "score": "its recall score (0–1)",
        "stages": "the recall stages that found it",
    },
    "AuditRow": {
        "id": "the entry's id (ascending)",
        "at": "when it happened (UTC)",
        "actor": "who did it: a token id, the server admin or the local CLI",
        "action": "what was done, e.g. tenant.create, token.revoke, user.erase",
        "tenant_id": "the tenant it concerns (null: none)",
        "targets": "the ids acted on",
        "client": "the client's address as the server saw it (forwarded headers trusted "
        "only from configured proxies)",
        "detail": "counts and parameters of the action (never content)",
        "peer": "the address of the connection",
        "forwarded": "the X-Forwarded-For chain as sent",
    },
    "BatchIn": {"items": "the memories, each a body like POST /v1/memories"},
    "BatchItemOut": {
        "status": "created, unchanged, or error (see error)",
        "id": "the memory's id (null: error)",
        "error": "why the item was not stored",
    },
    "BatchOut": {
        "failed": "how many items were refused",
        "results": "one result per item, in the request's order",
    },
    "Citation": {"title": "the cited memory's title"},
    "ConversationIn": {
        "messages": "the messages in order: each becomes one episodic memory",
        "metadata": "stored with every message's memory (with its turn and message_id)",
    },
    "ConversationOut": {
        "session_id": "the session the turns were stored in (derived when none was sent)",
        "status": "created when at least one turn was new, else unchanged",
        "turns": "one result per message, in the request's order",
        "speakers": "the speakers, each an entity its turns mention",
    },
    "DocumentIn": {
        "content": "the document's text (Markdown or plain)",
        "title": "the document's title: a document with the same title is replaced",
        "relations": "relations the document states (memory -predicate-> object)",
        "replace_document_id": "replace this document (it keeps its id)",
    },
    "DocumentOut": {
        "id": "the document's id (null while accepted: the job's result names it)",
        "memory_id": "the memory that holds the document's text",
        "status": "created, replaced, unchanged, or accepted (202: a job stores it)",
        "job_id": "accepted: the job storing the document; otherwise the extraction job",
        "tree_job_id": "build_tree: the job that builds the summary tree",
        "tree_note": "build_tree: why no tree is built",
        "embedded_by": "server, or client when the client's chunk embeddings were used",
        "embedding_note": "why the client's embeddings were not used",
    },
    "EntityHit": {
        "id": "the entity's id",
        "name": "the entity's name",
        "score": "how well the name matches the search (0–1)",
    },
    "EntityIn": {
        "name": "the entity's name (found again by its folded form and class)",
        "description": "a short description",
    },
    "EntityOut": {
        "id": "the entity's id",
        "name": "the entity's name",
        "description": "a short description",
        "origin": "what made it: api, inline (a memory's relations), ner, llm",
        "created": "true when this request created it (null where not asked)",
    },
    "EntitySearchOut": {"results": "the best matches first"},
    "FactUpdateOut": {
        "subject": "the entity the fact is about",
        "old_object": "what it was",
        "new_object": "what it is now",
        "old_edge_id": "the edge that was closed",
        "new_edge_id": "the edge that holds now",
        "changed_at": "valid time of the change",
        "decided_by": "rule (a single-valued predicate) or llm (the extractor's model)",
        "audit_id": "the audit log entry of the change",
        "model": "llm: the model that proposed it",
        "proposal": "llm: the relation the model proposed (ids)",
    },
    "HistoryEventOut": {
        "at": "when it happened (valid time)",
        "event": "superseded_by, supersedes, fact_closed or fact_replaced",
        "memory_id": "the other memory (null: none)",
        "automatic": "true when knowmind made the change (a single-valued fact changed)",
        "reason": "the update_reason given, or why it was automatic",
        "actor": "who wrote the change (null: not recorded)",
        "memory_closed": "true when this event ended the memory's validity",
        "fact": "the fact that changed (fact_closed, fact_replaced)",
    },
    "ItemErrorOut": {
        "field": "the offending field, e.g. relations[0].predicate (empty: the item itself)",
        "message": "what is wrong with it",
    },
    "JobOut": {
        "id": "the job's id",
        "kind": (
            "what it does: extract_mentions, ingest_document, build_summary_tree, embed_sentences"
        ),
        "status": "pending, running, done or failed",
        "attempts": "how often it was started",
        "last_error": "why the last attempt failed",
        "result": "what it produced (done), e.g. a document's id and chunks",
        "finished_at": "when it finished (null: not yet)",
        "progress": "a job that runs in steps: how far it has come",
    },
    "JobRef": {
        "id": "the job's id",
        "status": "pending, running, done or failed",
        "result": "what it produced (done)",
        "last_error": "why it failed",
    },
    "KnowmindChunk": {
        "content": "the chunk's text",
        "embedding": "its vector, made by the model embeddingModel names",
        "metadata": "stored with the chunk; type tags a preference, fact or update",
    },
    "KnowmindDocumentIn": {
        "content": "the document's text",
        "title": "the document's title: a document with the same title is replaced",
        "chunks": "the client's own chunks with their embeddings (used when the model matches)",
        "embeddingModel": "the model that made the chunks' embeddings",
        "replaceDocumentId": "replace this document (it keeps its id)",
    },
    "LinkIn": {
        "from_id": "the subject: an entity's or memory's id",
        "to_id": "the object: an entity's or memory's id",
        "rel_type": "the predicate, e.g. WORKS_FOR (its inverse is drawn too)",
    },
    "LinkOut": {
        "edge_id": "the edge drawn",
        "inverse_edge_id": "its inverse edge (null: the predicate has none)",
    },
    "MemoryHistoryOut": {"events": "what happened to the memory, oldest first"},
    "MemoryIn": {
        "content": "the text to remember",
        "relations": "relations the memory states (memory or subject -predicate-> object)",
    },
    "MemoryList": {
        "items": "the page's memories, newest first",
        "next_cursor": "pass as cursor for the next page (null: the last page)",
    },
    "MemoryOut": {"id": "the memory's id", "chunks": "how many chunks it has"},
    "MessageIn": {"content": "what was said"},
    "NamedNodeOut": {
        "id": "the entity's id",
        "name": "its name (null: erased since)",
        "entity_class": "its class (null: erased since)",
    },
    "NodeRef": {
        "id": "the node's id",
        "kind": "memory or entity",
        "title_or_name": "a memory's title or an entity's name",
        "entity_class": "an entity's class (null: a memory)",
    },
    "PredicateIn": {
        "name": "the predicate, UPPER_SNAKE_CASE",
        "subject_classes": "the classes its subject may have",
        "object_classes": "the classes its object may have",
        "inverse": "the predicate read the other way (drawn with every edge)",
        "symmetric": "true when it reads the same both ways",
        "description": "what it means",
        "new_classes": "classes to add to the catalogue with it",
        "single_valued": "at most one current object per subject: a new one closes the old edge",
    },
    "RecallFilters": {
        "memory_type": "only memories of this type",
        "tags": "only memories with all of these tags",
        "source": "only memories of this source",
        "domain": "only memories of this domain",
        "document_id": "only this document's memories",
        "user_id": "only this end user's memories",
        "agent_id": "only this agent's memories",
        "session_id": "only this session's memories",
    },
    "RecallHit": {
        "content": "the passage's text",
        "memory_type": "the memory's type",
        "created_at": "when the memory was stored",
        "stages": "the rank each recall stage gave it (null: not found by that stage)",
        "rerank_score": "the cross-encoder's score (null: not reranked)",
        "source": "the memory's source",
    },
    "RecallIn": {
        "query": "the question or search text",
        "hops": "graph hops from the entities the query names (0: none)",
        "stages": "the recall stages to run (default: all available)",
        "weights": "a weight per stage for the fusion",
        "explain": "add each hit's features and the stages' details",
    },
    "RecallOut": {
        "results": "the hits, best first",
        "ranker": "the ranker that ordered them: learned or rrf",
        "explain": "with explain: each stage's candidates and details",
    },
    "RelationIn": {
        "object": "the object entity's name (found or created)",
        "object_class": "the object's class (default: from the predicate)",
        "object_description": "a description for a newly created object",
        "subject": "the subject entity's name (default: the memory itself)",
        "subject_class": "the subject's class",
    },
    "RelationOut": {
        "direction": "out (this node is the subject) or in (it is the object)",
        "derived": "true when drawn as the inverse of another edge",
        "node": "the node at the other end",
        "edge_id": "the edge (null: a mention)",
    },
    "RelationsOut": {"relations": "the node's relations and mentions"},
    "RememberOut": {
        "id": "the memory's id",
        "status": "created, or unchanged when the same memory was stored already",
        "job": "?wait=true: the extraction job as it stands",
    },
    "SpeakerOut": {
        "name": "the speaker's name",
        "entity_class": "Person, or SoftwareAgent for assistant, system, tool, agent, bot",
        "id": "the entity the speaker's turns mention",
    },
    "SupersedeIn": {
        "new_content": "the fact as it is now",
        "new_title": "a title for the new memory (default: the old one's)",
        "update_reason": "why it changed (kept in the history)",
    },
    "TenantIn": {
        "name": "the tenant's name (unique)",
        "language": "text search configuration, a pg_ts_config name (default: the server's)",
    },
    "TenantOut": {
        "id": "the tenant's id",
        "name": "the tenant's name",
        "language": "its text search configuration",
        "embedding_model": "the model its chunks are embedded with",
        "embedding_dim": "that model's dimension",
    },
    "TenantSettingsOut": {
        "multi_query": "answers may rephrase a question into several queries",
    },
    "TenantSettingsIn": {
        "llm_model": "a model this server can use (null: the server's)",
        "multi_query": "answers may rephrase a question into several queries",
    },
    "TokenOut": {
        "id": "the token's id (to revoke it)",
        "token": "the token itself: shown once, only its hash is stored",
        "user_id": "the end user it is bound to (null: the whole tenant)",
    },
    "TurnOut": {
        "turn": "the position in the session",
        "status": "created, or unchanged when stored already",
        "id": "the memory the message became",
    },
    "UnlinkOut": {"removed": "how many edges were removed (with the inverse)"},
}

#: Query and path parameters by name.
PARAMETERS: dict[str, str] = {
    "memory_id": "the memory's id",
    "document_id": "the document's id",
    "entity_id": "the entity's id",
    "node_id": "an entity's or memory's id",
    "job_id": "the job's id",
    "tenant_id": "the tenant's id",
    "token_id": "the token's id",
    "limit": "how many to return at most",
    "cursor": "the next_cursor of the previous page",
    "entity_class": "only entities of this class",
}
