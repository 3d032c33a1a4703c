"""deploy/Dockerfile cannot be built here (no Docker engine): lint what can be linted statically."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"


def _instructions() -> list[tuple[str, str]]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            out.append((op.upper(), rest.strip()))
    return out


def test_multistage_pinned_slim_base() -> None:
    ins = _instructions()
    args = dict(a.split("=", 1) for op, a in ins if op == "ARG" and "=" in a)
    base = args["PYTHON_IMAGE"]
    assert re.fullmatch(r"python:3\.11\.\d+-slim-[a-z]+(@sha256:[0-9a-f]{64})?", base), base
    froms = [a for op, a in ins if op == "FROM"]
    assert len(froms) == 2 and all(f.startswith("${PYTHON_IMAGE}") for f in froms)
    assert "latest" not in DOCKERFILE.read_text()


def test_runs_non_root_with_the_operator_entrypoint() -> None:
    ins = _instructions()
    final = ins[max(i for i, (op, _) in enumerate(ins) if op == "FROM") :]
    users = [a for op, a in final if op == "USER"]
    assert users and users[-1].split(":")[0] not in ("0", "root")
    (entry,) = [a for op, a in final if op == "ENTRYPOINT"]
    assert json.loads(entry) == ["sovereignspec", "run"]  # exec form, identical to `sovereignspec run`
    assert not [a for op, a in final if op == "CMD"]
    assert not [a for op, a in final if op == "RUN"], "the runtime stage only copies the built virtualenv"


def test_build_installs_with_pinned_constraints_and_context_is_small() -> None:
    run = " ".join(a for op, a in _instructions() if op == "RUN")
    assert "-c constraints.txt" in run
    for op, a in _instructions():
        if op == "COPY" and "--from" not in a:
            for src in a.split()[:-1]:
                assert (ROOT / src).exists(), f"COPY source {src} missing"
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    assert ignore[1] == "*" or "*" in ignore  # deny by default
    assert "!sovereignspec/" in ignore


def test_chart_matches_image_user_and_ports() -> None:
    chart = (ROOT / "charts" / "sovereignspec" / "templates" / "deployment.yaml").read_text()
    assert "runAsUser: 65532" in chart and "USER 65532:65532" in DOCKERFILE.read_text()
    values = (ROOT / "charts" / "sovereignspec" / "values.yaml").read_text()
    assert "metricsPort: 8080" in values and "healthPort: 8081" in values
    assert "EXPOSE 8080 8081" in DOCKERFILE.read_text()
