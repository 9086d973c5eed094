"""runai-reconcile: Terraform-style plan/apply for NVIDIA Run:ai workloads.

Layers (inputs on the left, pure logic in the middle, effects on the right):

    desired/  (spec files)  ┐
    state/    (state file)  ├─> diff, planner ─> plans.Plan ─> render/ (text, json)
    api/      (live GETs)   ┘                         └──────> executor (api writes, state writes)

`cli` wires them together; `simulator` is the fake control plane. `__version__` is the
version the package was installed as (pyproject.toml: setuptools-scm, from git tags).
"""

try:  # written by setuptools-scm when the package is built or installed (pip install)
    from reconciler._version import __version__
except ImportError:  # the source imported without being installed
    __version__ = "0+unknown"
