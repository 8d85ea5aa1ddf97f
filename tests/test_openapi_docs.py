"""The OpenAPI document explains itself: every operation has a summary and a description, every
parameter and every property of a request or response body (the components' schemas and those
written inline, nested ones too) a description. Built offline from the app factory, no server.

The rule that fills them is in knowmind/api/openapi.py (a handler's docstring: its first
sentence the summary, the whole the description) and knowmind/api/field_docs.py (the fields).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from typing import Any

from knowmind.api.field_docs import FIELDS, PARAMETERS, SCHEMA_FIELDS

METHODS = ("get", "post", "put", "patch", "delete")
SUMMARY_MAX_CHARS = 80


@cache
def openapi() -> dict[str, Any]:
    from knowmind.app import create_app
    from knowmind.settings import Settings

    return create_app(Settings.from_env({})).openapi_schema.to_schema()


def operations(document: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for path, item in document.get("paths", {}).items():
        for method in METHODS:
            if method in item:
                yield f"{method.upper()} {path}", item[method]


def undocumented_operations(document: dict[str, Any]) -> list[str]:
    """Operations without a summary and a description of more than the summary; the summary
    a short sentence, not Litestar's default (the handler's name in CamelCase)."""
    found = []
    for key, operation in operations(document):
        summary = operation.get("summary") or ""
        description = operation.get("description") or ""
        if not summary or " " not in summary or len(summary) > SUMMARY_MAX_CHARS:
            found.append(f"{key}: summary {summary!r}")
        if not description.strip() or description.strip() == summary.strip():
            found.append(f"{key}: no description beyond the summary")
        for parameter in operation.get("parameters", []):
            if not parameter.get("description"):
                found.append(f"{key}: parameter {parameter['name']}")
    return found


def _bodies(operation: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    request = operation.get("requestBody", {}).get("content", {})
    for media, content in request.items():
        yield f"request {media}", content.get("schema", {})
    for status, response in operation.get("responses", {}).items():
        for media, content in (response.get("content") or {}).items():
            yield f"{status} {media}", content.get("schema", {})


def undescribed_properties(node: Any, where: str) -> Iterator[str]:
    """Every property under ``node`` (nested, in lists and variants) without a description;
    a ``$ref`` is checked where the component is defined."""
    if not isinstance(node, dict) or "$ref" in node:
        return
    for name, prop in node.get("properties", {}).items():
        if not (isinstance(prop, dict) and prop.get("description")):
            yield f"{where}.{name}"
        yield from undescribed_properties(prop, f"{where}.{name}")
    for key in ("items", "additionalProperties"):
        yield from undescribed_properties(node.get(key), f"{where}[]")
    for key in ("anyOf", "oneOf", "allOf"):
        for variant in node.get(key, []):
            yield from undescribed_properties(variant, where)


def undocumented_fields(document: dict[str, Any]) -> list[str]:
    found = []
    for name, schema in document.get("components", {}).get("schemas", {}).items():
        found += undescribed_properties(schema, name)
    for key, operation in operations(document):
        for body, schema in _bodies(operation):
            found += undescribed_properties(schema, f"{key} {body}")
    return found


def test_every_operation_has_a_summary_and_a_description():
    missing = undocumented_operations(openapi())
    assert not missing, "\n".join(missing)
    assert len(list(operations(openapi()))) >= 40  # the document is the whole API


def test_every_request_and_response_field_is_described():
    missing = undocumented_fields(openapi())
    assert not missing, "\n".join(missing)


def test_the_field_table_names_only_what_exists():
    """An entry of knowmind/api/field_docs.py that no schema or parameter uses any more is
    stale: renamed or removed fields keep no description behind."""
    document = openapi()
    schemas = document["components"]["schemas"]
    stale = [
        f"{schema}.{field}"
        for schema, fields in SCHEMA_FIELDS.items()
        for field in fields
        if field not in schemas.get(schema, {}).get("properties", {})
    ]
    names = {field for schema in schemas.values() for field in schema.get("properties", {})}
    stale += [f"FIELDS[{name!r}]" for name in FIELDS if name not in names]
    parameters = {
        parameter["name"]
        for _, operation in operations(document)
        for parameter in operation.get("parameters", [])
    }
    stale += [f"PARAMETERS[{name!r}]" for name in PARAMETERS if name not in parameters]
    assert not stale, stale


def test_summaries_are_the_docstrings_first_sentences():
    """One rule: the summary of POST /v1/memories is its handler's first sentence, and the
    description keeps the docstring's text, ``code`` as Markdown `code`."""
    remember = openapi()["paths"]["/v1/memories"]["post"]
    assert remember["summary"] == "Store a memory"
    assert remember["description"].startswith("Store a memory. Extraction runs")
    assert "`GET /v1/jobs/{job_id}`" in remember["description"]
    assert not re.search(r"``", remember["description"])


def test_the_checks_find_what_is_missing():
    """The checks can fail: an operation with Litestar's default summary and no description,
    an undescribed parameter, a nested property and an inline body's property are reported."""
    document = {
        "paths": {
            "/v1/things/{thing_id}": {
                "get": {
                    "summary": "GetThing",
                    "parameters": [{"name": "thing_id", "in": "path"}],
                    "responses": {
                        "200": {
                            "description": "ok",
                            "content": {
                                "application/json": {
                                    "schema": {
                                        "type": "object",
                                        "properties": {"size": {"type": "integer"}},
                                    }
                                }
                            },
                        }
                    },
                }
            }
        },
        "components": {
            "schemas": {
                "Thing": {
                    "properties": {
                        "id": {"type": "string", "description": "its id"},
                        "parts": {
                            "description": "its parts",
                            "type": "array",
                            "items": {"properties": {"weight": {"type": "number"}}},
                        },
                    }
                }
            }
        },
    }
    assert undocumented_operations(document) == [
        "GET /v1/things/{thing_id}: summary 'GetThing'",
        "GET /v1/things/{thing_id}: no description beyond the summary",
        "GET /v1/things/{thing_id}: parameter thing_id",
    ]
    assert undocumented_fields(document) == [
        "Thing.parts[].weight",
        "GET /v1/things/{thing_id} 200 application/json.size",
    ]
