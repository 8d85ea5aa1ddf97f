"""The console at ``/ui``: static files shipped in the package (``knowmind/ui``), served with a
strict Content-Security-Policy. The console is a client of the public API only: it holds no
privileges, signs in with a token the user types, and keeps it in the tab's sessionStorage."""

from __future__ import annotations

from functools import cache
from importlib import resources

from litestar import Controller, Response, get
from litestar.exceptions import NotFoundException
from litestar.params import FromPath
from litestar.response import Redirect

__all__ = ["CONSOLE_CSP", "UIController"]

#: No inline script or style, nothing from another origin, not framable.
CONSOLE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
# Litestar adds "; charset=utf-8" to text types itself (once)
_TYPES = {
    ".html": "text/html",
    ".js": "text/javascript",
    ".css": "text/css",
    ".json": "application/json",
}
_HEADERS = {
    "Content-Security-Policy": CONSOLE_CSP,
    "X-Frame-Options": "DENY",  # for browsers that predate CSP's frame-ancestors
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


@cache
def _asset(name: str, folder: str = "") -> bytes | None:
    """A file of ``knowmind/ui`` (or of its ``vendor`` folder) by its plain name: no other
    folder is reachable."""
    suffix = name[name.rfind(".") :] if "." in name else ""
    if suffix not in _TYPES or "/" in name or "\\" in name or name.startswith("."):
        return None
    entry = resources.files("knowmind").joinpath("ui", *filter(None, [folder]), name)
    return entry.read_bytes() if entry.is_file() else None  # a folder of data, no package


def _serve(name: str, folder: str = "") -> Response[bytes]:
    body = _asset(name, folder)
    if body is None:
        raise NotFoundException("no such console file")
    media_type = _TYPES[name[name.rfind(".") :]]
    return Response(body, media_type=media_type, headers=_HEADERS)


class UIController(Controller):
    tags = ["console"]
    include_in_schema = False

    @get("/", status_code=302)
    async def root(self) -> Redirect:
        """A browser that opens the server's address lands on the console."""
        return Redirect(path="/ui", status_code=302)

    @get(["/ui", "/ui/"])
    async def index(self) -> Response[bytes]:
        """The console's page."""
        return _serve("index.html")

    @get("/ui/static/{name:str}")
    async def static(self, name: FromPath[str]) -> Response[bytes]:
        """Its scripts, stylesheet and texts."""
        return _serve(name)

    @get("/ui/static/vendor/{name:str}")
    async def vendor(self, name: FromPath[str]) -> Response[bytes]:
        """The libraries it ships (``knowmind/ui/vendor``: cytoscape.js)."""
        return _serve(name, "vendor")
