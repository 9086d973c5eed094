"""The policy tests' materials: on built plans, `dt` (a DistributedTraining change) and
`rules` (policy rule sources, as from policy.yaml), used by tests/policy; through the CLI,
`training` (a Training spec's text) and `write_policy` (a policy file beside the specs),
used by the e2e policy tests and the saved-plan tests."""

from __future__ import annotations

import textwrap

from reconciler import policy
from reconciler.plans import Action, ResourceChange
from tests.helpers.constants import CLUSTER
from tests.helpers.examples import training_body


def training(name: str = "llama-ft", *, image: str = "nvcr.io/nvidia/pytorch:24.05-py3",
             gpus: int = 8, labels: str = "team") -> str:
    return textwrap.dedent(f"""\
        kind: Training
        name: {name}
        projectId: "7"
        clusterId: {CLUSTER}
        spec:
          image: {image}
          compute: {{gpuDevicesRequest: {gpus}}}
          labels: [{{name: {labels}, value: x}}]
        """)


def write_policy(ws, text: str, name: str = "policy.yaml") -> str:
    path = ws.root / name
    path.write_text(textwrap.dedent(text).lstrip())
    return str(path)


def dt(name: str, action: Action = Action.CREATE, project: str = "7", *, workers: int = 4,
       image: str = "nvcr.io/nvidia/pytorch:24.05-py3", before: dict | None = None,
       project_name: str | None = None, **kw) -> ResourceChange:
    after = None if action is Action.DELETE else {**training_body(name, image, workers),
                                                  "projectId": project}
    return ResourceChange(address=f"DistributedTraining/{project}/{name}",
                          kind="DistributedTraining", name=name, project_id=project,
                          action=action, reason="new", after=after, before=before,
                          desired_phase=None if after is None else "Running",
                          project_name=project_name, **kw)


def rules(*entries: dict) -> list[policy.Source]:
    doc = policy.PolicyFile.model_validate({"rules": list(entries)})
    return [policy.Source(r, "policy.yaml") for r in doc.rules]
