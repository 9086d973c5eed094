"""The `runai-reconcile` command line (click). Thin: parse, call the engine, render."""

from __future__ import annotations

import click

from reconciler import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="runai-reconcile")
def main() -> None:
    """Terraform-style plan/apply for NVIDIA Run:ai workloads."""


def _register_sim() -> None:
    try:
        from reconciler.simulator.command import sim
    except ImportError:  # the simulator package is being built
        return
    main.add_command(sim)


_register_sim()
