"""`smagent run`: the long-running Subnet Manager (see `smagent.sm.daemon`).

SIGHUP re-reads the desired state and reopens the log file (for logrotate).

Exit codes: 0 stopped by SIGTERM/SIGINT, 2 bad input (nothing was sent), 3 the fabric or
transport failed, or another daemon already answers in the state directory, 4 another SM
already runs on the port (`smagent.sm.lock`: the runtime lock, or IsSM set).
"""
from __future__ import annotations

import contextlib
import json
import logging
import signal
import sys

import click
from click.core import ParameterSource

from mad.forwarding import LMC_MAX
from smagent.config import atomicfile, mkeys, files as paths
from smagent.commands.common import key_arg, mkey_protect_options, mkey_protection
from smagent.commands.logfile import LogFile
from smagent.errors import BadInput
from smagent.config.files import default_state_dir


def _setup_logging(log_file) -> tuple[logging.Handler, dict]:
    """The daemon's log handler, and the levels it replaced (restored when run ends: a run
    inside a Python process, a test or a script, leaves logging as it found it)."""
    from smagent.sm.logflood import FloodFilter
    handler = LogFile(log_file) if log_file else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    handler.addFilter(FloodFilter())  # a trap flood: a few lines and a count, not one line per trap
    # the SM's events at INFO, and every other smagent logger's warnings (a bad guid2lid
    # line, a journal set aside, a backup a full disk refused) in the same log
    top = logging.getLogger("smagent")
    old = {name: logging.getLogger(name).level for name in ("smagent", "smagent.sm")}
    top.addHandler(handler)
    if top.level == logging.NOTSET:  # -v chose a level already: keep it
        top.setLevel(logging.WARNING)
    logging.getLogger("smagent.sm").setLevel(logging.INFO)
    return handler, old


def _reopen(handler: logging.Handler) -> None:
    """Open the log file again by its name (after logrotate moved it away); called from the
    daemon's loop on SIGHUP, never from the signal handler itself (the handler's lock)."""
    if not isinstance(handler, logging.FileHandler):
        return
    with handler.lock or contextlib.nullcontext():
        if handler.stream is not None:
            handler.stream.close()
        handler.stream = handler._open()


def _given(**values) -> dict:
    """The sweep settings given on the command line (a default is not given: a desired
    state's own value wins over it; `smagent.sweep.desired.sweep_settings`). ``routing`` is the
    --routing option (parameter ``engine``)."""
    ctx = click.get_current_context()
    param = {"routing": "engine"}
    return {k: (None if ctx.get_parameter_source(param.get(k, k)) == ParameterSource.DEFAULT else v)
            for k, v in values.items()}


@click.command("run")
@click.option("--priority", type=click.IntRange(0, 15), default=0, show_default=True,
              help="SM priority (0-15): the higher SM is MASTER; ties go to the lower port GUID.")
@click.option("--sweep-interval", type=click.FloatRange(0, 3600), default=10.0, show_default=True,
              help="Seconds between light sweeps as MASTER (OpenSM's default); 0: none.")
@click.option("--poll-interval", type=click.FloatRange(0.1, 3600), default=10.0, show_default=True,
              help="STANDBY: seconds between polls of the master's SMInfo (OpenSM's default).")
@click.option("--poll-retries", type=click.IntRange(0, 100), default=4, show_default=True,
              help="STANDBY: unanswered polls beyond the first before taking over (OpenSM's default).")
@click.option("--sm-key", default="1", callback=key_arg,
              help="SM_Key (64 bits; default 1, OpenSM's): SMInfo Sets with another key are refused; an SM "
                   "with another key is ignored (not a peer). Any key but 1 is returned only to a requester "
                   "that proves it. Never printed; visible to other users in the process list: prefer "
                   "--sm-key-file.")
@click.option("--sm-key-file", type=click.Path(dir_okay=False), default=None,
              help="Read the SM_Key from this file (one key, decimal or 0x hex; '#' comments). Excludes --sm-key.")
@click.option("--routing", "engine", default="auto", show_default=True,
              help="auto (on every sweep the best deadlock-free engine: ftree, else dfsssp, else updn; "
                   "kept while it still fits), minhop, updn, updn:GUID,..., ftree, ftree:fallback=ENGINE, dfsssp, or file:DUMP.")
@click.option("--lmc", type=click.IntRange(0, LMC_MAX), default=0, show_default=True, help="LMC for CA ports.")
@click.option("--lid-file", type=click.Path(dir_okay=False), default=None,
              help="guid2lid file (default: STATE_DIR/guid2lid): LIDs kept across restarts.")
@click.option("--mcast-groups", type=click.Path(dir_okay=False), default=None, help="Multicast group file.")
@click.option("--no-multicast", is_flag=True, help="Leave every MulticastForwardingTable as it is.")
@click.option("--partitions", "partitions_file", type=click.Path(dir_okay=False), default=None,
              help="OpenSM's partitions.conf (as opensm -P), read and checked before any SMP (see sweep).")
@click.option("--qos-policy", "qos_policy_file", type=click.Path(dir_okay=False), default=None,
              help="A QoS policy (OpenSM's qos-policy.conf and qos_* tables, as opensm -Q -Y; see sweep): "
                   "PathRecords by its levels (SL, MTU/rate caps, lifetime, P_Keys), SL2VL/VLArb tables.")
@click.option("--desired", "desired_file", type=click.Path(dir_okay=False), default=None,
              help="Desired-state file (YAML/JSON, see `smagent plan`); re-read on SIGHUP.")
@click.option("--state-dir", type=click.Path(file_okay=False), default=None,
              help="LIDs, journal, backups and the control socket (default as for sweep).")
@click.option("--log-file", type=click.Path(dir_okay=False), default=None, help="Log here instead of stderr.")
@mkey_protect_options
@click.option("--json", "as_json", is_flag=True, help="On exit, print the final status (as `status --json`) on stdout.")
@click.option("--perfmgr-interval", type=click.FloatRange(0, 86400), default=0.0, show_default=True,
              help="MASTER: seconds between counter sweeps of every port (PerfMgr: totals, rates, a log line per "
                   "port that starts erring, counters cleared before they saturate); 0: off (OpenSM's PerfMgr "
                   "uses 180).")
@click.option("--metrics", "metrics_listen", default=None, metavar="ADDR:PORT",
              help="Serve Prometheus metrics at http://ADDR:PORT/metrics (e.g. 127.0.0.1:10683): state, sweeps, "
                   "repairs, traps, MADs sent/retried/lost, SA requests, and with --perfmgr-interval every port's "
                   "counters, node and link info, the last counter sweep's time and what did not answer.")
@click.option("--metrics-ports", type=click.Choice(["all", "switch"]), default="all", show_default=True,
              help="Ports whose counters --metrics serves: every port, or switch ports only.")
@click.option("--metrics-counters", type=click.Choice(["default", "errors", "all"]), default="default",
              show_default=True,
              help="Counters --metrics serves per port: the error sum, error counters once they count, data and "
                   "packets (default); the errors only; or every counter, zero or not (all).")
@click.option("--client-reregister", type=click.Choice(["capable", "all", "off"]), default="capable",
              show_default=True,
              help="On becoming MASTER, set PortInfo.ClientReregister once on every end port that advertises it "
                   "(capable), on every CA port (all: for ports that honour it unadvertised, as ibsim's), or none "
                   "(off, as OpenSM's no_clients_rereg): hosts rejoin their groups with the new SA.")
@click.option("--audit-share", type=click.FloatRange(0, 100), default=0.01, show_default=True,
              help="The audit: re-read what the SM programmed (LFT/MFT blocks, port LIDs and states) and repair "
                   "what differs, at this share of the light sweeps' Gets (0.01: 1 % more SMPs than idle; "
                   "0: no audit). A full pass takes ITEMS / (share x switches) light sweeps: `status` shows it.")
@click.pass_obj
def run(obj, priority, sweep_interval, poll_interval, poll_retries, sm_key, sm_key_file, engine, lmc, lid_file,
        mcast_groups, no_multicast, partitions_file, qos_policy_file, desired_file, state_dir, log_file, mkey_level,
        mkey_lease, mkey_secret_file, as_json, perfmgr_interval, metrics_listen, metrics_ports, metrics_counters,
        client_reregister, audit_share):
    """Run as the Subnet Manager until SIGTERM: MASTER or STANDBY by priority, traps
    answered and repaired, light sweeps, handover with other SMs. `smagent status` asks it."""
    from smagent.sweep import desired
    from smagent.planning import multicast
    from smagent import sweep as sweepmod
    from smagent.sm import control
    from smagent.sm import lock as port_lock
    from smagent.sm.daemon import Daemon, DaemonOptions
    from smagent.transport import open_transport
    from smagent.transport.umad import PERF_CLIENT, sm_classes
    if sm_key_file is not None:
        if click.get_current_context().get_parameter_source("sm_key") != ParameterSource.DEFAULT:
            raise BadInput("--sm-key and --sm-key-file exclude each other")
        sm_key = mkeys.load_key_file(sm_key_file, "--sm-key-file")
    if mcast_groups and no_multicast:
        raise BadInput("--mcast-groups and --no-multicast exclude each other")
    spec = multicast.load_groups(mcast_groups) if mcast_groups else None  # checked before any SMP
    ds = desired.load(desired_file) if desired_file else None
    given = _given(lmc=lmc, lid_file=lid_file, routing=engine)
    from smagent.config import partitions
    parts = partitions.load(partitions_file) if partitions_file else None
    from smagent.config import qospolicy
    policy = qospolicy.load(qos_policy_file) if qos_policy_file else None
    sw = sweepmod.SweepOptions(**desired.sweep_settings(ds, **given), mcast_groups=spec, multicast=not no_multicast,
                               partitions=parts, qos_policy=policy, mkey_protection=mkey_protection(obj, mkey_level, mkey_lease,
                                                                                 mkey_secret_file))
    state_dir = state_dir or default_state_dir()
    paths.check_state_dir(state_dir)
    opts = DaemonOptions(priority=priority, sm_key=sm_key, sweep_interval=sweep_interval, poll_interval=poll_interval,
                         poll_retries=poll_retries, state_dir=state_dir, desired_file=desired_file, sweep=sw,
                         given=given, perfmgr_interval=perfmgr_interval,
                         client_reregister=client_reregister, audit_share=audit_share)
    if obj.defaulted and obj.opts["transport"] == "sim":  # never MASTER of a made-up fabric unasked
        raise BadInput("no InfiniBand CA found (libibumad lists none): `smagent run` needs a fabric; "
                       "--transport umad --ca NAME to name one, --transport sim for the built-in simulator")
    if obj.opts["transport"] == "umad" and obj.opts["ca"] is None and obj.opts["port"] is None:
        _one_subnet_or_named()
    if perfmgr_interval and obj.opts["transport"] != "umad":
        raise BadInput("--perfmgr-interval needs a live fabric (--transport umad): the simulator has no PerfMgt agents")
    server = control.ControlServer(control.socket_path(state_dir))
    handler, old_levels = _setup_logging(log_file)
    o = obj.opts
    transport = lock = endpoint = None
    made: list = []  # the daemon, once it exists: the metrics endpoint answers from it
    classes = []
    if o["transport"] == "umad":  # the SA (class 0x03) is served on the SM's port (vendor classes: umad2sim)
        classes += sm_classes()
    if perfmgr_interval:
        classes.append(PERF_CLIENT)
    try:
        if metrics_listen is not None:  # listening first: a port in use is refused before any MAD
            from smagent.perf.metrics import Scope
            from smagent.sm.metrics_server import DaemonCollector, MetricsServer
            endpoint = MetricsServer(metrics_listen, DaemonCollector(
                lambda: made[0].published_status() if made else {"state": "STARTING"},
                lambda: made[0].published_sweep() if made else None, Scope(metrics_ports, metrics_counters)))
            endpoint.start()
        if o["transport"] == "umad":  # one SM per port: refused before the issm device opens
            lock = port_lock.claim_port(o["ca"], o["port"])
        transport = open_transport(o["transport"], ca=o["ca"], port=o["port"], node_name_map=o["node_name_map"],
                                   topology=o["topology"], fixture=o["fixture"], record=o["record"],
                                   window=o["window"], timeout_ms=o["timeout"], retries=o["retries"],
                                   m_key=o["mkey"], m_key_file=o["mkey_file"], serve=True, classes=classes)
        daemon = Daemon(transport, opts)
        made.append(daemon)
        atomicfile.tolerate_full_disk()  # a full disk: warnings, and the SM goes on routing
        daemon.reopen_logs = lambda: _reopen(handler)
        daemon.log_flood = next((f for f in handler.filters if hasattr(f, "flush")), None)

        def stop(signum, _frame):
            logging.getLogger("smagent.sm").info("signal %s: stopping", signal.Signals(signum).name)
            daemon.stop()  # raises Stopped into a sweep in progress: `run` ends it

        def reload(_signum, _frame):
            daemon.reload_requested = True

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGHUP, reload)
        daemon.run(server)
        logging.getLogger("smagent.sm").info("stopped")
        if as_json:
            click.echo(json.dumps(daemon.status(), indent=2))
    finally:
        atomicfile.tolerate_full_disk(False)
        server.close()
        if endpoint is not None:
            endpoint.close()
        if transport is not None:
            transport.close()  # closes issm: IsSM clears, the other SMs see us go
        if lock is not None:
            lock.release()
        logging.getLogger("smagent").removeHandler(handler)
        handler.close()
        for name, level in old_levels.items():
            logging.getLogger(name).setLevel(level)


def _one_subnet_or_named() -> None:
    """No port named: refuse to guess when ports are up on several CAs (they may be
    different subnets, and the SM would become master of whichever libibumad lists
    first); one CA (a dual-port HCA included) is libibumad's usual choice."""
    from smagent.transport.umad_lib import ports
    up = [p for p in ports() if p.phys_state == 5 and p.link_layer != "Ethernet"]
    if len({p.ca for p in up}) > 1:
        raise BadInput("InfiniBand ports are up on several CAs: " + "; ".join(p.describe() for p in up)
                       + ": they may be different subnets; name the SM's port with --port-guid (or --ca/--port)")
