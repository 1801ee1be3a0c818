"""The `smagent` command line: a thin layer of click commands.

Exit codes (stable): 0 ok, 1 a check found defects, 2 bad input, 3 fabric or
transport failure.
"""
from __future__ import annotations

import json
import sys

import click

from mad import smp as smpcodec
from mad.errors import MadError
from smagent import render

EXIT_OK, EXIT_DEFECTS, EXIT_BAD_INPUT, EXIT_FABRIC = 0, 1, 2, 3


class BadInput(click.ClickException):
    exit_code = EXIT_BAD_INPUT


class FabricFailure(click.ClickException):
    exit_code = EXIT_FABRIC


def _emit_json(obj) -> None:
    click.echo(json.dumps(obj, indent=2, sort_keys=False))


class Context:
    """Global options; the transport opens on first use, so `decode` needs no fabric."""

    def __init__(self, **opts):
        self.opts = opts
        self._session = None

    def session(self):
        """The API session (smagent.api): the CLI is a thin layer over it."""
        if self._session is None:
            from smagent import api
            o = self.opts
            try:
                self._session = api.connect(
                    o["transport"], ca=o["ca"], port=o["port"], topology=o["topology"],
                    fixture=o["fixture"], record=o["record"], window=o["window"],
                    timeout_ms=o["timeout"], retries=o["retries"], m_key=o["mkey"],
                    m_key_file=o["mkey_file"])
            except api.BadInput as e:
                raise BadInput(str(e)) from None
            except api.FabricFailure as e:
                raise FabricFailure(str(e)) from None
        return self._session

    def transport(self):
        return self.session().transport

    def close(self):
        if self._session is not None:
            self._session.close()


def _int(ctx, param, value):
    if value is None or isinstance(value, int):
        return value
    try:
        return int(value, 0)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a number") from None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="smagent")
@click.option("--transport", type=click.Choice(["sim", "umad", "replay"]), default="sim", show_default=True,
              envvar="SMAGENT_TRANSPORT", help="How to reach the fabric.")
@click.option("--ca", default=None, help="umad: CA name (default: libibumad's choice).")
@click.option("--port", "port", type=int, default=None, help="umad: CA port number.")
@click.option("--topology", type=click.Path(dir_okay=False), default=None,
              help="sim: topology file (ibsim net file or ibnetdiscover output); default: bundled.")
@click.option("--fixture", type=click.Path(dir_okay=False), default=None, help="replay: recorded capture.")
@click.option("--record", type=click.Path(dir_okay=False), default=None,
              help="Write every SMP sent and received to this capture (ERF, opens in Wireshark).")
@click.option("--window", type=click.IntRange(1, 256), default=8, show_default=True, help="SMPs in flight.")
@click.option("--timeout", type=click.IntRange(1, 60000), default=200, show_default=True, help="Per-SMP timeout, ms.")
@click.option("--retries", type=click.IntRange(0, 100), default=3, show_default=True, help="Retries per SMP.")
@click.option("--mkey", default="0", callback=_int,
              help="M_Key for every SMP (with --mkey-file: for the nodes the file does not name).")
@click.option("--mkey-file", "mkey_file", type=click.Path(dir_okay=False), default=None,
              help="M_Keys per node: lines 'GUID MKEY' (node or port GUID, hex) and 'default MKEY'; "
                   "see smagent.mkeys.")
@click.pass_context
def main(ctx, **opts):
    """smagent: discover, route and program an InfiniBand subnet over SMPs."""
    ctx.obj = Context(**opts)
    ctx.call_on_close(ctx.obj.close)


# -- decode ------------------------------------------------------------------------
def _hex_lines(source: str):
    text = sys.stdin.read() if source == "-" else source
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip().replace(" ", "").replace(":", "")
        if not line or line.startswith("#"):
            continue
        if line.startswith(("0x", "0X")):
            line = line[2:]
        try:
            yield n, bytes.fromhex(line)
        except ValueError:
            raise BadInput(f"line {n}: not hexadecimal") from None


@main.command()
@click.argument("hexmad", required=False, metavar="[HEX | -]")
@click.option("--pcap", "pcap_file", type=click.Path(dir_okay=False), help="Decode every MAD of a capture (ERF type 21 or pcap).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON with the IBA snake_case names.")
@click.option("--show-keys", is_flag=True, help="Show M_Keys and SM_Keys (hidden by default).")
def decode(hexmad, pcap_file, as_json, show_keys):
    """Decode SMPs given as hex (one per line with '-' for stdin) or from a capture."""
    if bool(hexmad) == bool(pcap_file):
        raise BadInput("give exactly one of HEX, '-' (stdin) or --pcap FILE")
    items = []
    if pcap_file:
        from smagent.pcap import CaptureError, read_capture
        try:
            for i, rec in enumerate(read_capture(pcap_file), 1):
                items.append((f"record {i}", rec.mad))
        except (CaptureError, OSError) as e:
            raise BadInput(str(e)) from None
        except MadError as e:
            raise BadInput(f"{pcap_file}: {e}") from None
    else:
        items = [(f"line {n}", b) for n, b in _hex_lines(hexmad)]
    out = []
    for where, raw in items:
        try:
            s = smpcodec.decode(raw)
        except MadError as e:
            raise BadInput(f"{where}: {e}") from None
        out.append(render.smp_dict(s, show_keys) if as_json else render.smp_text(s, show_keys))
    if as_json:
        _emit_json(out[0] if len(out) == 1 and not pcap_file else out)
    else:
        click.echo("\n\n".join(out))


# -- query ---------------------------------------------------------------------------
from smagent import targets  # noqa: E402


@main.command()
@click.argument("attribute", type=click.Choice(sorted(targets.QUERY_ATTRIBUTES)))
@click.argument("target")
@click.option("--port", "portnum", type=click.IntRange(0, 255), default=None, help="Port (portinfo, pkeys).")
@click.option("--block", type=click.IntRange(0, 3071), default=None, help="Table block (lft, rft, mft, pkeys).")
@click.option("--position", type=click.IntRange(0, 15), default=None, help="MFT PortMask position.")
@click.option("--ext-speeds", is_flag=True, help="portinfo: set AttributeModifier bit 31 (extended speeds form).")
@click.option("--show-keys", is_flag=True, help="Show M_Key / SM_Key (hidden by default, as smpquery does).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def query(obj, attribute, target, portnum, block, position, ext_speeds, show_keys, as_json):
    """Read one attribute from TARGET: a LID (5, 0x5), a DR path (0,1,3), a node or port
    GUID (0x0002c90300001234) or a node description (Switch2); GUIDs and descriptions are
    found by discovering the fabric first.

    In the spirit of smpquery/smpdump: ATTRIBUTE is one of nodeinfo, nodedesc, portinfo,
    switchinfo, sminfo, lft, rft, mft, pkeys, sl2vl.
    """
    def build(tgt):
        return targets.build_query(attribute, tgt, port=portnum, block=block, position=position,
                                   ext_speeds=ext_speeds)
    try:
        try:
            tgt = targets.parse_target(target)
        except targets.NeedsDiscovery:  # a GUID or a description: check the rest, then discover
            build(targets.Target(path=(0,)))
            tgt = None
        if tgt is not None:
            req = build(tgt)
    except (MadError, ValueError) as e:
        raise BadInput(str(e)) from None
    if tgt is None:
        tgt = _fabric_call(targets.resolve_target, target, obj.transport())
        req = _fabric_call(build, tgt)
    resp = _run_one(obj, req)
    value = resp.attribute()
    if as_json:
        _emit_json({"target": tgt.describe(), "attribute": resp.attribute_name,
                    "modifier": resp.attribute_modifier, "value": render.jsonable(value, show_keys)})
    else:
        click.echo(f"# {resp.attribute_name}: {tgt.describe()} modifier {resp.attribute_modifier:#x}")
        click.echo(render.attribute_text(value, show_keys=show_keys))


def _run_one(obj, req):
    return _fabric_call(obj.transport().query, req)


# -- topology ------------------------------------------------------------------------
@main.group()
def topology():
    """Topology files (ibsim net-file format, which the simulator and ibsim both load)."""


@topology.command("generate")
@click.argument("shape", type=click.Choice(["fat-tree-2", "fat-tree-3", "torus-2d", "mesh-2d", "two-switch"]))
@click.option("-k", "--radix", type=click.IntRange(4, 254), default=36, show_default=True,
              help="Switch ports (fat trees).")
@click.option("--hosts", type=click.IntRange(1, None), default=None, help="fat-tree-3: keep this many hosts.")
@click.option("-x", type=click.IntRange(2, 64), default=4, show_default=True, help="torus/mesh: width.")
@click.option("-y", type=click.IntRange(2, 64), default=4, show_default=True, help="torus/mesh: height.")
@click.option("--hosts-per-switch", type=click.IntRange(0, 200), default=1, show_default=True)
@click.option("--switch-ports", type=click.IntRange(4, 254), default=8, show_default=True, help="torus/mesh.")
@click.option("--style", type=click.Choice(["ibsim", "ibnetdiscover"]), default="ibsim", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default=None)
@click.option("--json", "as_json", is_flag=True, help="One JSON document: counts, ibsim's size flags, the file.")
def topology_generate(shape, radix, hosts, x, y, hosts_per_switch, switch_ports, style, output, as_json):
    """Write a common fabric shape as a net file (print ibsim's -N/-S/-P needs on stderr)."""
    from smagent import netfile, topogen
    from smagent.fabric import FabricError
    try:
        if shape == "fat-tree-2":
            fab = topogen.fat_tree_2(radix)
        elif shape == "fat-tree-3":
            fab = topogen.fat_tree_3(radix, hosts=hosts)
        elif shape == "torus-2d":
            fab = topogen.torus_2d(x, y, hosts_per_switch=hosts_per_switch, switch_ports=switch_ports)
        elif shape == "mesh-2d":
            fab = topogen.mesh_2d(x, y, hosts_per_switch=hosts_per_switch, switch_ports=switch_ports)
        else:
            fab = topogen.two_switch()
    except (FabricError, ValueError) as e:
        raise BadInput(str(e)) from None
    text = netfile.dumps(fab, style=style)
    size = netfile.ibsim_size_args(fab)
    if output:
        with open(output, "w", encoding="utf-8") as f:
            f.write(text)
    if as_json:
        _emit_json({"shape": shape, "switches": len(fab.switches()), "hosts": len(fab.cas()),
                    "links": fab.num_links, "ibsim_args": size, "file": output, "net": None if output else text})
        return
    if not output:
        click.echo(text, nl=False)
    click.echo(f"# {len(fab.switches())} switches, {len(fab.cas())} hosts, {fab.num_links} links"
               + (f"; ibsim needs: {' '.join(size)}" if size else ""), err=True)


# -- discover / sweep ---------------------------------------------------------------
def _fabric_call(fn, *a, **kw):
    """Run agent logic, mapping its failures to the documented exit codes."""
    from smagent import api
    try:
        return api._translate(fn, *a, **kw)
    except api.BadInput as e:
        raise BadInput(str(e)) from None
    except api.FabricFailure as e:
        raise FabricFailure(str(e)) from None


DEGRADED_SHOWN = 5  # degraded links named on stderr; --json has every one


@main.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON document: nodes, ports, links.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write to FILE instead of stdout.")
@click.pass_obj
def discover(obj, as_json, output):
    """Discover the fabric by directed route; print it as ibnetdiscover does."""
    from smagent import discovery, netfile
    topo = _fabric_call(obj.session().discover)
    degraded = discovery.degraded_links(topo)
    if as_json:
        text = json.dumps(render.topology_dict(topo, degraded), indent=2) + "\n"
    else:
        text = netfile.dumps(discovery.to_fabric(topo), style="ibnetdiscover")
    if output:
        with open(output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        click.echo(text, nl=False)
    for a, pa, b, pb, why in degraded[:DEGRADED_SHOWN]:
        click.echo(f"warning: degraded link {a.description}[{pa}] <-> {b.description}[{pb}]: {', '.join(why)}",
                   err=True)
    if len(degraded) > DEGRADED_SHOWN:
        click.echo(f"warning: {len(degraded) - DEGRADED_SHOWN} more degraded links (--json lists them all)", err=True)
    for g, p in topo.loopbacks:
        click.echo(f"warning: {topo.nodes[g].description} port {p} is cabled back to itself; not used", err=True)
    for u in topo.unreachable:
        click.echo(f"warning: unreachable: {u}", err=True)
    if topo.unreachable:
        sys.exit(EXIT_FABRIC)


@main.command()
@click.option("--dry-run", is_flag=True, help="Run every Get and print the plan of Sets; send no Set.")
@click.option("--lmc", type=int, default=0, show_default=True, help="LMC for channel adapter ports (0-7).")
@click.option("--lid-file", type=click.Path(dir_okay=False), default=None,
              help="guid2lid file (OpenSM's format) to keep LIDs across runs.")
@click.option("--routing", "engine", default="minhop", show_default=True,
              help="Routing engine: minhop | updn | updn:GUID[,GUID...] (roots) | file:PATH (an lft dump).")
@click.option("--force", is_flag=True, help="Proceed even if another SM is MASTER.")
@click.option("--mcast-groups", type=click.Path(dir_okay=False), default=None,
              help="Multicast group file: lines 'MLID MEMBER...' (port GUIDs or 'all'); see smagent.multicast. "
                   "Default: group 0xC000 with every CA port (IPoIB broadcast).")
@click.option("--no-multicast", is_flag=True, help="Leave every MulticastForwardingTable as it is.")
@click.option("--prune-multicast", is_flag=True,
              help="Remove MFT entries of MLIDs outside the groups (default: keep them and report them).")
@click.option("--state-dir", type=click.Path(file_okay=False), default=None,
              help="Where LFT blocks are saved before they are overwritten, and the apply journal is kept "
                   "(default for umad: $SMAGENT_STATE_DIR, else $XDG_STATE_HOME/smagent or ~/.local/state/smagent).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary (and plan) as one JSON object.")
@click.pass_obj
def sweep(obj, dry_run, lmc, lid_file, engine, force, mcast_groups, no_multicast, prune_multicast, state_dir,
          as_json):
    """Bring the fabric up: discover, assign LIDs, route, program LFTs/RFTs and MFTs, activate, verify."""
    from smagent import multicast
    from smagent import sweep as sweepmod
    if not 0 <= lmc <= 7:
        raise BadInput(f"--lmc {lmc}: the LMC is 0..7")
    if mcast_groups and no_multicast:
        raise BadInput("--mcast-groups and --no-multicast exclude each other")
    if prune_multicast and no_multicast:
        raise BadInput("--prune-multicast and --no-multicast exclude each other")
    spec = _fabric_call(multicast.load_groups, mcast_groups) if mcast_groups else None  # before any SMP
    if state_dir is None and obj.opts["transport"] == "umad":
        state_dir = default_state_dir()
    transport = obj.transport()
    progress = _Progress(transport, "sweep") if sys.stderr.isatty() and not as_json else None
    opts = sweepmod.SweepOptions(lmc=lmc, lid_file=lid_file, routing=engine, dry_run=dry_run, force=force,
                                 mcast_groups=spec, multicast=not no_multicast, state_dir=state_dir,
                                 progress=progress, prune_multicast=prune_multicast)
    try:
        r = _fabric_call(sweepmod.sweep, transport, opts)
    except KeyboardInterrupt:
        _interrupted(state_dir)
    finally:
        if progress is not None:
            progress.finish()
    summary = r.summary()
    if dry_run:
        summary["plan"] = r.plan_lines()
    if as_json:
        _emit_json(summary)
    else:
        if dry_run:
            click.echo("\n".join(summary["plan"]) or "# nothing to change")
        _print_summary(summary)
        click.echo("# multicast groups: "
                   + (", ".join(f"{g['mlid']} ({render.count(g['members'], 'member')}, "
                                  f"{render.count(g['switches'], 'switch')}, root {g['root']})"
                                for g in summary["multicast"]) or "none"))
        if summary.get("backup"):
            click.echo(f"# LFT blocks overwritten were saved to {summary['backup']} (smagent lft restore FILE)")
    if r.problems or r.topology.unreachable:
        sys.exit(EXIT_FABRIC)


# -- desired state: plan / apply ----------------------------------------------------
def _load_desired(file):
    from smagent import desired
    try:
        return desired.load(file)
    except desired.DesiredStateError as e:
        raise BadInput(str(e)) from None


def _desired_opts(ds, **kw):
    from smagent import sweep as sweepmod
    return sweepmod.SweepOptions(lmc=ds.lmc, lid_file=ds.lid_file, routing=ds.routing, desired=ds, **kw)


@main.command("plan")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--force", is_flag=True, help="Plan even if another SM is MASTER.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def plan_cmd(obj, file, force, as_json):
    """Print how the fabric differs from a desired-state FILE (YAML or JSON); send no Set.

    The file names the routing engine, LMC, LID file, static LFT entries, multicast
    groups and SwitchInfo settings (see smagent.desired). Every problem in it (unknown
    switch, LID out of range, a port a switch lacks, an MLID outside 0xC000-0xFFFE) is
    listed, and the exit status is 2.
    """
    from smagent import sweep as sweepmod
    ds = _load_desired(file)
    r = _fabric_call(sweepmod.sweep, obj.transport(), _desired_opts(ds, dry_run=True, force=force))
    summary = r.summary()
    summary["plan"] = r.plan_lines()
    if as_json:
        _emit_json(summary)
    else:
        click.echo("\n".join(summary["plan"]) or "# the fabric holds the desired state: nothing to change")
        _print_summary(summary)
    if r.problems or r.topology.unreachable:
        sys.exit(EXIT_FABRIC)


@main.command("apply")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--force", is_flag=True, help="Apply even if another SM is MASTER.")
@click.option("--state-dir", type=click.Path(file_okay=False), default=None,
              help="Where overwritten LFT blocks are saved and the apply journal is kept (see sweep).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def apply_cmd(obj, file, force, state_dir, as_json):
    """Make the fabric hold a desired-state FILE, then prove it: the Set responses are
    read back, and a fresh plan afterwards must be empty (exit 1 if it is not)."""
    from smagent import sweep as sweepmod
    ds = _load_desired(file)
    if state_dir is None and obj.opts["transport"] == "umad":
        state_dir = default_state_dir()
    transport = obj.transport()
    try:
        r = _fabric_call(sweepmod.sweep, transport, _desired_opts(ds, force=force, state_dir=state_dir))
    except KeyboardInterrupt:
        _interrupted(state_dir)
    left = _fabric_call(sweepmod.sweep, transport, _desired_opts(ds, dry_run=True, force=force))
    summary = r.summary()
    summary["left_after_apply"] = left.plan_lines()
    if as_json:
        _emit_json(summary)
    else:
        _print_summary(summary)
        for line in summary["left_after_apply"]:
            click.echo(f"error: still differs after apply: {line}", err=True)
    if r.problems or r.topology.unreachable:
        sys.exit(EXIT_FABRIC)
    if summary["left_after_apply"]:
        sys.exit(EXIT_DEFECTS)


def _interrupted(state_dir) -> None:
    """Ctrl-C during a sweep or apply: say what is known and how to finish."""
    msg = "interrupted"
    if state_dir:
        import os
        from smagent.fdb.journal import Journal, JournalError
        journal = os.path.join(state_dir, "apply.journal")
        try:
            p = Journal.pending(journal)
        except JournalError:
            p = None
        if p is not None:
            msg += (f": {len(p.confirmed)} of {len(p.plan)} table blocks were confirmed written ({journal}); "
                    f"run the sweep again to finish, or `smagent lft restore` the saved blocks in "
                    f"{os.path.join(state_dir, 'backups')}")
    if msg == "interrupted":
        msg += ": some Sets may have been applied; run the sweep again to finish (it re-plans from the switches)"
    click.echo(f"error: {msg}", err=True)
    sys.exit(130)


def default_state_dir() -> str:
    import os
    if os.environ.get("SMAGENT_STATE_DIR"):
        return os.environ["SMAGENT_STATE_DIR"]
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "smagent")


class _Progress:
    """A status line on a terminal: the phase and the SMPs sent so far (stderr only)."""

    def __init__(self, transport, what: str):
        self.t, self.what, self.phase, self.shown = transport, what, "", 0
        transport.on_send = self._sent

    def __call__(self, phase: str) -> None:
        self.phase = phase
        self._show()

    def _sent(self, _smp) -> None:
        if self.t.stats.sent - self.shown >= 256:
            self._show()

    def _show(self) -> None:
        self.shown = self.t.stats.sent
        click.echo(f"\r{self.what}: {self.phase:<12} {self.shown:>9,} SMPs", nl=False, err=True)

    def finish(self) -> None:
        self.t.on_send = None
        click.echo("\r" + " " * 40 + "\r", nl=False, err=True)


def _print_summary(s: dict) -> None:
    c = render.count
    click.echo(f"# {'plan' if s['dry_run'] else 'sweep'}: {c(s['nodes'], 'node')} ({c(s['switches'], 'switch')}, "
               f"{c(s['cas'], 'CA')}), {c(s['links'], 'link')}, {c(s['lids'], 'LID')} (LMC {s['lmc']}, "
               f"top {s['linear_fdb_top']})")
    sets = s["sets"]
    click.echo(f"# Sets {'planned' if s['dry_run'] else 'sent'}: PortInfo {sets['portinfo']}, "
               f"SwitchInfo {sets['switchinfo']}, LFT blocks {sets['lft_blocks']}, "
               f"RFT blocks {sets.get('rft_blocks', 0)}, MFT blocks {sets.get('mft_blocks', 0)}")
    phases = ", ".join(f"{k} {v['smps']}" for k, v in s["phases"].items())
    click.echo(f"# SMPs: {s['smps_sent']} ({phases}); retries {s['retries']}, timeouts {s['timeouts']}; "
               f"{s['seconds']:.3f} s")
    for n in s["notes"]:
        click.echo(f"# note: {n}")
    for u in s["unreachable"]:
        click.echo(f"warning: unreachable: {u}", err=True)
    for p in s["problems"]:
        click.echo(f"error: {p}", err=True)


from smagent.commands.tables_cmd import lft, mft  # noqa: E402
main.add_command(lft); main.add_command(mft)

from smagent.commands.backup_cmd import backup_commands  # noqa: E402
for _c in backup_commands:
    main.add_command(_c)


from smagent.commands.verify_cmd import verify  # noqa: E402
main.add_command(verify)
from smagent.commands.rft_cmd import rft_group  # noqa: E402
main.add_command(rft_group)
from smagent.commands.report_cmd import report  # noqa: E402
main.add_command(report)


if __name__ == "__main__":  # pragma: no cover
    main()
