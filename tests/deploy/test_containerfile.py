"""The Containerfile, read by a Dockerfile parser (no registry is reachable here, so it is
not built): two stages, the wheel built in the first and installed in the second, the base
pinned by tag and digest, a non-root user, a read-only root filesystem's needs, the exec
form of `ENTRYPOINT runai-reconcile`, and a build context holding what the build copies."""

from __future__ import annotations

import fnmatch
import io
import json
import pathlib
import re
import tomllib

from dockerfile_parse import DockerfileParser

ROOT = pathlib.Path(__file__).resolve().parents[2]
CONTAINERFILE = ROOT / "Containerfile"
PINNED = re.compile(r"^[a-z0-9./-]+:[\w.-]+@sha256:[0-9a-f]{64}$")


def _parser() -> DockerfileParser:
    return DockerfileParser(fileobj=io.BytesIO(CONTAINERFILE.read_bytes()))


def _stages(parser) -> list[list[dict]]:
    stages: list[list[dict]] = []
    for instr in parser.structure:
        if instr["instruction"] == "FROM":
            stages.append([])
        if stages:
            stages[-1].append(instr)
    return stages


def _instructions(stage, name: str) -> list[str]:
    return [i["value"] for i in stage if i["instruction"] == name]


def test_every_stage_starts_from_a_base_pinned_by_tag_and_digest():
    parser = _parser()
    assert len(parser.parent_images) == 2, parser.parent_images
    for image in parser.parent_images:
        assert PINNED.match(image), f"{image} is not pinned by tag and digest"
        assert image.startswith("python:3.11-slim@"), image


def test_the_first_stage_builds_the_wheel_and_the_second_installs_it_on_the_locked_dependencies():
    build, runtime = _stages(_parser())
    assert _instructions(build, "FROM")[0].endswith(" AS build")
    assert "SETUPTOOLS_SCM_PRETEND_VERSION" in _instructions(build, "ARG")
    assert any("pip wheel --no-deps" in r for r in _instructions(build, "RUN"))
    assert "--from=build /wheels /wheels" in _instructions(runtime, "COPY")
    locked, wheel = [r for r in _instructions(runtime, "RUN") if "pip install" in r]
    # every dependency from the lock, checked against its hash; then the wheel alone
    assert "--require-hashes" in locked and "runtime.txt" in locked
    assert "--no-deps" in wheel and "runai_reconcile-*.whl" in wheel
    assert any(i.startswith("requirements/runtime.txt ") for i in _instructions(runtime, "COPY"))
    assert not any(i.startswith(("reconciler", "pyproject")) for i in _instructions(runtime, "COPY"))


def test_it_runs_as_a_non_root_user_with_exec_form_entrypoint():
    runtime = _stages(_parser())[-1]
    [user] = _instructions(runtime, "USER")
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) >= 10000, user  # numeric: runAsNonRoot can check it
    [entrypoint] = _instructions(runtime, "ENTRYPOINT")
    assert json.loads(entrypoint) == ["runai-reconcile"]  # exec form: signals reach the tool


def test_on_a_read_only_root_it_writes_only_under_tmp_and_its_workdir():
    parser = _parser()
    runtime = _stages(parser)[-1]
    env = parser.envs  # the last stage's
    assert env["HOME"].startswith("/tmp") and env["XDG_CACHE_HOME"].startswith("/tmp")
    assert _instructions(runtime, "WORKDIR")[-1] == "/work"
    assert any("chown 10001:10001 /work" in r for r in _instructions(runtime, "RUN"))


def test_the_build_context_holds_what_the_build_copies_and_the_package_needs():
    ignore = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
              if line.strip() and not line.startswith("#")]

    def admitted(path: str) -> bool:
        ok = True
        for pattern in ignore:
            negate = pattern.startswith("!")
            pattern = pattern.lstrip("!").rstrip("/")
            if fnmatch.fnmatch(path, pattern) or path.startswith(pattern + "/"):
                ok = negate
        return ok

    build = _stages(_parser())[0]
    sources = [src for value in _instructions(build, "COPY") if not value.startswith("--from")
               for src in value.split()[:-1]]
    assert sources, "the build stage copies nothing"
    for src in sources:
        assert (ROOT / src).exists() and admitted(src), src
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["readme"] in sources  # setuptools reads it while building the wheel
    assert "reconciler" in sources and not admitted(".git") and not admitted(".venv")
