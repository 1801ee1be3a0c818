"""What every `smagent` command shares: the context (global options, the API session),
JSON output, argument parsing, the output helpers, and the one place where an error
becomes a message and an exit code (`SmagentGroup.invoke`).

The exit codes and the error JSON are documented in the README and in `smagent.errors`.
With ``--json``, a failed command still prints exactly one JSON document on stdout:
``{"error": MESSAGE, "exit_code": N, ...details}`` (``problems`` for bad input,
``changed`` for a failure after Sets were sent).
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import traceback

from typing import TYPE_CHECKING, ClassVar, Iterator, Sequence

import click

from smagent.config import files as paths
from smagent.errors import EXIT_FABRIC, BadInput, InternalError, Interrupted, SmagentError, after_sets

if TYPE_CHECKING:  # imported when a command first needs a session (start-up time)
    from smagent import api


class Context:
    """Global options; the transport opens on first use, so `decode` needs no fabric."""

    def __init__(self, **opts):
        # no --transport (nor SMAGENT_TRANSPORT): the first CA libibumad lists, else the
        # simulator, which then says so once the session opens (`session`)
        self.defaulted = opts.get("transport") is None
        if self.defaulted:
            from smagent.transport import default_kind
            opts["transport"] = default_kind()
        if opts.get("port_guid") is not None:  # the CA and port it names, found once here
            if opts.get("ca") is not None or opts.get("port") is not None:
                raise BadInput("--port-guid names the port: give it without --ca/--port")
            if opts["transport"] == "umad":
                from smagent.transport.umad_lib import find_port_guid
                opts["ca"], opts["port"] = find_port_guid(opts["port_guid"])
        self.opts = opts
        self._session = None

    def session(self, classes=()) -> api.Session:
        """The API session (smagent.api): the CLI is a thin layer over it. ``classes``: the
        GMP classes umad registers (a command that sends them asks before first use)."""
        if self._session is None:
            from smagent import api
            o = self.opts
            if self.defaulted and o["transport"] == "sim":
                from smagent.transport import SIM_DEFAULT_NOTE
                click.echo(SIM_DEFAULT_NOTE, err=True)
            self._session = api.connect(
                o["transport"], ca=o["ca"], port=o["port"], topology=o["topology"], fixture=o["fixture"],
                record=o["record"], window=o["window"], timeout_ms=o["timeout"], retries=o["retries"],
                m_key=o["mkey"], m_key_file=o["mkey_file"], classes=classes, node_name_map=o["node_name_map"],
                # table writes keep backups and a journal on a live fabric (the in-process
                # simulator and replays have nothing to keep)
                state_dir=paths.default_state_dir() if o["transport"] == "umad" else None)
        return self._session

    def transport(self):
        return self.session().transport

    def sets_sent(self) -> list[str]:
        """The Sets sent so far in this run (empty if the transport never opened)."""
        return [] if self._session is None else self._session.transport.stats.sets_sent()

    def close(self):
        if self._session is not None:
            self._session.close()

    def transient_write(self, dry_run: bool) -> dict:
        """A write with ``--transport sim`` changes a fabric that lives in this process
        only: say so on stderr, and return the JSON field that says it ({} otherwise)."""
        if dry_run or self.opts["transport"] != "sim" or self._session is None:  # None: a session given from outside
            return {}
        click.echo(SIM_TRANSIENT, err=True)
        return {"lost_on_exit": True}


SIM_TRANSIENT = ("note: --transport sim: the simulated fabric lives in this process only; what this command "
                 "wrote is gone when it exits (a Python session keeps one fabric across calls: "
                 "smagent.connect('sim'); ibsim keeps one across runs: --transport umad)")


# -- the one translation point ------------------------------------------------------------
_ARGS = "smagent.args"  # ctx.meta key: the root's raw arguments (SmagentGroup.parse_args)


def _debug(ctx) -> bool:
    return bool(os.environ.get("SMAGENT_DEBUG")) or bool(ctx.params.get("debug"))


def _wants_json(ctx) -> bool:
    """Whether the command line asked for --json (read from the raw arguments, since the
    subcommand's own context is gone once its error reaches the group)."""
    return _has_flag(ctx, "--json")


def _has_flag(ctx, flag: str) -> bool:
    args = ctx.meta.get(_ARGS, [])
    return flag in (args[:args.index("--")] if "--" in args else args)


EXIT_DETAILED_ERROR = 1  # plan --detailed-exitcode: Terraform's codes, 0 no change, 1 error, 2 changes


def _exit_code(ctx, code: int) -> int:
    """The exit status of an error: its documented code, or 1 under `--detailed-exitcode`,
    where 2 means changes pending (as Terraform), so no error may exit 2."""
    return EXIT_DETAILED_ERROR if code and _has_flag(ctx, "--detailed-exitcode") else code


def as_smagent_error(exc: BaseException, sets_sent: list[str]) -> SmagentError:
    """The typed error a CLI run ends with. Anything not typed is a bug (InternalError),
    whatever its Python type; once a Set was sent, "nothing sent" (BadInput) can no
    longer be true, so it becomes a FabricFailure listing what was sent."""
    if isinstance(exc, KeyboardInterrupt):
        exc = Interrupted("interrupted: some Sets may have been applied; run the command again "
                          "(it re-plans from the switches)" if sets_sent else "interrupted: nothing was sent")
    elif not isinstance(exc, SmagentError):
        exc = InternalError(exc)
    return after_sets(exc, sets_sent)


def _usage_json(e: click.ClickException) -> None:
    """click's usage error as the document every bad input gets (``problems`` included)."""
    message = e.format_message()
    emit_json({"error": message, "exit_code": e.exit_code, "type": "UsageError", "problems": [message]})
    click.echo(f"Error: {e.format_message()}", err=True)


def error_json(err: SmagentError) -> dict:
    return {"error": str(err), "exit_code": err.exit_code, "type": type(err).__name__, **err.details()}


EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell shows for a tool whose reader left


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush finds no closed pipe."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's captured stdout)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


class SmagentGroup(click.Group):
    """The root command: every error of every subcommand ends here as a message on stderr
    (or one JSON document with --json) and its documented exit code."""

    def make_context(self, info_name, args, parent=None, **extra):
        try:  # the global options' usage errors happen here, before invoke
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.ClickException as e:
            if "--json" not in args:
                raise
            _usage_json(e)
            sys.exit(e.exit_code)

    def parse_args(self, ctx, args):
        ctx.meta[_ARGS] = list(args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, SystemExit):
            raise
        except click.ClickException as e:  # usage errors: click's own message and code 2
            e.exit_code = _exit_code(ctx, e.exit_code)
            if not _wants_json(ctx):
                raise
            _usage_json(e)
            ctx.exit(e.exit_code)
        except BrokenPipeError:  # `smagent discover | head`: the reader left; end as piped tools do
            _quiet_stdout()
            ctx.exit(EXIT_BROKEN_PIPE)
        except (Exception, KeyboardInterrupt) as e:  # noqa: BLE001 - this is the one translation point
            obj = ctx.obj if isinstance(ctx.obj, Context) else None
            err = as_smagent_error(e, obj.sets_sent() if obj else [])
            if isinstance(err, InternalError) and _debug(ctx):
                traceback.print_exception(type(e), e, e.__traceback__, file=sys.stderr)
            code = _exit_code(ctx, err.exit_code)
            if _wants_json(ctx):
                emit_json({**error_json(err), "exit_code": code})
            click.echo(f"Error: {err}", err=True)  # click's own prefix, as before
            ctx.exit(code)


# -- output ---------------------------------------------------------------------------------
def log_to_stderr(verbose: int):
    """``-v``: the ``smagent`` loggers at INFO on stderr, ``-vv``: DEBUG; without it no
    log line (the command's own output says what a user needs). Returns the undo."""
    logger = logging.getLogger("smagent")
    if not verbose:
        return lambda: None
    handler = _LineAwareHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    old = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO if verbose == 1 else logging.DEBUG)

    def undo():
        logger.removeHandler(handler)
        logger.setLevel(old)
    return undo


class ProgressLine:
    """The one status line on a terminal (stderr, a TTY only: `progress_line`): the
    command's step, ``[i/n]`` of its steps when they are known, and the SMPs sent so far.
    A log record (`-v`) clears it, is printed, and the line is drawn again below it
    (`_LineAwareHandler`), so the two never run into each other. Call it with a step's
    name (the sweep's ``progress`` callback); `finish` erases it."""
    active: ClassVar[ProgressLine | None] = None
    EVERY = 256  # SMPs between redraws

    def __init__(self, transport, what: str, steps: Sequence[str] = ()):
        self.t, self.what, self.steps = transport, what, tuple(steps)
        self.step, self.shown, self.width = "", 0, 0
        transport.on_send = self._sent
        ProgressLine.active = self

    def __call__(self, step: str) -> None:
        self.step = step
        self.draw()

    def _sent(self, _request) -> None:
        if self.t.stats.sent - self.shown >= self.EVERY:
            self.draw()

    def text(self) -> str:
        name = self.step.rpartition(": ")[2]  # a repair pass names "repair_2: lft_write"
        at = f"[{self.steps.index(name) + 1}/{len(self.steps)}] " if name in self.steps else ""
        return f"{self.what}: {at}{self.step} {self.shown:,} SMPs"

    def draw(self) -> None:
        self.shown = self.t.stats.sent
        text = self.text()
        click.echo("\r" + text.ljust(self.width), nl=False, err=True)
        self.width = len(text)

    def clear(self) -> None:
        click.echo("\r" + " " * self.width + "\r", nl=False, err=True)

    def finish(self) -> None:
        self.t.on_send = None
        self.clear()
        if ProgressLine.active is self:
            ProgressLine.active = None


class _LineAwareHandler(logging.StreamHandler):
    """``-v``'s handler: a record never lands on the progress line."""

    def emit(self, record: logging.LogRecord) -> None:
        line = ProgressLine.active
        if line is not None:
            line.clear()
        super().emit(record)
        if line is not None:
            line.draw()


def progress_line(obj, what: str, as_json: bool = False, steps: Sequence[str] = ()) -> ProgressLine | None:
    """A `ProgressLine` for a command on a terminal; None when stderr is not a TTY or the
    output is JSON (scripts and pipes get no control characters)."""
    if as_json or not sys.stderr.isatty():
        return None
    return ProgressLine(obj.transport(), what, steps)


@contextlib.contextmanager
def progress_of(obj, what: str, as_json: bool = False, step: str = "reading the fabric") -> Iterator[None]:
    """A `ProgressLine` on a terminal for a command whose steps are not reported (verify,
    report): the SMPs sent while the block runs; erased at its end."""
    line = progress_line(obj, what, as_json)
    if line is not None:
        line(step)
    try:
        yield
    finally:
        if line is not None:
            line.finish()


def emit_json(obj, rows: tuple = ()) -> None:
    """``obj`` indented; the lists under the keys ``rows`` (at any depth) one entry per line
    (a verify of 11,664 hosts has 46,656 link records: indented, each field would take a line)."""
    if not rows:
        click.echo(json.dumps(obj, indent=2, sort_keys=False))
        return
    kept: list = []

    def strip(x):
        if isinstance(x, dict):
            return {k: (_row_mark(kept, v) if k in rows and isinstance(v, list) else strip(v)) for k, v in x.items()}
        return [strip(v) for v in x] if isinstance(x, list) else x
    text = json.dumps(strip(obj), indent=2, sort_keys=False)
    for n, v in enumerate(kept):
        body = ",\n".join("  " + json.dumps(r, separators=(",", ":")) for r in v)
        text = text.replace(f'"\\u0000rows{n}\\u0000"', f"[\n{body}\n]" if v else "[]", 1)
    click.echo(text)


def _row_mark(kept: list, value: list) -> str:
    kept.append(value)
    return f"\0rows{len(kept) - 1}\0"


def check_output(path, what: str = "-o") -> None:
    """An output file argument, checked before the first SMP (None: stdout)."""
    if path:
        paths.check_output(path, what)


def write_output(path, text: str) -> None:
    paths.write_text(path, text, "output")


# -- arguments ------------------------------------------------------------------------------
def int_arg(ctx, param, value):
    """A click callback: decimal or 0x hex, one value or a tuple of them."""
    if value is None or isinstance(value, int):
        return value
    try:
        return [int(v, 0) for v in value] if isinstance(value, tuple) else int(value, 0)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a number (decimal or 0x hex)") from None


def guid_arg(ctx, param, value):
    """A click callback for a 64-bit GUID, hex with or without 0x (as ibstat prints it)."""
    if value is None:
        return None
    try:
        guid = int(value, 16)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a GUID (64-bit hex, e.g. 0x0002c90300a1b2c3)") from None
    if not 0 < guid < 1 << 64:
        raise click.BadParameter(f"{value!r} is not a 64-bit GUID")
    return guid


def key_arg(ctx, param, value):
    """A click callback for a secret (an M_Key, an SM_Key): 64 bits, decimal or 0x hex.
    The error names the option and the problem only (`mkeys.parse_key`)."""
    if value is None or isinstance(value, int):
        return value
    from smagent.config import mkeys
    try:
        return mkeys.parse_key(value, "the key")
    except BadInput as e:
        raise click.BadParameter(str(e).removeprefix("the key: ")) from None


def finish_write(as_json: bool, dry_run: bool, plan: list[str], changes: list[dict], sets: dict, problems: list[str],
                 warnings: list[str], extra: dict | None = None) -> None:
    """The end of a table-writing command: the plan, what was sent, problems (exit 3).
    ``extra``: more JSON fields (`Context.transient_write`)."""
    for w in warnings:
        click.echo(w, err=True)
    if as_json:
        emit_json({"dry_run": dry_run, "plan": plan, "changes": changes,
                   "sets": {k: (0 if dry_run else v) for k, v in sets.items()},
                   "planned": sets, "problems": problems, "warnings": warnings, **(extra or {})})
    else:
        click.echo("\n".join(plan) if plan else "# nothing to change")
        if not dry_run and plan:
            click.echo("# Sets sent: " + ", ".join(f"{k} {v}" for k, v in sets.items()))
    for p in problems:
        click.echo(f"error: {p}", err=True)
    if problems:
        sys.exit(EXIT_FABRIC)


def mkey_protect_options(f):
    """`--mkey-protect LEVEL`, `--mkey-lease SECONDS`, `--mkey-secret-file FILE` (sweep, run):
    the M_Key protection a sweep sets (`mkey_protection`)."""
    f = click.option("--mkey-secret-file", type=click.Path(dir_okay=False), default=None,
                     help="With --mkey-protect: one M_Key per node, HMAC-SHA256(secret, node GUID) truncated "
                          "to 64 bits, from the secret in this file (at least 16 bytes). Without it: --mkey is "
                          "the one key of the subnet.")(f)
    f = click.option("--mkey-lease", type=click.IntRange(0, 0xFFFF), default=None,
                     help="With --mkey-protect: M_KeyLeasePeriod in seconds (default 60; 0: protection never "
                          "lapses, so a lost key locks the subnet for good).")(f)
    return click.option("--mkey-protect", "mkey_level", type=click.IntRange(0, 3), default=None,
                        help="Set M_Key protection on every end port, as OpenSM's m_key_protection_level: "
                             "M_Key, M_KeyProtectBits LEVEL and the lease in one PortInfo Set; the keys are kept "
                             "in STATE_DIR/guid2mkey (mode 0600). 2: Gets without the key are refused too.")(f)


def mkey_protection(obj, level, lease, secret_file):
    """The `smagent.config.mkeys.Protection` the options ask for (None without --mkey-protect);
    BadInput, before any SMP, for what does not fit."""
    from smagent.config import mkeys
    if level is None:
        if lease is not None or secret_file is not None:
            raise BadInput("--mkey-lease and --mkey-secret-file go with --mkey-protect LEVEL")
        return None
    secret = mkeys.load_secret(secret_file) if secret_file is not None else None
    return mkeys.Protection(level=level, lease=mkeys.LEASE_DEFAULT if lease is None else lease,
                            key=0 if secret is not None else (obj.opts.get("mkey") or 0), secret=secret)
