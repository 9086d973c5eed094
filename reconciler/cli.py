"""The `runai-reconcile` command line (click).

Thin by design: each command turns its flags into the inputs of an operation
(`reconciler.operations`: a specs folder, the state store of `_store`, the API client
factory of `_client`, options and callbacks), renders what it returns, and picks the
exit code: 0 success (with --detailed-exitcode: and nothing to do), 1 error, 2 changes,
130 interrupted by Ctrl-C, 143 by SIGTERM (which is handled as Ctrl-C). Errors become one clear message and exit 1.
`_client` is the one place, besides the `sim` command, that imports the simulator
(`--sim`). Caller: the `runai-reconcile` console script (`entry`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import sys
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

# httpx imports its own command line (`httpx._main`: rich, pygments) wherever rich is
# installed beside it; this program never runs that command, so it is not imported.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

import click

from reconciler import __version__, errors, kinds, operations, timeline
from reconciler.operations import running
from reconciler.plans import Action, Plan

DEFAULT_STATE = "state/state.json"
DEFAULT_SPECS = "specs"
DEFAULT_PARALLELISM = 64
SIM_DIR = ".runai-sim"


@dataclass
class Config:
    url: str | None = None
    sim: bool = False
    state_path: str = DEFAULT_STATE
    state_name: str = "default"
    parallelism: int = DEFAULT_PARALLELISM
    color: bool = False
    insecure: bool = False
    lock_timeout: float = 0.0
    timeout: float | None = None  # the API retry budget (--timeout); None: the client's default
    extra: dict = field(default_factory=dict)


pass_config = click.make_pass_decorator(Config)


class _Group(click.Group):
    """Turns the reconciler's and the API's errors into one line on stderr and exit 1.

    Usage errors (an unknown flag, a bad choice) exit 1 too, not click's 2: exit 2 means
    "changes" under --detailed-exitcode, and a typo in a CI job must not read as drift.
    """

    def main(self, *args, **kwargs):
        kwargs["standalone_mode"] = False
        try:
            rv = super().main(*args, **kwargs)
        except click.ClickException as exc:
            exc.show()
            sys.exit(1)
        except click.Abort as exc:
            if isinstance(exc.__context__, KeyboardInterrupt):  # Ctrl-C or SIGTERM
                # What the interrupt left half-built (an event loop, a coroutine never
                # awaited) is collected on the way out: nothing there for the user to read.
                sys.unraisablehook = lambda _unraisable: None
                warnings.simplefilter("ignore")
                click.echo("Interrupted.", err=True)
                sys.exit(_interrupted_exit())
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)

    # `sim` is imported when asked for: the simulator's web stack stays out of start-up.
    def get_command(self, ctx: click.Context, name: str):
        if name == "sim":
            _register_sim()
        return super().get_command(ctx, name)

    def list_commands(self, ctx: click.Context):
        _register_sim()
        return super().list_commands(ctx)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (errors.SpecError, errors.PolicyFileError) as exc:
            for problem in exc.problems:
                click.echo(problem, err=True)
            n = len(exc.problems)
            head = f"Error: {n} problem{'s' if n != 1 else ''} in the " + (
                "policy files" if isinstance(exc, errors.PolicyFileError) else "specs")
            if isinstance(exc, errors.PolicyFileError):
                click.echo(f"{head}; nothing was read from or written to the API.", err=True)
            elif ctx.invoked_subcommand == "validate":  # it never writes: say what it found
                valid = "" if exc.valid is None else (
                    f"; {exc.valid} spec{'s' if exc.valid != 1 else ''} valid")
                click.echo(f"{head}{valid}.", err=True)
            else:
                click.echo(f"{head}; nothing was written to the API and the state was not "
                           "touched.", err=True)
            sys.exit(1)
        except errors.ReconcileError as exc:  # the API's errors too (api.errors derive from it)
            # A request not sent because the command had given up on the API: the failure
            # that made it give up is the one to read, alone (not nested in this one).
            exc = getattr(exc, "gave_up_on", None) or exc
            click.echo(f"Error: {exc}", err=True)
            sys.exit(1)


def _finite(ctx, param, value):
    if value is not None and value != value:  # NaN passes a range check
        raise click.BadParameter("must be a number of seconds", ctx=ctx, param=param)
    return value


# --- global options -----------------------------------------------------------------
# Declared once, here: the group takes each before the command (`runai-reconcile --no-color
# plan`), and every command and sub-group takes it after (`runai-reconcile plan
# --no-color`, as a Terraform user types it). Given in both places, the one after the
# command wins. A new global option is one `_global(...)` line; `_configure` hands its
# value to the `Config` field of its name.

_GLOBALS: list[tuple[tuple[str, ...], dict]] = []


def _global(*decls: str, **attrs) -> None:
    _GLOBALS.append((decls, attrs))


_global("--url", envvar="RUNAI_URL", help="Control-plane URL (default: $RUNAI_URL).")
_global("--sim", is_flag=True,
        help=f"Use the embedded simulator instead of a control plane; its data persists under {SIM_DIR}/.")
_global("--state", "state_path", default=DEFAULT_STATE, show_default=True,
        envvar="RUNAI_RECONCILE_STATE", type=click.Path(dir_okay=False),
        help="State file, or a postgresql:// URL (default: $RUNAI_RECONCILE_STATE).")
_global("--state-name", default="default", show_default=True,
        help="Which named state in a PostgreSQL --state.")
_global("--parallelism", default=DEFAULT_PARALLELISM, show_default=True,
        type=click.IntRange(1, 256), help="API requests in flight at once.")
_global("--no-color", is_flag=True, help="No ANSI colour (also: NO_COLOR set).")
_global("--insecure", is_flag=True, help="Do not verify the control plane's TLS certificate.")
_global("-v", "--verbose", is_flag=True, help="Log retries and API requests to stderr.")
_global("--lock-timeout", default=0.0, show_default=True, type=click.FloatRange(0),
        help="Seconds to wait for the state lock.")
_global("--timeout", "timeout", envvar="RUNAI_RECONCILE_TIMEOUT", metavar="SECONDS",
        type=click.FloatRange(0, 86400, min_open=True), callback=_finite,
        help="Seconds the command keeps retrying an API that fails or does not answer, "
             "in all (default: $RUNAI_RECONCILE_TIMEOUT, else 60); given, it also bounds "
             "each wait of apply for a resource to be ready or gone (else 900).")


def _global_options(f):
    """The group's own: the global options as declared, defaults and variables included."""
    for decls, attrs in reversed(_GLOBALS):
        f = click.option(*decls, **attrs)(f)
    return f


def _late_options(command: click.Command) -> list[click.Option]:
    """The global options a command takes after its name: no default, no variable (those
    were the group's to apply), hidden from its --help (the group's lists them). One that
    the command declares itself (a flag of the same spelling) stays the command's."""
    taken = {o for p in command.params for o in getattr(p, "opts", ())}
    taken |= {p.name for p in command.params}
    out = []
    for decls, attrs in _GLOBALS:
        late = click.Option(decls, **{k: v for k, v in attrs.items()
                                      if k not in ("default", "envvar", "show_default")},
                            hidden=True)
        if late.name not in taken and not taken & set(late.opts):
            out.append(late)
    return out


class _TakesGlobals:
    """A command (or sub-group) that also takes the global options after its name; given
    there, they replace the group's values in the `Config` before the command runs."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._late = _late_options(self)
        self.params.extend(self._late)
        if self._late and not self.epilog:
            self.epilog = ("The global options (see runai-reconcile --help) may be given "
                           "here too; given before the command as well, this one wins.")

    def invoke(self, ctx: click.Context):
        given = {}
        for opt in self._late:
            value = ctx.params.pop(opt.name, None)
            if ctx.get_parameter_source(opt.name) is click.core.ParameterSource.COMMANDLINE:
                given[opt.name] = value
        if given:
            root = ctx.find_root()
            root.meta[_GIVEN].update(given)
            _configure(root)
        return super().invoke(ctx)


class _Command(_TakesGlobals, click.Command):
    pass


class _SubGroup(_TakesGlobals, click.Group):
    command_class = _Command
    group_class = type  # its own sub-groups are of its class


_Group.command_class = _Command
_Group.group_class = _SubGroup
_GIVEN = "runai-reconcile.globals"
_OURS = "runai-reconcile.logging"


def _configure(root: click.Context) -> None:
    """The `Config` (kept as the one object every command's `pass_config` finds) and the
    log level from the global options' values, wherever they were given."""
    values = dict(root.meta[_GIVEN])
    no_color, verbose = values.pop("no_color"), values.pop("verbose")
    names = {f.name for f in dataclasses.fields(Config)}
    cfg = root.obj if isinstance(root.obj, Config) else Config()
    for name, value in values.items():
        if name in names:
            setattr(cfg, name, value)
    cfg.color = not no_color and "NO_COLOR" not in os.environ and sys.stdout.isatty()
    root.obj = cfg
    level = logging.INFO if verbose else logging.WARNING
    handlers = list(logging.getLogger().handlers)
    logging.basicConfig(level=level, format="%(levelname)s: %(message)s")
    if handlers != logging.getLogger().handlers:
        root.meta[_OURS] = True  # the handler is ours: a late -v may lower its level
    elif root.meta.get(_OURS):
        logging.getLogger().setLevel(level)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # the client logs each request itself (-v)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="runai-reconcile")
@_global_options
@click.pass_context
def main(ctx: click.Context, **global_values) -> None:
    """Terraform-style plan/apply for NVIDIA Run:ai workloads.

    Credentials come from the environment: RUNAI_URL, and RUNAI_TOKEN or
    RUNAI_CLIENT_ID + RUNAI_CLIENT_SECRET.

    The options below may also follow the command (`runai-reconcile plan --no-color`);
    given in both places, the one after the command wins.
    """
    timeline.mark("import", "end")
    ctx.meta[_GIVEN] = global_values
    _configure(ctx)
    try:
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread
        return
    ctx.call_on_close(lambda: signal.signal(signal.SIGTERM, previous))


# --- SIGTERM as Ctrl-C --------------------------------------------------------------
# CI cancellation and pod shutdown send SIGTERM: while an operation runs its coroutine it
# stops it as asyncio stops it on Ctrl-C (`running.interrupt`: the main task is
# cancelled and unwinds), whatever SIGINT's disposition (ignored in a background job, in
# many containers); otherwise it goes to the SIGINT handler in force (Python's
# KeyboardInterrupt). The executor and the watch handle SIGTERM themselves while they
# run. The exit code says which signal it was: 130 after Ctrl-C, 143 after SIGTERM.

_SIGTERM_SEEN: list[bool] = []
SIGNAL_EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}
_PID = os.getpid()


def _on_sigterm(signum, frame) -> None:
    if os.getpid() != _PID:  # a forked child (a spec loader): SIGTERM's default, death
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    _SIGTERM_SEEN.append(True)
    if running.interrupt():
        return
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)
    else:
        raise KeyboardInterrupt


def _interrupted_exit() -> int:
    return SIGNAL_EXIT[signal.SIGTERM if _SIGTERM_SEEN else signal.SIGINT]


# --- helpers ------------------------------------------------------------------------


def _client(cfg: Config):
    from reconciler.api import RunaiClient

    # One retry budget for the whole command, whatever number of clients it makes: the
    # first client's, passed on to the others.
    budget = {} if cfg.timeout is None else {"retry_budget_s": cfg.timeout}
    if "budget" in cfg.extra:
        budget["budget"] = cfg.extra["budget"]
    client = _new_client(cfg, RunaiClient, budget)
    cfg.extra.setdefault("budget", client.budget)
    return client


def _new_client(cfg: Config, RunaiClient, budget: dict):  # noqa: N803 (the class, imported late)
    if cfg.sim:
        import httpx

        from reconciler.simulator import DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET, create_app
        from reconciler.simulator import datalock
        from reconciler.simulator.store import SimulatorDataError

        try:
            Path(SIM_DIR).mkdir(exist_ok=True)
            data_path = os.path.join(SIM_DIR, "data.json")
            # One owner per data file (a `sim serve --data` too), until the command ends.
            release = datalock.hold(data_path)
            ctx = click.get_current_context(silent=True)
            if ctx is not None:
                ctx.find_root().call_on_close(release)
            app = create_app(data_path=data_path)
        except FileExistsError:
            raise click.ClickException(f"{SIM_DIR} (the --sim data folder) is not a folder")
        except OSError as exc:
            raise click.ClickException(f"cannot use {SIM_DIR}: {exc.strerror or exc}")
        except datalock.DataInUse as exc:
            raise click.ClickException(str(exc)) from None
        except SimulatorDataError as exc:
            raise click.ClickException(f"{exc}; move it away to start afresh")
        return RunaiClient("http://runai-sim", client_id=DEFAULT_CLIENT_ID,
                           client_secret=DEFAULT_CLIENT_SECRET, transport=httpx.ASGITransport(app=app),
                           **budget)
    return RunaiClient.from_env(cfg.url, verify=not cfg.insecure, max_connections=cfg.parallelism,
                                also_secret=[cfg.state_path],
                                early_token=cfg.extra.get("early_token"), **budget)


def _store(cfg: Config):
    from reconciler.state.backends import open_store

    return open_store(cfg.state_path, name=cfg.state_name, lock_timeout=cfg.lock_timeout)


def _connect(cfg: Config, *, early: bool = False):
    """The client factory the operations call when they need the API. `early`: the
    command reads the API at once, so its token is asked for as soon as the specs are
    loading (`prepare`), beside the imports, the state and the specs (`api.early`)."""
    return _Connect(cfg, early)


class _Connect:
    def __init__(self, cfg: Config, early: bool):
        self._cfg = cfg
        self._early = early and not cfg.sim

    def __call__(self):
        return _client(self._cfg)

    def prepare(self) -> None:
        """The token request sent now, on a thread (the operations call this once the
        spec loaders have forked: no thread may run then)."""
        if self._early and "early_token" not in self._cfg.extra:
            from reconciler.api import early as early_token

            self._cfg.extra["early_token"] = early_token.start(
                self._cfg.url, os.environ, verify=not self._cfg.insecure)


def _check_addresses(addrs: tuple[str, ...], flag: str) -> list[str]:
    for a in addrs:
        try:
            kinds.parse_address(a)
        except ValueError as exc:
            raise errors.ReconcileError(f"{flag}: {exc}") from None
    return list(addrs)


def _say(message: str) -> None:
    click.echo(message, err=True)


def _progress():
    """A progress line for a long refresh or apply, only when stderr is a terminal; log
    lines (and `say`'s) clear it before they are written."""
    if not sys.stderr.isatty():
        return None
    from reconciler.progress import Progress

    progress = Progress(sys.stderr)
    for handler in logging.getLogger().handlers:
        handler.addFilter(progress.log_filter)
    return progress


def _render(plan: Plan, fmt: str, cfg: Config) -> str:
    if fmt == "json":
        from reconciler.render import json as json_render

        return json_render.render_plan(plan)
    if fmt == "markdown":
        from reconciler.render import markdown as markdown_render

        return markdown_render.render_plan(plan)
    from reconciler.render import text as text_render

    return text_render.render_plan(plan, color=cfg.color)


def _echo_out(out: str) -> None:
    click.echo(out, nl=not out.endswith("\n"))


def _show_plan(plan: Plan, fmt: str, cfg: Config) -> None:
    if plan.targets and fmt == "json":
        # text and markdown say it in the plan itself; json has `targets` and a note on stderr.
        from reconciler.render import words

        _say(words.targets_note(plan.targets))
    with timeline.span("render"):
        _echo_out(_render(plan, fmt, cfg))


specs_dir = click.argument("directory", default=DEFAULT_SPECS, required=False,
                           type=click.Path(file_okay=False))
FORMATS = ["text", "json", "markdown"]
format_opt = click.option("--format", "fmt", type=click.Choice(FORMATS), default="text",
                          show_default=True,
                          help="Output format; json goes to stdout alone, markdown is for PR comments.")
target_opt = click.option("--target", "targets", multiple=True, metavar="ADDR",
                          help="Act on this address only (repeatable).")


def folder_opts(command):
    """--specs-moved and --prune-others: plan and apply of another specs folder than the
    state's, when that deletes what only the other names (docs/state-backends.md)."""
    command = click.option(
        "--prune-others", is_flag=True,
        help="Delete the workloads of the state that only the specs folder it was last "
             "applied from names (refused without it).")(command)
    return click.option(
        "--specs-moved", is_flag=True,
        help="The specs folder moved (or was renamed): the state follows DIR, and what DIR "
             "does not name is deleted.")(command)


class _PolicyFiles(click.Path):
    def split_envvar_value(self, rv: str) -> list[str]:
        # The variable's empty entries (`$RUNAI_RECONCILE_POLICY:team.yaml` while it was
        # unset) name no file; an empty --policy is still refused.
        return [v for v in super().split_envvar_value(rv) if v]


# Click splits the variable's value at os.pathsep (`:`; `;` on Windows), as for PATH.
policy_opt = click.option("--policy", "policy", multiple=True, metavar="FILE",
                          envvar="RUNAI_RECONCILE_POLICY", type=_PolicyFiles(dir_okay=False),
                          help="A policy file of rules checked on the plan (repeatable; "
                               "default: $RUNAI_RECONCILE_POLICY, paths separated by "
                               f"'{os.pathsep}').")


# --- commands -----------------------------------------------------------------------


@main.command()
@specs_dir
def validate(directory: str) -> None:
    """Check the spec files offline (no API, no state)."""
    desired = operations.validate(directory)
    _spec_warnings(desired)
    click.echo(f"{len(desired)} spec{'s' if len(desired) != 1 else ''} valid in {directory}.")


def _spec_warnings(desired) -> None:
    """The spec loader's warnings (a folder default's once), on stderr."""
    for text in dict.fromkeys(w for d in desired for w in d.warnings):
        click.echo(f"Warning: {text}", err=True)


@main.command()
@specs_dir
@format_opt
@click.option("--detailed-exitcode", is_flag=True, help="Exit 2 when there are changes, 0 when none.")
@target_opt
@click.option("--replace", "replace", multiple=True, metavar="ADDR", help="Force a replacement (repeatable).")
@click.option("--destroy", is_flag=True, help="Plan the deletion of everything in the state.")
@click.option("--refresh", "refresh", type=click.Choice(["auto", "full", "none"]),
              default="auto", show_default=True, is_flag=False, flag_value="auto",
              help="How live is read: auto lists first and reads only what the list does "
                   "not vouch for; full reads every workload; none plans from the state.")
@click.option("--no-refresh", "no_refresh", is_flag=True,
              help="Plan from the state alone (--refresh=none).")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="Save the plan (mode 0600) for `show FILE` and `apply FILE`.")
@policy_opt
@folder_opts
@pass_config
def plan(cfg: Config, directory, fmt, detailed_exitcode, targets, replace, destroy, refresh,
         no_refresh, out_path, policy, specs_moved, prune_others) -> None:
    """Show what apply would do. Makes no API writes and does not change the state.

    With --policy, exits 1 after the plan when it breaks a deny rule."""
    mode = "none" if no_refresh else refresh
    options = operations.PlanOptions(
        targets=_check_addresses(targets, "--target"),
        replace=_check_addresses(replace, "--replace"), destroy=destroy,
        refresh=mode != "none", refresh_mode=mode if mode != "none" else "auto",
        parallelism=cfg.parallelism, policy=policy, specs_moved=specs_moved,
        prune_others=prune_others)
    connect = _connect(cfg, early=options.refresh)
    result = operations.plan(directory, _store(cfg), connect, options, out=out_path,
                             progress=_progress())
    _show_plan(result.plan, fmt, cfg)
    _spec_warnings(result.desired)
    if result.saved_to:
        _say(f"Saved the plan to {result.saved_to}; `runai-reconcile apply {result.saved_to}` "
             "applies exactly these actions.")
    refused = operations.policy_refusal(result.plan)
    if refused:
        raise errors.ReconcileError(f"{refused}: apply will refuse this plan.")
    if detailed_exitcode and result.plan.has_changes:
        sys.exit(2)


@main.command()
@click.argument("directory", default=DEFAULT_SPECS, required=False, metavar="[DIR|PLANFILE]",
                type=click.Path())
@click.option("--auto-approve", is_flag=True, help="Apply without asking.")
@target_opt
@click.option("--replace", "replace", multiple=True, metavar="ADDR", help="Force a replacement (repeatable).")
@click.option("--destroy", is_flag=True, help="Delete everything in the state.")
@click.option("--refresh", "refresh", type=click.Choice(["auto", "full"]), default="auto",
              show_default=True,
              help="How live is read: auto lists first and reads only what the list does "
                   "not vouch for; full reads every workload.")
@format_opt
@policy_opt
@folder_opts
@pass_config
def apply(cfg: Config, directory, auto_approve, targets, replace, destroy, refresh, fmt,
          policy, specs_moved, prune_others) -> None:
    """Plan, show, confirm, then perform the actions and record them in the state.

    Given a PLANFILE saved by `plan --out`, apply exactly that plan without asking; it is
    refused as stale when the state or a live workload it acts on changed since.

    With --format json, stdout holds one document, the plan and what became of each
    change (docs/plan-format.md, "Apply result"); a plan to confirm is shown on stderr."""
    saved = os.path.isfile(directory)
    progress = _progress()
    beside = _ShownBeside(progress.say if progress is not None else _say)
    say = beside.say

    def approve(the_plan: Plan) -> bool:
        # A saved plan is what was reviewed: it applies without a prompt.
        ask = not (saved or auto_approve or not the_plan.has_changes)
        if fmt != "json":
            if ask or progress is not None:
                _show_plan(the_plan, fmt, cfg)
            else:
                beside.start(lambda: _show_plan(the_plan, fmt, cfg))
        elif ask:
            _say(_render(the_plan, "text", cfg))
        return not ask or _confirm(err=fmt == "json")

    try:
        try:
            if saved:
                if targets or replace or destroy or specs_moved or prune_others:
                    raise errors.ReconcileError(
                        "--target, --replace, --destroy, --specs-moved and --prune-others cannot "
                        "be given with a saved plan: they were fixed when the plan was made")
                connect = _connect(cfg, early=True)
                result = operations.apply_saved(directory, _store(cfg), connect,
                                                parallelism=cfg.parallelism, approve=approve,
                                                on_event=say, progress=progress, policy=policy,
                                                wait_timeout_s=cfg.timeout)
            else:
                options = operations.PlanOptions(
                    targets=_check_addresses(targets, "--target"),
                    replace=_check_addresses(replace, "--replace"), destroy=destroy,
                    refresh_mode=refresh, parallelism=cfg.parallelism, policy=policy,
                    specs_moved=specs_moved, prune_others=prune_others)
                connect = _connect(cfg, early=True)
                result = operations.apply(directory, _store(cfg), connect, options,
                                          approve=approve, on_event=say, progress=progress,
                                          wait_timeout_s=cfg.timeout)
        finally:
            beside.join()  # the plan written first, whatever happened after
    except errors.PolicyDenied as exc:  # refused before any write: show what broke the rules
        _show_plan(exc.plan, fmt, cfg)
        raise
    except (KeyboardInterrupt, click.Abort) as exc:
        # Before any action started (the refresh, the prompt): the executor handles the
        # signals once it runs.
        if isinstance(exc, click.Abort) and not isinstance(exc.__context__, KeyboardInterrupt):
            raise
        _say("\nInterrupted before any action started: nothing was applied.")
        sys.exit(_interrupted_exit())
    if fmt == "json":
        from reconciler.render import json as json_render

        _echo_out(json_render.render_apply(result))
    if result.plan.has_changes or result.failed:
        _apply_summary(result, err=fmt != "text")
    if result.interrupted:
        sys.exit(SIGNAL_EXIT.get(result.signal, 130))
    if result.failed or result.unknown:
        sys.exit(1)


class _ShownBeside:
    """An apply that asks nothing, without a progress bar: its plan is written by a thread
    while the actions go on (the renderer's CPU beside the requests' waits), and the
    lines the apply says meanwhile wait for it, so the output reads as it would after.
    The thread starts writing once the first actions are under way: at the first line the
    apply says (an action ended), or `FIRST_WAVE_S` after it started, whichever is first,
    so that the first requests go out without the renderer taking turns with them."""

    FIRST_WAVE_S = 0.25

    def __init__(self, say: Callable[[str], None]):
        self._say = say
        self._lock = threading.Lock()
        self._held: list[str] | None = None  # a list while the plan is being written
        self._thread: threading.Thread | None = None
        self._failed: BaseException | None = None
        self._go = threading.Event()

    def start(self, show: Callable[[], None]) -> None:
        self._held = []
        self._thread = threading.Thread(target=self._show, args=(show,),
                                        name="plan-output", daemon=True)
        self._thread.start()

    def _show(self, show: Callable[[], None]) -> None:
        self._go.wait(self.FIRST_WAVE_S)
        interval = sys.getswitchinterval()
        # The event loop's thread, woken by an answer, takes the interpreter from this one
        # within this long (not the default 5 ms each time).
        sys.setswitchinterval(0.0005)
        try:
            show()
        except BaseException as exc:  # noqa: BLE001 - raised again by `join`
            self._failed = exc
        finally:
            sys.setswitchinterval(interval)
            with self._lock:
                held, self._held = self._held, None
                for line in held:
                    self._say(line)

    def say(self, line: str) -> None:
        with self._lock:
            if self._held is not None:
                self._held.append(line)
                self._go.set()
                return
        self._say(line)

    def join(self) -> None:
        """Once the plan is written (and what waited for it): its writing's error, if any."""
        self._go.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
            if self._failed is not None:
                raise self._failed


def _stdin_is_tty() -> bool:
    return sys.stdin.isatty()


def _confirm(*, err: bool = False) -> bool:
    if not _stdin_is_tty():
        raise errors.ReconcileError(
            "apply needs confirmation: run it in a terminal, or pass --auto-approve")
    click.echo("\nDo you want to perform these actions? Only 'yes' will be accepted.", err=err)
    answer = click.prompt("  Enter a value", default="", show_default=False, err=err)
    return answer.strip() == "yes"


def _apply_summary(result, *, err: bool = False) -> None:
    for o in result.failed:
        _say(f"Error: {o.address}: {o.action.value} failed: {o.message}")
    for o in result.unknown:
        _say(f"Unknown: {o.address}: {o.action.value} abandoned ({o.message}): it may have "
             "happened; the next apply looks it up")
    done = result.counts()
    parts = [f"{done[a.value]} {_DONE[a]}" for a in _SUMMARY_ORDER]
    if done["adopt"]:
        parts.append(f"{done['adopt']} adopted")
    if done["state_only"]:
        parts.append(f"{done['state_only']} recorded in the state")
    head = "Apply failed!" if result.failed or result.unknown else "Apply complete!"
    tail = f", {len(result.failed)} failed" if result.failed else ""
    if result.interrupted:
        head = "Apply interrupted!"
        tail += f", {len(result.not_started)} not started"
        if result.unknown:
            tail += f", {len(result.unknown)} unknown"
    click.echo(f"\n{head} Resources: {', '.join(parts)}{tail}.", err=err)


_SUMMARY_ORDER = (Action.CREATE, Action.UPDATE, Action.REPLACE, Action.DELETE, Action.SUSPEND,
                  Action.RESUME)
_DONE = {Action.CREATE: "created", Action.UPDATE: "updated", Action.REPLACE: "replaced",
         Action.DELETE: "deleted", Action.SUSPEND: "suspended", Action.RESUME: "resumed"}


@main.command()
@click.argument("planfile_path", metavar="PLANFILE", type=click.Path(dir_okay=False))
@format_opt
@pass_config
def show(cfg: Config, planfile_path: str, fmt: str) -> None:
    """Render a plan saved by `plan --out` (no API, no state)."""
    _show_plan(operations.show(planfile_path), fmt, cfg)


@main.command()
@specs_dir
@format_opt
@click.option("--detailed-exitcode", is_flag=True, help="Exit 2 when something drifted, 0 when not.")
@click.option("--refresh", "refresh", type=click.Choice(["full", "auto"]), default="full",
              show_default=True,
              help="full reads every workload (exact); auto reads only what the workload "
                   "list does not vouch for.")
@pass_config
def drift(cfg: Config, directory: str, fmt: str, detailed_exitcode: bool, refresh: str) -> None:
    """Report what changed live behind runai-reconcile's back (refresh only).

    Compares live with the state, never writes to the API or the state. Where the specs
    differ from the state is reported apart, as pending changes (not drift)."""
    from reconciler.render import drift as drift_render
    from reconciler.render import markdown as markdown_render

    connect = _connect(cfg, early=True)
    report = operations.drift(directory, _store(cfg), connect,
                              parallelism=cfg.parallelism, progress=_progress(),
                              refresh_mode=refresh)
    if fmt == "json":
        out = drift_render.render_json(report)
    elif fmt == "markdown":
        out = markdown_render.render_drift(report)
    else:
        out = drift_render.render_text(report)
    _echo_out(out)
    if detailed_exitcode and report.has_drift:
        sys.exit(2)


class _Duration(click.ParamType):
    name = "DURATION"

    def convert(self, value, param, ctx):
        from reconciler.watch import intervals

        if isinstance(value, (int, float)):
            return float(value)
        try:
            return intervals.parse(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


@main.command()
@specs_dir
@click.option("--mode", type=click.Choice(["report", "heal", "sync"]), default="report",
              show_default=True, help="report: never write; heal: undo drift only; sync: "
                                      "apply the plan (deletions only with --prune).")
@click.option("--interval", "interval_s", type=_Duration(), default="60s", show_default=True,
              help="Time between cycles: 60s, 2m, 500ms.")
@click.option("--prune", is_flag=True, help="In sync mode, delete what no spec names.")
@click.option("--max-actions", default=10, show_default=True, type=click.IntRange(0),
              help="At most this many actions per cycle; the rest wait for the next.")
@click.option("--full-refresh-every", default=10, show_default=True, type=click.IntRange(1),
              help="A full refresh every K cycles; the others list first (--refresh=auto).")
@click.option("--pull", is_flag=True,
              help="DIR is a git working tree: `git pull --ff-only` before each cycle.")
@click.option("--listen", default="127.0.0.1:9090", show_default=True, metavar="HOST:PORT",
              help="Serve /metrics, /healthz, /readyz, /api/status and the status page here "
                   "('' or 'off': not at all).")
@click.option("--notify", "notify_urls", multiple=True, metavar="URL",
              envvar="RUNAI_RECONCILE_NOTIFY",
              help="POST an alert here for each change of sync status or health (repeatable; "
                   "default: $RUNAI_RECONCILE_NOTIFY, URLs separated by spaces).")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="One line per event on stderr, as text or JSON.")
@click.option("--max-cycles", type=click.IntRange(1), default=None, hidden=True)
@policy_opt
@pass_config
def watch(cfg: Config, directory, mode, interval_s, prune, max_actions, full_refresh_every,
          pull, listen, notify_urls, log_format, max_cycles, policy) -> None:
    """Reconcile continuously: re-read the specs, refresh, plan, act by --mode, publish.

    One watch per state acts (the holder of its controller lock); others stand by and take
    over when it stops. SIGTERM or Ctrl-C lets the actions in flight finish, then exits 0
    (docs/watch.md)."""
    import time as _time

    from reconciler.watch import logs

    def log(event: str, **fields) -> None:
        click.echo(logs.line(event, fields, fmt=log_format, now=_time.time()), err=True)

    if log_format == "json":
        _log_records_as_json()
    try:
        _watch(cfg, directory, log, operations.WatchOptions(
            mode=mode, interval_s=interval_s, prune=prune, max_actions=max_actions,
            full_refresh_every=full_refresh_every, pull=pull, policy=policy,
            parallelism=cfg.parallelism, max_cycles=max_cycles), listen, notify_urls)
    except errors.ReconcileError as exc:
        if log_format != "json":
            raise
        # Every stderr line a JSON object: a watch that cannot start says why as one too.
        problems = getattr(exc, "problems", None)
        log("error", message=str(exc), problems=[str(p) for p in problems] if problems else None)
        sys.exit(1)


def _watch(cfg: Config, directory, log, options, listen, notify_urls) -> None:
    """The watch's run: its store, board and publishers, then the loop; exits with its code."""
    from reconciler.watch import status

    mode, interval_s = options.mode, options.interval_s
    store = _store(cfg)
    board = status.StatusBoard(status.Snapshot(mode=mode, role=status.STANDBY,
                                               specs_dir=directory, state=store.where,
                                               interval_s=interval_s))
    observers, closers = _watch_publishers(board, listen, notify_urls)
    try:
        code = operations.watch(directory, store, _connect(cfg), options, board,
                                observers=observers, log=log)
    finally:
        for close in closers:
            close()
    sys.exit(code)


def _log_records_as_json() -> None:
    """--log-format json: the records of Python's logging (the API client's with -v,
    uvicorn's, warnings) leave through the handler this CLI set up as JSON lines too, so
    that every stderr line is one JSON object. A handler someone else installed (a test
    harness's) keeps its own format."""
    from reconciler.watch import logs

    logging.captureWarnings(True)
    formatter = logs.JsonFormatter()
    for handler in logging.getLogger().handlers:
        if type(handler) is logging.StreamHandler and handler.stream in (sys.stderr,
                                                                         sys.__stderr__):
            handler.setFormatter(formatter)


def _watch_publishers(board, listen: str, notify_urls):
    """What publishes the watch's snapshots: the HTTP endpoint at `listen`, and the
    notifier of `notify_urls`. Returns (observers of each snapshot, closers)."""
    from reconciler.watch import notify, server  # imported when a watch starts
    observers, closers = [], []
    if listen and listen != "off":
        closers.append(server.serve(board, listen, version=__version__).close)
    if notify_urls:
        notifier = notify.Notifier(list(notify_urls))
        observers.append(notifier.observe)
        closers.append(notifier.close)  # lets the queued alerts go out for a moment
    return observers, closers


@main.command("export")
@click.option("--project", "projects", multiple=True, metavar="ID_OR_NAME",
              help="Only this project's workloads (repeatable).")
@click.option("--kind", "kinds_", multiple=True, metavar="KIND",
              help=f"Only this kind (repeatable): {', '.join(kinds.KINDS)}.")
@click.option("--name", "names", multiple=True, metavar="GLOB",
              help="Only workloads whose name matches this shell pattern (repeatable).")
@click.option("--out", "out_dir", default=DEFAULT_SPECS, show_default=True, metavar="DIR",
              type=click.Path(file_okay=False), help="The specs folder to write into.")
@click.option("--force", is_flag=True, help="Overwrite spec files that exist already.")
@click.option("--include-secrets", is_flag=True,
              help="Write the values of secret-looking environment variables and of paths the "
                   "state marks sensitive (files mode 0600) "
                   "instead of a placeholder that validate refuses.")
@click.option("--defaults", "factor_defaults", is_flag=True,
              help="Move what every spec of a folder shares into its _defaults.yaml.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="json: the exported addresses and files, on stdout.")
@pass_config
def export_cmd(cfg: Config, projects, kinds_, names, out_dir, force, include_secrets,
               factor_defaults, fmt) -> None:
    """Write a spec file for each live workload: DIR/<project>/<kind>/<name>.yaml.

    <project> is the project's name when the API gives one (the spec then says
    `project: NAME`), else its id (`projectId:`). The specs hold what a person writes:
    no server defaults, no values the server generated or owns. Deleted workloads and
    completed trainings are skipped. Nothing is written when a file exists already,
    unless --force. Makes no API write; `plan` then shows the workloads as adoptions."""
    options = operations.ExportOptions(
        projects=list(projects), kinds=_check_kinds(kinds_), names=list(names), force=force,
        include_secrets=include_secrets, defaults=factor_defaults, parallelism=cfg.parallelism)
    result = operations.export(out_dir, _connect(cfg), options, _store(cfg))
    from reconciler.render import commands

    _echo_out(commands.export_json(result) if fmt == "json"
              else commands.export_text(result, out_dir))


def _check_kinds(values: tuple[str, ...]) -> list[str]:
    """The kind names given (any case); an unknown one is an error with the closest."""
    out = []
    for value in values:
        kind, close = kinds.spelled(value, cutoff=0.5)
        if kind is None:
            hint = f" (did you mean {close}?)" if close else ""
            raise errors.ReconcileError(f"--kind {value}: no such kind{hint}; the kinds are "
                                        + ", ".join(kinds.KINDS))
        out.append(kind)
    return out


@main.command("force-unlock")
@click.argument("lock_id")
@pass_config
def force_unlock(cfg: Config, lock_id: str) -> None:
    """Remove the state lock LOCK_ID left by a holder that is gone.

    The local file's OS lock dies with its process, so this only clears the lock info a
    dead holder left; it refuses while the holder runs or when LOCK_ID does not match."""
    info = operations.force_unlock(_store(cfg), lock_id)
    click.echo(f"Removed lock {info.id} ({info.who}, operation {info.operation} since "
               f"{info.created}).")


@main.command("import")
@click.argument("args", nargs=-1, metavar="ADDR WORKLOAD_ID | --all [DIR]")
@click.option("--all", "all_", is_flag=True,
              help="Adopt every live workload that a spec of DIR names and the state does not hold.")
@click.option("--project", "projects", multiple=True, metavar="ID_OR_NAME",
              help="With --all: only the specs of this project (repeatable).")
@click.option("--kind", "kind_names", multiple=True, metavar="KIND",
              help="With --all: only the specs of this kind (repeatable).")
@pass_config
def import_(cfg: Config, args: tuple[str, ...], all_: bool, projects, kind_names) -> None:
    """Adopt existing live workloads into the state, with no API write.

    `import ADDR WORKLOAD_ID` records the workload WORKLOAD_ID under ADDR
    (Kind/projectId/name) once its kind, project and name match ADDR. `import --all [DIR]`
    adopts every live workload that a spec of DIR (default specs/) names and the state does
    not hold. What is recorded as last applied is the spec `export` writes for the
    workload, so the next plan shows only where its spec differs from what runs."""
    if not all_:
        if projects or kind_names:
            raise click.UsageError("--project and --kind go with --all")
        if len(args) != 2:
            raise click.UsageError("expected ADDR WORKLOAD_ID (or --all [DIR])")
        from reconciler.render import commands

        store = _store(cfg)
        result = operations.import_workload(store, _connect(cfg), *args)
        _echo_out(commands.imported_one(result, store.where))
        for text in result.warnings:
            click.echo(f"Warning: {text}", err=True)
        return
    if len(args) > 1:
        raise click.UsageError("--all takes at most one argument, the specs folder DIR")
    directory = args[0] if args else DEFAULT_SPECS
    if os.path.isfile(directory):  # as validate and plan refuse it
        raise errors.ReconcileError(f"{directory} is a file; import --all takes a specs folder")
    kind_names = _check_kinds(kind_names)
    store = _store(cfg)
    result = operations.import_all(directory, store, _connect(cfg),
                                   projects=projects, kind_names=kind_names,
                                   parallelism=cfg.parallelism)
    from reconciler.render import commands

    _echo_out(commands.imported_all(result, store.where))


# --- state --------------------------------------------------------------------------


@main.group("state")
def state_group() -> None:
    """Inspect, edit, restore or move the state."""


@state_group.command("list")
@pass_config
def state_list(cfg: Config) -> None:
    """List the addresses the state tracks (with the project's name when known)."""
    from reconciler.render import commands

    store = _store(cfg)
    rows = operations.state_list(store)
    if rows:
        _echo_out(commands.state_list(rows))
    else:  # exit 0 all the same, as `terraform state list` on an empty state
        _say(f"No state at {store.where}: nothing has been applied with it yet."
             if operations.never_written(store) else
             f"The state at {store.where} tracks no workloads.")


@state_group.command("show")
@click.argument("address")
@click.option("--show-sensitive", is_flag=True,
              help="Print secret-looking and lifecycle.sensitive values as they are.")
@pass_config
def state_show(cfg: Config, address: str, show_sensitive: bool) -> None:
    """Show one address's record as JSON (sensitive values masked)."""
    from reconciler.render import commands

    record = operations.state_show(_store(cfg), address)
    _echo_out(commands.state_show(record, show_sensitive=show_sensitive))


@state_group.command("rm")
@click.argument("addresses", nargs=-1, required=True)
@pass_config
def state_rm(cfg: Config, addresses: tuple[str, ...]) -> None:
    """Forget addresses without touching the workloads (they are no longer managed)."""
    for a in operations.state_rm(_store(cfg), addresses):
        click.echo(f"Removed {a}")


@state_group.command("history")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Output format.")
@pass_config
def state_history(cfg: Config, fmt: str) -> None:
    """List the versions kept: serial, when, who, operation, workload count.

    A PostgreSQL state keeps every version; a state file keeps one previous version (its
    .backup), so its history is the state and that one."""
    from reconciler.render import commands

    store = _store(cfg)
    versions = operations.state_history(store)
    render = commands.state_history_json if fmt == "json" else commands.state_history_text
    _echo_out(render(versions, store.where, store.keeps_every_version))


@state_group.command("restore")
@click.argument("serial")
@pass_config
def state_restore(cfg: Config, serial: str) -> None:
    """Write version SERIAL again as a new serial (the workloads are not touched)."""
    if not (serial.isascii() and serial.isdigit() and int(serial) >= 1):
        raise errors.ReconcileError(
            f"state restore {serial!r}: expected the serial of a version, a positive whole "
            "number as `state history` lists it (e.g. state restore 6)")
    serial = int(serial)
    store = _store(cfg)
    restored = operations.state_restore(store, serial)
    n = len(restored.resources)
    click.echo(f"Restored serial {serial} ({n} workload{'s' if n != 1 else ''}) as serial "
               f"{restored.serial} of {store.where}. No workload was changed: `plan` shows "
               "how live differs from it.")


@state_group.command("migrate")
@click.option("--to", "to", metavar="PATH|URL",
              help="Where to copy the state: a file path or a postgresql:// URL "
                   "(default: the current --state, with another --to-name).")
@click.option("--to-name", default="default", show_default=True,
              help="The state name at a PostgreSQL --to.")
@pass_config
def state_migrate(cfg: Config, to: str | None, to_name: str) -> None:
    """Copy the current state (serial and lineage kept, empty journal) to another backend
    or state name; the source is left as it is."""
    from reconciler.state.backends import open_store
    from reconciler.state.backends import is_url, without_password

    to = to or cfg.state_path
    if not is_url(to) and to_name != "default":
        raise errors.ReconcileError("--to-name selects a state in a PostgreSQL --to; a state "
                                    "file holds one state (give another --to path instead)")
    target = open_store(to, name=to_name, lock_timeout=cfg.lock_timeout)
    source = _store(cfg)
    done = operations.state_migrate(source, target)
    n = len(done.state.resources)
    what = (f"serial {done.state.serial}, {n} workload{'s' if n != 1 else ''}, lineage "
            f"{done.state.lineage}")
    if done.copied:
        click.echo(f"Copied the state ({what}) from {source.where} to {target.where}; "
                   f"the source is unchanged.")
    else:
        click.echo(f"{target.where} already holds this state ({what}); nothing copied.")
    nxt = f"--state '{without_password(to)}'"
    if is_url(to) and to_name != "default":
        nxt += f" --state-name '{to_name}'"
    click.echo(f"Next, pass {nxt} (or set RUNAI_RECONCILE_STATE)"
               + (", the password from PGPASSWORD or ~/.pgpass." if is_url(to) else "."))


def _register_sim() -> None:
    """Add `sim` on first use: the simulator (Starlette, uvicorn) stays out of other commands' start-up."""
    if "sim" not in main.commands:
        from reconciler.simulator.command import sim

        main.add_command(sim)


def entry() -> None:
    """The `runai-reconcile` program: the interpreter's process-wide settings
    (`_tune_collector`), then `main`. Tests call `main` through click's runner, which
    leaves the interpreter as it found it."""
    _tune_collector()
    main()


def _tune_collector() -> None:
    """The program's use of the cycle collector (`operations.memory.hooks`): paused while
    an operation loads its specs and plans, what exists then frozen as it resumes (its
    next passes, over the actions' garbage, need not walk the specs, state and live bodies
    again); in a watch, what exists frozen after a cycle that parsed the specs (the full
    collections that came every few cycles walked it all to find nothing); a watch cycle's
    reads and plan paused too, resumed without freezing (the cycle may yet fail).
    docs/performance.md has what each buys."""
    import gc

    from reconciler.operations import memory

    paused = False

    def loading() -> None:
        nonlocal paused
        paused = gc.isenabled()
        gc.disable()

    def planned() -> None:
        nonlocal paused
        if paused:
            paused = False
            gc.freeze()
            gc.enable()

    def cycle_planned() -> None:
        nonlocal paused
        if paused:
            paused = False
            gc.enable()

    def settled() -> None:
        gc.collect()
        gc.freeze()

    memory.hooks = memory.Hooks(loading=loading, planned=planned,
                                cycle_planned=cycle_planned, settled=settled)


if __name__ == "__main__":  # python -m reconciler.cli
    entry()
