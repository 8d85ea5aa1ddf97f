"""The traps a newcomer fell into on a first run (issue 44): an admin token minted in the wrong
data dir, a walkthrough that failed when run twice, tenants taken by id only and never listed,
a warning on every CLI call, and capabilities that said less than what was running."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from litestar.testing import AsyncTestClient

from knowmind import cli
from knowmind.answer.methods import METHOD_NAMES
from knowmind.app import create_app
from knowmind.models.llm_factory import build_llm
from knowmind.recall.ranker import build_ranker
from knowmind.recall.registry import STAGE_NAMES
from tests.conftest import ADMIN_HEADERS

# -- the admin token: which data dir, and no token minted where no server has run ---------------


@pytest.fixture
def quiet_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI in this process, logging as the suite does (not into capsys' buffers), with no
    KNOWMIND_* variable of the caller's."""
    for name in list(os.environ):
        if name.startswith("KNOWMIND_"):
            monkeypatch.delenv(name)
    monkeypatch.setattr(cli, "configure_logging", lambda *_: None)


def test_admin_token_refuses_to_mint_where_no_server_has_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], quiet_cli
) -> None:
    data_dir = tmp_path / "not-the-servers"
    monkeypatch.setenv("KNOWMIND_DATA_DIR", str(data_dir))
    assert cli.main(["admin-token"]) == 1
    out, err = capsys.readouterr()
    assert out == ""  # nothing for ADMIN=$(knowmind admin-token) to take for a token
    assert str(data_dir) in err and "KNOWMIND_DATA_DIR" in err and "--create" in err
    assert not (data_dir / "admin_token").exists()

    assert cli.main(["admin-token", "--create"]) == 0  # asked for: made, as `serve` would
    out, err = capsys.readouterr()
    token = out.strip()
    assert token.startswith("kmadmin_") and out.count("\n") == 1
    assert (data_dir / "admin_token").read_text().strip() == token
    assert f"made {data_dir / 'admin_token'}" in err and "KNOWMIND_DATA_DIR" in err

    assert cli.main(["admin-token"]) == 0  # the server's token file: read, and said so
    out, err = capsys.readouterr()
    assert out.strip() == token and f"read {data_dir / 'admin_token'}" in err

    monkeypatch.setenv("KNOWMIND_ADMIN_TOKEN", "kmadmin_from-the-environment")
    assert cli.main(["admin-token"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "kmadmin_from-the-environment" and "KNOWMIND_ADMIN_TOKEN" in err


# -- an idempotent walkthrough: tenants by name, created once, listed -------------------------


LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \[", re.MULTILINE)


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The exit status, stdout and stderr of a CLI call, less the log lines of the suite's
    logging (the CLI's own goes to stderr; the suite's default prints to stdout)."""
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    out = "".join(line for line in out.splitlines(keepends=True) if not LOG_LINE.match(line))
    return code, out, err


def test_tenant_create_twice_list_and_tokens_by_name(
    settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], quiet_cli
) -> None:
    monkeypatch.setenv("KNOWMIND_DATABASE_URL", settings.database.database_url)
    name = f"acme-{uuid.uuid4().hex[:8]}"
    code, out, _ = _run(capsys, "tenant", "create", name, "--language", "german")
    assert code == 0 and f"name={name} language=german" in out
    tenant_id = out.split()[1]

    # run again: refused with the existing tenant named, not a traceback ...
    code, out, err = _run(capsys, "tenant", "create", name)
    assert code == 1 and out == "" and "Traceback" not in err
    assert "exists already" in err and tenant_id in err and "--if-missing" in err
    # ... or answered with it (the form a walkthrough pasted twice uses)
    for _ in range(2):
        code, out, _ = _run(capsys, "tenant", "create", name, "--if-missing", "--quiet")
        assert (code, out) == (0, f"{tenant_id}\n")
    code, out, _ = _run(capsys, "tenant", "create", name, "--if-missing", "--language", "german")
    assert code == 0 and out.startswith(f"tenant {tenant_id} ") and "exists already" in out
    code, _, err = _run(capsys, "tenant", "create", name, "--if-missing", "--language", "english")
    assert code == 1 and "language german, not english" in err

    code, out, _ = _run(capsys, "tenant", "list")
    assert code == 0 and f"tenant {tenant_id} name={name} language=german created=" in out
    code, out, _ = _run(capsys, "tenant", "list", "--json")
    listed = {t["name"]: t for t in json.loads(out)}
    assert code == 0 and listed[name]["id"] == tenant_id

    # a token for the tenant by name or by id; --quiet prints the token alone
    code, out, _ = _run(capsys, "token", "create", "--tenant", name, "--quiet")
    assert code == 0 and out.startswith("kmt_") and out.count("\n") == 1
    code, out, _ = _run(capsys, "token", "create", "--tenant", tenant_id, "--scopes", "read")
    assert code == 0 and f"tenant {tenant_id} scopes=read" in out
    assert out.strip().splitlines()[-1].startswith("kmt_")
    code, _, err = _run(capsys, "token", "create", "--tenant", f"no-such-{name}")
    assert code == 1 and f"tenant 'no-such-{name}' not found" in err


async def test_a_second_create_of_a_tenant_answers_409_with_its_id(client) -> None:
    """The REST form of the same walkthrough: the 409 names the tenant that exists, so a
    script that reads ``id`` from the answer works on its second run too."""
    body = {"name": f"walk-{uuid.uuid4().hex[:8]}"}
    first = await client.post("/v1/admin/tenants", json=body, headers=ADMIN_HEADERS)
    assert first.status_code == 201, first.text
    again = await client.post("/v1/admin/tenants", json=body, headers=ADMIN_HEADERS)
    assert again.status_code == 409
    assert again.json()["id"] == first.json()["id"] and again.json()["field"] == "name"
    assert "exists already" in again.json()["detail"]


@pytest.mark.slow
def test_first_run_cli_in_a_new_shell_says_where_it_looks_and_warns_of_nothing(tmp_path):
    """The CLI as a newcomer runs it: a new shell (no XDG_RUNTIME_DIR, no KNOWMIND_*), a data
    dir where no server has run, the embedded database. No command writes a warning."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWMIND_")}
    env.pop("XDG_RUNTIME_DIR", None)
    env |= {"KNOWMIND_DATA_DIR": str(tmp_path / "data"), "PYTHONWARNINGS": "default"}

    def knowmind(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "knowmind", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )

    refused = knowmind("admin-token")
    assert refused.returncode == 1 and refused.stdout == ""
    assert str(tmp_path / "data") in refused.stderr and "--create" in refused.stderr
    ran = [refused]
    ran.append(knowmind("migrate"))
    ids = set()
    for _ in range(2):  # pasted twice
        ran.append(knowmind("tenant", "create", "acme", "--if-missing", "-q"))
        ids.add(ran[-1].stdout.strip())
        ran.append(knowmind("token", "create", "--tenant", "acme", "-q"))
        assert ran[-1].stdout.startswith("kmt_"), ran[-1].stderr
    assert len(ids) == 1
    ran.append(knowmind("tenant", "list"))
    assert f"tenant {ids.pop()} name=acme" in ran[-1].stdout
    for done in ran[1:]:
        assert done.returncode == 0, done.stderr
    for done in ran:
        assert "Warning" not in done.stderr and "XDG_RUNTIME_DIR" not in done.stderr, done.stderr


# -- capabilities: what is running, component by component -------------------------------------

CONFIGURATIONS = {
    "llm extraction": {"extractors": "gazetteer,ner,llm"},
    "no language model": {"extractors": "gazetteer", "llm_provider": "none"},
}


@pytest.mark.parametrize("configuration", CONFIGURATIONS)
async def test_capabilities_are_the_running_configuration(settings, embedder, configuration):
    configured = settings.with_overrides(**CONFIGURATIONS[configuration])
    llm, no_llm = build_llm(configured.models.llm_setup)
    app = create_app(configured, embedder=embedder)
    async with AsyncTestClient(app=app) as client:
        caps = (await client.get("/v1/capabilities", headers=ADMIN_HEADERS)).json()
    if llm is not None:
        await llm.close()
    models, extractors = configured.models, configured.ingest.extractor_list
    assert caps["embedder"] == {
        "backend": models.embedder.split(":", 1)[0],
        "model": embedder.model_id,
        "dim": embedder.dim,
    }
    assert models.reranker == "none"  # the suite's: nothing to load, nothing active
    assert caps["reranker"]["configured"] is False and caps["reranker"]["active"] is False
    assert caps["ranker"]["configured"] == configured.recall.ranker
    assert caps["ranker"]["active"] == build_ranker(configured.recall.ranker).name
    assert caps["graph"]["backend"] == configured.graph.graph_backend
    assert caps["stages"] == list(STAGE_NAMES)
    assert caps["extraction"]["extractors"] == extractors
    assert caps["ner"]["rules"] == ("ner" in extractors)
    if "ner" not in extractors:
        assert caps["ner"]["spacy"]["active"] is False
    llm_extraction = caps["extraction"]["llm"]
    assert llm_extraction["active"] == ("llm" in extractors and llm is not None)
    assert "not implemented" not in json.dumps(caps)
    assert caps["llm"]["configured"] == models.llm_provider
    assert caps["answer"]["methods"] == list(METHOD_NAMES)
    if llm is None:
        assert caps["llm"] | {"providers": None} == {
            "active": False,
            "configured": "none",
            "provider": "none",
            "providers": None,
            "model": None,
            "reason": no_llm,
        }
        assert llm_extraction["reason"] == "llm is not in KNOWMIND_EXTRACTORS"
        assert caps["answer"]["generation"] is False and "raptor" in caps["answer"]["unavailable"]
    else:
        assert caps["llm"]["active"] is True and caps["llm"]["provider"] == llm.provider
        assert caps["llm"]["model"] == llm.model == llm_extraction["model"]
        assert caps["answer"]["generation"] is True and caps["answer"]["unavailable"] == {}
