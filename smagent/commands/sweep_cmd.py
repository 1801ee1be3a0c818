"""`smagent sweep`, `plan FILE` and `apply FILE`: bring the fabric up, or make it hold a
desired state, through `api.Session.sweep`."""
from __future__ import annotations

import sys

import click

from smagent.commands import render
from smagent.config.files import StateDir, default_state_dir
from smagent.commands.common import EXIT_DETAILED_ERROR, emit_json, mkey_protect_options, mkey_protection, progress_line
from smagent.commands.plan_output import check_plan_options, emit_with_plan, plan_options, text_plan, write_plan_file
from smagent.errors import EXIT_DEFECTS, EXIT_FABRIC, BadInput, Interrupted

EXIT_CHANGES_PENDING = 2  # plan --detailed-exitcode, as Terraform's


def _steps(dry_run: bool) -> tuple[str, ...]:
    from smagent.sweep import PLAN_PHASES, WRITE_PHASES
    return PLAN_PHASES if dry_run else PLAN_PHASES + WRITE_PHASES


def interrupted(state_dir, sets_sent: list[str]) -> Interrupted:
    """Ctrl-C during a sweep or apply: what is known, and how to finish."""
    from smagent.fdb.journal import Journal, JournalError
    msg = "interrupted"
    if state_dir:
        journal = StateDir(state_dir).journal
        try:
            p = Journal.pending(journal)
        except JournalError:
            p = None
        if p is not None:
            msg += (f": {len(p.confirmed)} of {len(p.plan)} table blocks were confirmed written ({journal}); "
                    f"run the sweep again to finish, or `smagent lft restore` the saved blocks in "
                    f"{StateDir(state_dir).backups}")
    if msg == "interrupted":
        msg += (": some Sets may have been applied; run the sweep again to finish (it re-plans from the switches)"
                if sets_sent else ": nothing was sent")
    return Interrupted(msg)


ROUTED_AS_ASKED = "as asked"  # the reason of an engine named by --routing (not auto's choice)


def print_summary(s: dict) -> None:
    c = render.count
    click.echo(f"# {'plan' if s['dry_run'] else 'sweep'}: {c(s['nodes'], 'node')} ({c(s['switches'], 'switch')}, "
               f"{c(s['cas'], 'CA')}), {c(s['links'], 'link')}, {c(s['lids'], 'LID')} (LMC {s['lmc']}, "
               f"top {s['linear_fdb_top']})")
    sets = s["sets"]
    click.echo(f"# Sets {'planned' if s['dry_run'] else 'sent'}: PortInfo {sets['portinfo']}, "
               f"SwitchInfo {sets['switchinfo']}, LFT blocks {sets['lft_blocks']}, "
               f"RFT blocks {sets.get('rft_blocks', 0)}, MFT blocks {sets.get('mft_blocks', 0)}")
    phases = ", ".join(f"{k} {v['smps']}" for k, v in s["phases"].items())
    # on a lossy fabric: how lossy, and how many passes it took (a clean run prints as before)
    est = s.get("loss_estimate") or 0
    loss = f" (SMPs lost; about {est:.{0 if est >= 0.1 else 1}%} of tries)" if est else ""
    passes = (f"; passes {s['passes']}, discovery passes {s['discovery_passes']}"
              if s.get("passes", 1) > 1 or s.get("discovery_passes", 1) > 1 else "")
    click.echo(f"# SMPs: {s['smps_sent']} ({phases}); retries {s['retries']}, timeouts {s['timeouts']}{loss}"
               f"{passes}; {s['seconds']:.3f} s")
    if s.get("hottest_link"):
        from smagent.verify.balance import worst_line
        click.echo(f"# {worst_line({'worst': s['hottest_link']})} (planned tables)")
    if s.get("routing") and s["routing"]["reason"] != ROUTED_AS_ASKED:  # auto's choice, and why
        click.echo(f"# routing: {s['routing']['engine']} ({s['routing']['reason']})")
    for n in s["notes"]:
        click.echo(f"# note: {n}")
    for u in s["unreachable"]:
        click.echo(f"warning: unreachable: {u}", err=True)
    for p in s["problems"]:
        click.echo(f"error: {p}", err=True)


def _interruptible(obj, state_dir, call, progress=None):
    """``call()`` (a session's sweep or apply), with Ctrl-C turned into what the state
    directory knows."""
    try:
        return call()
    except KeyboardInterrupt:
        raise interrupted(state_dir, obj.sets_sent()) from None
    finally:
        if progress is not None:
            progress.finish()


def _run_sweep(obj, state_dir, progress=None, **kw):
    """`Session.sweep`, interruptible."""
    return _interruptible(obj, state_dir, lambda: obj.session().sweep(state_dir=state_dir, progress=progress, **kw),
                          progress)


def warn_kept_groups(summary: dict) -> None:
    """A desired state that does not mention a group keeps it: say which (issue 16 item 3)."""
    if summary.get("multicast_kept"):
        click.echo(f"warning: multicast groups not in the desired state are kept: "
                   f"{', '.join(summary['multicast_kept'])} (multicast_prune: true removes them)", err=True)


def print_plan_defects(r) -> None:
    """What the check of the planned tables found that the current tables lack
    (`smagent.sweep.SweepResult.plan_defects`), as warnings."""
    for line in r.plan_defect_lines():
        click.echo(f"warning: planned tables: {line}", err=True)


def _link_options(subnet_prefix: str, max_mtu: int, max_vls: int, qos: str | None):
    """LinkOptions from the flags; ``qos``: "always" (--qos), "never" (--no-qos) or None
    (the default: repair unusable SL2VL/VLArb tables only, see smagent.linkconf)."""
    from smagent import linkconf as links
    try:
        prefix = int(subnet_prefix, 0)
    except ValueError:
        raise BadInput(f"--subnet-prefix {subnet_prefix!r}: not a number (e.g. 0xfe80000000000000)") from None
    return links.LinkOptions(subnet_prefix=prefix, max_mtu=max_mtu, max_vls=max_vls,
                             qos=True if qos == "always" else False if qos == "never" else links.QOS_AUTO).check()


def _exit(r) -> None:
    """Exit 3 when the fabric failed (problems, parts not reached), 1 when the planned
    tables have defects the current ones lack (a dry run: the real run would be refused)."""
    if r.problems or r.topology.unreachable:
        sys.exit(EXIT_FABRIC)
    if r.plan_defects:
        sys.exit(EXIT_DEFECTS)


PARTITIONS = click.option(
    "--partitions", "partitions_file", type=click.Path(dir_okay=False), default=None,
    help="OpenSM's partitions.conf (as opensm -P): P_Key tables of every end port and enforcement on switch "
         "ports facing them; read and checked before any SMP (see smagent.config.partitions). Default: the default "
         "partition 0xFFFF at index 0 of every end port.")


QOS_POLICY = click.option(
    "--qos-policy", "qos_policy_file", type=click.Path(dir_okay=False), default=None,
    help="A QoS policy: OpenSM's qos-policy.conf (as opensm -Q -Y FILE: port-groups, qos-levels, "
         "qos-match-rules, qos-ulps) and opensm.conf's qos_[ca_|swe_|sw0_]* SL2VL/VLArb lines; read and checked "
         "before any SMP (see smagent.config.qospolicy).")


def _qos_policy(path) -> dict:
    """{"qos_policy": the parsed QoS policy file} (QosPolicyError with line numbers), or {}."""
    if path is None:
        return {}
    from smagent.config import qospolicy
    return {"qos_policy": qospolicy.load(path)}


def _partitions(path):
    """The parsed partitions file (BadInput with line numbers), or None."""
    if path is None:
        return None
    from smagent.config import partitions
    return partitions.load(path)


ALLOW_DEFECTS = click.option(
    "--allow-defects", is_flag=True,
    help="Write even if the planned tables would break reachability the current tables have, make a "
         "forwarding loop, send a LID into a port with no ACTIVE link, or route a switch's own LID "
         "elsewhere than port 0 (checked before the first Set, as `verify` checks live tables).")
STATE_DIR_HELP = "Where overwritten LFT blocks are saved, the apply journal and the LIDs are kept (see sweep)."


class SweepDefaultOption(click.Option):
    """An option whose default is a `smagent.sweep.SweepOptions` field: the help shows its
    value, read when help is shown (the sweep module loads only then)."""

    def get_help_record(self, ctx):
        import dataclasses

        from smagent import sweep as sweepmod
        field = next(f for f in dataclasses.fields(sweepmod.SweepOptions) if f.name == self.name)
        record = super().get_help_record(ctx)
        return None if record is None else (record[0], record[1].replace("{default}", str(field.default)))


def _state_dir(obj, state_dir):
    return default_state_dir() if state_dir is None and obj.opts["transport"] == "umad" else state_dir


@click.command()
@click.option("--dry-run", is_flag=True, help="Run every Get and print the plan of Sets; send no Set.")
@click.option("--lmc", type=int, default=0, show_default=True, help="LMC for channel adapter ports (0-7).")
@click.option("--lid-file", type=click.Path(dir_okay=False), default=None,
              help="guid2lid file (OpenSM's format) that keeps LIDs across runs and port resets "
                   "(default: STATE_DIR/guid2lid when there is a state directory).")
@click.option("--routing", "engine", default="auto", show_default=True,
              help="Routing engine: auto (the best deadlock-free engine for the fabric: ftree on a fat tree, "
                   "else dfsssp within the ports' VLs, else updn; named with its reason) | minhop | updn | updn:GUID[,GUID...] (roots) | ftree | ftree:fallback=ENGINE | "
                   "dfsssp (deadlock-free: paths layered over VLs, any topology) | "
                   "file:PATH (an lft dump).")
@click.option("--force", is_flag=True, help="Proceed even if another SM is MASTER.")
@ALLOW_DEFECTS
@click.option("--mcast-groups", type=click.Path(dir_okay=False), default=None,
              help="Multicast group file: lines 'MLID MEMBER...' (port GUIDs or 'all'); see smagent.planning.multicast. "
                   "Default: group 0xC000 with every CA port (IPoIB broadcast).")
@click.option("--no-multicast", is_flag=True, help="Leave every MulticastForwardingTable as it is.")
@click.option("--prune-multicast", is_flag=True,
              help="Remove MFT entries of MLIDs outside the groups (default: keep them and report them).")
@click.option("--subnet-prefix", default="0xfe80000000000000", show_default=True,
              help="GID prefix written into every end port's PortInfo.")
@click.option("--max-mtu", type=click.Choice(["256", "512", "1024", "2048", "4096"]), default="4096",
              show_default=True, help="Cap on every link's NeighborMTU (bytes).")
@click.option("--max-vls", type=click.Choice(["1", "2", "4", "8", "15"]), default="15", show_default=True,
              help="Cap on every link's OperationalVLs (data VLs; OpenSM's max_op_vls 5 = 15).")
@click.option("--qos", "qos", flag_value="always",
              help="Write OpenSM's QoS SL2VL and VLArb tables on every port (opensm -Q).")
@click.option("--no-qos", "qos", flag_value="never",
              help="Leave SL2VL and VLArb tables as they are (OpenSM without -Q).")
@click.option("--state-dir", type=click.Path(file_okay=False), default=None,
              help="Where LFT blocks are saved before they are overwritten, the apply journal and the LIDs "
                   "(guid2lid) are kept (default for umad: $SMAGENT_STATE_DIR, else $XDG_STATE_HOME/smagent or ~/.local/state/smagent).")
@click.option("--repair-passes", type=click.IntRange(0, 20), default=None, cls=SweepDefaultOption,
              help="Passes after the first over Sets that got no answer and ports not ACTIVE (default: "
                   "{default}); made only while SMPs are being lost (retries also rise "
                   "with the loss seen, see README).")
@PARTITIONS
@QOS_POLICY
@mkey_protect_options
@plan_options
@click.option("--json", "as_json", is_flag=True, help="Print the summary (and plan) as one JSON object.")
@click.pass_obj
def sweep(obj, dry_run, lmc, lid_file, engine, force, allow_defects, mcast_groups, no_multicast, prune_multicast,
          subnet_prefix, max_mtu, max_vls, qos, state_dir, repair_passes, partitions_file, qos_policy_file,
          mkey_level, mkey_lease,
          mkey_secret_file, detail, lid_range, plan_file, as_json):
    """Bring the fabric up: discover, assign LIDs, route, program LFTs/RFTs and MFTs (each Set's
    response read back), activate. `smagent verify` then traces every path."""
    from smagent.planning import multicast
    from mad.forwarding import lmc_problem
    problem = lmc_problem(lmc)
    if problem:
        raise BadInput(problem)
    if mcast_groups and no_multicast:
        raise BadInput("--mcast-groups and --no-multicast exclude each other")
    if prune_multicast and no_multicast:
        raise BadInput("--prune-multicast and --no-multicast exclude each other")
    spec = multicast.load_groups(mcast_groups) if mcast_groups else None  # before any SMP
    parts = _partitions(partitions_file)
    policy = _qos_policy(qos_policy_file)
    protection = mkey_protection(obj, mkey_level, mkey_lease, mkey_secret_file)
    lids = check_plan_options(plan_file, lid_range)
    state_dir = _state_dir(obj, state_dir)
    progress = progress_line(obj, "sweep", as_json, _steps(dry_run))
    r = _run_sweep(obj, state_dir, progress, lmc=lmc, lid_file=lid_file, routing=engine, dry_run=dry_run,
                   force=force, mcast_groups=spec, multicast=not no_multicast, prune_multicast=prune_multicast,
                   links=_link_options(subnet_prefix, int(max_mtu), int(max_vls), qos),
                   allow_defects=allow_defects, partitions=parts, mkey_protection=protection, **policy,
                   **({} if repair_passes is None else {"repair_passes": repair_passes}))
    summary = r.summary()
    summary.update(obj.transient_write(dry_run))
    if plan_file:
        write_plan_file(r, plan_file)
    if as_json:
        emit_with_plan(summary, "plan", r.plan_records(detail, lids)) if dry_run else emit_json(summary)
    else:
        if dry_run:
            click.echo("\n".join(text_plan(r, detail)) or "# nothing to change")
        print_summary(summary)
        click.echo("# multicast groups: "
                   + (", ".join(f"{g['mlid']} ({render.count(g['members'], 'member')}, "
                                  f"{render.count(g['switches'], 'switch')}, root {g['root']})"
                                for g in summary["multicast"]) or "none"))
        if summary.get("backup"):
            click.echo(f"# tables overwritten were saved to {summary['backup']} (smagent lft restore FILE)")
        print_plan_defects(r)
    _exit(r)


@click.command("plan")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--force", is_flag=True, help="Plan even if another SM is MASTER.")
@click.option("--state-dir", type=click.Path(file_okay=False), default=None, help=STATE_DIR_HELP)
@PARTITIONS
@QOS_POLICY
@plan_options
@click.option("--json", "as_json", is_flag=True, help="One JSON document: the plan's summary, its lines and changes.")
@click.option("--detailed-exitcode", is_flag=True,
              help="As Terraform: exit 0 when there is nothing to do, 2 when changes are pending (the JSON's "
                   "changes_pending), 1 on any error (bad input, a fabric failure, planned defects).")
@click.pass_obj
def plan_cmd(obj, file, force, state_dir, partitions_file, qos_policy_file, detail, lid_range, plan_file, as_json,
             detailed_exitcode):
    """Print how the fabric differs from a desired-state FILE (YAML or JSON); send no Set.

    The file names the routing engine, LMC, LID file, static LFT entries, multicast
    groups and SwitchInfo settings (every key: examples/desired.yaml). Every problem in it (unknown
    switch, LID out of range, a port a switch lacks, an MLID outside 0xC000-0xFFFE, a
    missing routing file) is listed, and the exit status is 2. Planned tables that would
    break the fabric are listed as warnings (exit 1: `apply` would refuse them).
    """
    parts = _partitions(partitions_file)
    more = {**({} if parts is None else {"partitions": parts}), **_qos_policy(qos_policy_file)}
    lids = check_plan_options(plan_file, lid_range)
    state_dir = _state_dir(obj, state_dir)
    progress = progress_line(obj, "plan", as_json, _steps(True))
    r = _interruptible(obj, state_dir, lambda: obj.session().plan(
        file, force=force, state_dir=state_dir, progress=progress, **more), progress)
    summary = r.summary()
    if plan_file:
        write_plan_file(r, plan_file)
    if as_json:
        emit_with_plan(summary, "plan", r.plan_records(detail, lids))
    else:
        click.echo("\n".join(text_plan(r, detail)) or "# the fabric holds the desired state: nothing to change")
        print_summary(summary)
        warn_kept_groups(summary)
        print_plan_defects(r)
    if detailed_exitcode and (r.problems or r.topology.unreachable or r.plan_defects):
        sys.exit(EXIT_DETAILED_ERROR)
    _exit(r)
    if detailed_exitcode and r.changes_pending:
        sys.exit(EXIT_CHANGES_PENDING)


@click.command("apply")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--force", is_flag=True, help="Apply even if another SM is MASTER.")
@ALLOW_DEFECTS
@click.option("--state-dir", type=click.Path(file_okay=False), default=None, help=STATE_DIR_HELP)
@PARTITIONS
@QOS_POLICY
@click.option("--json", "as_json", is_flag=True,
              help="One JSON document: what was applied, and what a fresh plan still finds.")
@click.pass_obj
def apply_cmd(obj, file, force, allow_defects, state_dir, partitions_file, qos_policy_file, as_json):
    """Make the fabric hold a desired-state FILE, then prove it: the Set responses are
    read back, and a fresh plan afterwards must be empty (exit 1 if it is not)."""
    state_dir = _state_dir(obj, state_dir)
    parts = _partitions(partitions_file)
    more = {**({} if parts is None else {"partitions": parts}), **_qos_policy(qos_policy_file)}
    progress = progress_line(obj, "apply", as_json, _steps(False))
    a = _interruptible(obj, state_dir, lambda: obj.session().apply(file, force=force, state_dir=state_dir,
                                                                   allow_defects=allow_defects, progress=progress,
                                                                   **more), progress)
    r = a.result
    summary = r.summary()
    summary["left_after_apply"] = a.left.plan_changes()
    summary.update(obj.transient_write(False))
    if as_json:
        emit_json(summary)
    else:
        print_summary(summary)
        warn_kept_groups(summary)
        print_plan_defects(r)
        for line in a.left.plan_lines():
            click.echo(f"error: still differs after apply: {line}", err=True)
    if r.problems or r.topology.unreachable:
        sys.exit(EXIT_FABRIC)
    if a.left.sets_planned or r.plan_defects:  # written with --allow-defects: the fabric has them now
        sys.exit(EXIT_DEFECTS)
