"""The release as a user gets it: `python -m build` makes the sdist and, from it, the
wheel (so the sdist builds outside git); the wheel, installed with the locked runtime
dependencies into a new virtual environment, runs the README's first command in a
folder holding only a copy of the example specs (no checkout on the path), reports the
version git gave it, and its watch serves the status page (a template, package data)
and the `runai_reconcile_info` metric with that version."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.constants import ROOT
from tests.helpers.simserve import free_port

pytestmark = pytest.mark.wheel


def run(argv: list, *, cwd: Path, env: dict | None = None, timeout: float = 300):
    res = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True,
                         text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, f"{argv}: exit {res.returncode}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def test_the_wheel_installed_alone_runs_the_readmes_first_command(tmp_path):
    dist = tmp_path / "dist"
    run([sys.executable, "-m", "build", "--outdir", dist, ROOT], cwd=tmp_path)
    [sdist] = dist.glob("runai_reconcile-*.tar.gz")
    [wheel] = dist.glob("runai_reconcile-*-py3-none-any.whl")
    version = wheel.name.split("-")[1]
    assert sdist.name == f"runai_reconcile-{version}.tar.gz"
    # git's word: HEAD's tag when HEAD is a clean tagged commit, else a dev release of HEAD
    node = re.search(r"\+g([0-9a-f]{7,})", version)
    if node:
        assert git("rev-parse", "HEAD").startswith(node.group(1)), version
    else:
        assert f"v{version}" in git("tag", "--points-at", "HEAD").split(), version

    # A new environment, installed into by this pip (`--python`: no copy of pip of its own
    # to set up), in one go: the locked runtime dependencies and the wheel by its hash, so
    # the wheel's own requirements must all be pinned in the runtime lock.
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=tmp_path)
    pip = [sys.executable, "-m", "pip", "--python", venv / "bin" / "python",
           "--disable-pip-version-check", "-q"]
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    wanted = tmp_path / "requirements.txt"
    wanted.write_text(f"-r {ROOT / 'requirements' / 'runtime.txt'}\n"
                      f"runai-reconcile @ {wheel.as_uri()} --hash=sha256:{digest}\n")
    run([*pip, "install", "--no-compile", "-r", wanted], cwd=tmp_path)
    run([*pip, "check"], cwd=tmp_path)

    work = tmp_path / "work"
    shutil.copytree(ROOT / "specs", work / "specs")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RUNAI_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(HOME=str(tmp_path), NO_COLOR="1",
               PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    where = run(["python", "-c", "import reconciler; print(reconciler.__file__)"], cwd=work,
                env=env)
    assert where.stdout.startswith(str(venv)), where.stdout  # the wheel's, not the checkout's
    assert run(["runai-reconcile", "--version"], cwd=work, env=env).stdout == (
        f"runai-reconcile, version {version}\n")

    # the README's first command, less the install: its words, in bash
    run(["bash", "-c", "runai-reconcile --sim apply --auto-approve"], cwd=work, env=env)
    plan = run(["bash", "-c", "runai-reconcile --sim plan --detailed-exitcode"], cwd=work, env=env)
    assert plan.stdout.endswith("No changes. Live workloads match the specs.\n")

    port = free_port()
    watch = subprocess.Popen(
        ["runai-reconcile", "--sim", "watch", "specs", "--interval", "1s",
         "--listen", f"127.0.0.1:{port}"], cwd=work, env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        info = page = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and watch.poll() is None:
            try:
                metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
                info = [s.labels for f in text_string_to_metric_families(metrics)
                        for s in f.samples if s.name == "runai_reconcile_info"]
                page = httpx.get(f"http://127.0.0.1:{port}/", timeout=5)
                if info and page.status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)
    finally:
        watch.send_signal(signal.SIGTERM)
        _, err = watch.communicate(timeout=60)
    assert watch.returncode == 0, err[-3000:]
    assert info and info[0]["version"] == version, info
    assert page is not None and page.status_code == 200
    assert "</html>" in page.text and version in page.text  # the template, with the version
