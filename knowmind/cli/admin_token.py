"""``knowmind admin-token [--create]``: the server admin token, and which data dir it is from."""

from __future__ import annotations

import argparse
import os
import sys

from knowmind.cli.common import Subparsers
from knowmind.services.auth import new_admin_token
from knowmind.settings import Settings, default_data_dir

__all__ = ["add_parser", "cmd_admin_token", "ensure_admin_token"]


def ensure_admin_token(settings: Settings) -> tuple[Settings, str | None]:
    """Use KNOWMIND_ADMIN_TOKEN, else the token file in the data dir, else make one.

    Returns the settings and the token when it was generated just now (to print once)."""
    if settings.server.admin_token:
        return settings, None
    path = settings.server.admin_token_file
    if path.exists():
        return settings.with_overrides(admin_token=path.read_text().strip()), None
    token = new_admin_token()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    return settings.with_overrides(admin_token=token), token


def data_dir_named(settings: Settings) -> str:
    """The data dir, and whether it was chosen (KNOWMIND_DATA_DIR) or is the default."""
    data_dir = settings.server.data_dir
    if data_dir == default_data_dir():
        return f"{data_dir} (the default: KNOWMIND_DATA_DIR is unset)"
    return f"{data_dir} (KNOWMIND_DATA_DIR)"


def cmd_admin_token(settings: Settings, args: argparse.Namespace) -> int:
    """Print the token on stdout (``ADMIN=$(knowmind admin-token)``), where it is from on
    stderr. A data dir without a token file is one no server has run in with a token of its
    own: a token made there would not be the running server's, so it is made only when asked
    (``--create``, before a server's first start)."""
    if settings.server.admin_token:
        print("knowmind: the admin token of KNOWMIND_ADMIN_TOKEN", file=sys.stderr)
        print(settings.server.admin_token)
        return 0
    path = settings.server.admin_token_file
    if path.exists() or args.create:
        made = not path.exists()
        settings, _ = ensure_admin_token(settings)
        state = "made" if made else "read"
        print(f"knowmind: {state} {path}, data dir {data_dir_named(settings)}", file=sys.stderr)
        print(settings.server.admin_token)
        return 0
    print(
        f"knowmind admin-token: no admin token in the data dir {data_dir_named(settings)}: "
        "no server has made one there. For a running server, set KNOWMIND_DATA_DIR to the "
        "data dir its start banner names (or KNOWMIND_ADMIN_TOKEN to the token it was started "
        "with). To make one here before a server first starts in this dir: knowmind "
        "admin-token --create",
        file=sys.stderr,
    )
    return 1


def add_parser(sub: Subparsers) -> None:
    command = sub.add_parser(
        "admin-token",
        help="print the server admin token (KNOWMIND_ADMIN_TOKEN, else the data dir's; "
        "stderr names which)",
    )
    command.add_argument(
        "--create",
        action="store_true",
        help="make one when the data dir has none (before the server's first start there)",
    )
    command.set_defaults(fn=cmd_admin_token)
