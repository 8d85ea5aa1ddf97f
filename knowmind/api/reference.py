"""The API reference at ``/schema``: one HTML page rendered on the server from the OpenAPI
document, with no script, font or stylesheet from elsewhere, so it works offline (Litestar's
default pages load their JavaScript from a CDN and stay blank without internet). The JSON stays
at ``/schema/openapi.json`` for tools."""

from __future__ import annotations

import base64
import hashlib
from html import escape
from typing import Any

from litestar import Request, Router
from litestar.datastructures import ResponseHeader
from litestar.openapi.plugins import OpenAPIRenderPlugin

__all__ = ["REFERENCE_CSP", "ReferencePage", "reference_router"]

_METHODS = ("get", "post", "put", "patch", "delete")
_STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:2em auto;max-width:70em;padding:0 1em;color:#222}
h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
h3{font-family:monospace;font-size:1.05em;margin:1.6em 0 .3em}
.m{display:inline-block;min-width:4.5em;font-weight:bold}
table{border-collapse:collapse;margin:.4em 0}td,th{border:1px solid #ddd;padding:.2em .5em;
text-align:left;vertical-align:top}code{font-size:.92em}p{margin:.3em 0}
"""

_STYLE_HASH = base64.b64encode(hashlib.sha256(_STYLE.encode()).digest()).decode()
#: Nothing runs, nothing loads from elsewhere, not framable; the page's one inline style block
#: is allowed by its hash (the JSON document is a link, not a fetch).
REFERENCE_CSP = (
    f"default-src 'none'; style-src 'sha256-{_STYLE_HASH}'; img-src 'self' data:; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


def reference_router() -> Router:
    """The router Litestar mounts the OpenAPI routes on (``/schema``: this page, the JSON
    document, its not-found page), with the security headers on each of their answers."""
    headers = {
        "Content-Security-Policy": REFERENCE_CSP,
        "X-Frame-Options": "DENY",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }
    return Router(
        "/schema",
        route_handlers=[],
        include_in_schema=False,
        dto=None,
        return_dto=None,
        response_headers=[ResponseHeader(name=k, value=v) for k, v in headers.items()],
    )


class ReferencePage(OpenAPIRenderPlugin):
    def __init__(self) -> None:
        super().__init__(path=["/", "/reference"])

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        info = openapi_schema.get("info", {})
        title = f"{info.get('title', 'API')} {info.get('version', '')}"
        json_url = self.get_openapi_json_route(request)
        parts = [
            f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title>",
            f"<style>{_STYLE}</style></head><body><h1>{escape(title)} — API reference</h1>",
            f"<p>The OpenAPI document: <a href='{escape(json_url)}'>{escape(json_url)}</a></p>",
            "<h2>Operations</h2>",
        ]
        for path, item in openapi_schema.get("paths", {}).items():
            for method in _METHODS:
                if method in item:
                    parts.append(_operation(method, path, item[method]))
        parts.append("<h2>Schemas</h2>")
        for name, schema in openapi_schema.get("components", {}).get("schemas", {}).items():
            parts.append(_schema(name, schema))
        parts.append("</body></html>")
        return "".join(parts).encode()


def _operation(method: str, path: str, operation: dict[str, Any]) -> str:
    out = [
        f"<h3 id='{escape(method + path)}'><span class='m'>{method.upper()}</span>"
        f"{escape(path)}</h3>"
    ]
    if operation.get("summary"):
        out.append(f"<p><b>{escape(operation['summary'])}</b></p>")
    if operation.get("description"):
        out.append(f"<p>{escape(operation['description'])}</p>")
    parameters = operation.get("parameters") or []
    if parameters:
        rows = "".join(
            f"<tr><td><code>{escape(p['name'])}</code></td><td>{escape(p.get('in', ''))}</td>"
            f"<td>{'yes' if p.get('required') else ''}</td>"
            f"<td>{_type(p.get('schema', {}))}</td>"
            f"<td>{escape(p.get('description') or '')}</td></tr>"
            for p in parameters
        )
        head = "<tr><th>parameter</th><th>in</th><th>required</th><th>type</th><th></th></tr>"
        out.append(f"<table>{head}{rows}</table>")
    body = (operation.get("requestBody") or {}).get("content", {}).get("application/json")
    if body:
        out.append(f"<p>Body: {_type(body.get('schema', {}))}</p>")
    responses = operation.get("responses") or {}
    rows = "".join(
        f"<tr><td>{escape(status)}</td><td>{escape(r.get('description', ''))}</td>"
        f"<td>{_type(((r.get('content') or {}).get('application/json') or {}).get('schema', {}))}"
        "</td></tr>"
        for status, r in sorted(responses.items())
    )
    out.append(f"<table><tr><th>status</th><th>meaning</th><th>body</th></tr>{rows}</table>")
    return "".join(out)


def _schema(name: str, schema: dict[str, Any]) -> str:
    required = set(schema.get("required") or [])
    rows = "".join(
        f"<tr><td><code>{escape(prop)}</code></td><td>{'yes' if prop in required else ''}</td>"
        f"<td>{_type(sub)}</td><td>{escape(_constraints(sub))}</td></tr>"
        for prop, sub in (schema.get("properties") or {}).items()
    )
    table = (
        f"<table><tr><th>field</th><th>required</th><th>type</th><th>limits</th></tr>{rows}</table>"
        if rows
        else f"<p>{_type(schema)}</p>"
    )
    return f"<h3 id='schema-{escape(name)}'>{escape(name)}</h3>{table}"


def _type(schema: dict[str, Any]) -> str:
    """A short, linked rendering of a schema's type."""
    if not schema:
        return ""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"<a href='#schema-{escape(name)}'>{escape(name)}</a>"
    for combinator in ("anyOf", "oneOf", "allOf"):
        if combinator in schema:
            return " | ".join(_type(sub) for sub in schema[combinator])
    kind = schema.get("type", "any")
    if isinstance(kind, list):
        kind = " | ".join(kind)
    if kind == "array":
        return f"array of {_type(schema.get('items', {})) or 'any'}"
    if "enum" in schema:
        return escape(" | ".join(repr(v) for v in schema["enum"]))
    fmt = schema.get("format")
    return escape(f"{kind} ({fmt})" if fmt else str(kind))


def _constraints(schema: dict[str, Any]) -> str:
    keys = ("minLength", "maxLength", "minimum", "maximum", "minItems", "maxItems", "pattern")
    found = {k: schema[k] for k in keys if k in schema}
    for sub in schema.get("anyOf") or []:
        found |= {k: sub[k] for k in keys if k in sub}
    return ", ".join(f"{k} {v}" for k, v in found.items())
