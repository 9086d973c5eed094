"""A checkov custom check for runai-reconcile's plan JSON (`plan --format json`, read with
`checkov -f plan.json --framework terraform_plan --external-checks-dir <this folder>`).

checkov counts a resource of a plan only when one of its checks applies to the resource's
type, and none of its own knows the `runai_*` types (docs/plan-format.md, "Read by tools
written for Terraform"). This check applies to all of them: every container image a
workload will run with (`change.after`, the planned object) names a tag other than
`latest`, or a digest.
"""

from __future__ import annotations

from typing import Any

from checkov.common.models.enums import CheckCategories, CheckResult
from checkov.terraform.checks.resource.base_resource_check import BaseResourceCheck

RUNAI_TYPES = [
    "runai_distributed_training",
    "runai_distributed_inference",
    "runai_training",
    "runai_workspace",
    "runai_inference",
    "runai_nim_service",
    "runai_manifest",
]


def images(conf: Any) -> list[str]:
    """Every `image` below `conf` (checkov wraps each value in a list)."""
    found: list[str] = []
    if isinstance(conf, dict):
        for key, value in conf.items():
            if key == "image":
                found.extend(v for v in (value if isinstance(value, list) else [value])
                             if isinstance(v, str))
            else:
                found.extend(images(value))
    elif isinstance(conf, list):
        for item in conf:
            found.extend(images(item))
    return found


def pinned(image: str) -> bool:
    """`repo:tag` with a tag other than `latest`, or `repo@sha256:...`."""
    if "@" in image:
        return True
    name = image.rsplit("/", 1)[-1]
    return ":" in name and name.rsplit(":", 1)[1] != "latest"


class RunaiImagesPinned(BaseResourceCheck):
    def __init__(self) -> None:
        super().__init__(name="Run:ai workload images are pinned to a tag other than latest",
                         id="CKV_RUNAI_1", categories=[CheckCategories.SUPPLY_CHAIN],
                         supported_resources=RUNAI_TYPES)

    def scan_resource_conf(self, conf: dict[str, list[Any]]) -> CheckResult:
        return (CheckResult.PASSED if all(pinned(i) for i in images(conf))
                else CheckResult.FAILED)


check = RunaiImagesPinned()
