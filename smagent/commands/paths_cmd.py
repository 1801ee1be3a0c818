"""`smagent paths SRC DST`: the SL the path from LID SRC to LID DST uses, from the SLs a
dfsssp sweep kept (`smagent.planning.pathsl`), until an SA hands it to hosts in PathRecords."""
from __future__ import annotations

import os

import click

from smagent.commands.common import emit_json


@click.command()
@click.argument("src", type=click.IntRange(1, 0xBFFF))
@click.argument("dst", type=click.IntRange(1, 0xBFFF))
@click.option("--path-sls", type=click.Path(dir_okay=False), default=None,
              help="The path SL file (default: <state dir>/path_sls; none there: every path on SL 0).")
@click.option("--state-dir", type=click.Path(file_okay=False), default=None,
              help="Where the sweep kept it (default: $SMAGENT_STATE_DIR, else ~/.local/state/smagent).")
@click.option("--qos-policy", "qos_policy_file", type=click.Path(dir_okay=False), default=None,
              help="A QoS policy (see sweep): the SL a PathRecord query naming --service-id / --pkey gets "
                   "(OpenSM's first-match order; the path SL file holds the rest).")
@click.option("--service-id", type=click.IntRange(0, 0xFFFFFFFFFFFFFFFF), default=None,
              help="The query's ServiceID (with --qos-policy).")
@click.option("--pkey", type=click.IntRange(0, 0xFFFF), default=None, help="The query's P_Key (with --qos-policy).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: src, dst, sl, switch, file (and rule).")
@click.pass_obj
def paths(obj, src, dst, path_sls, state_dir, qos_policy_file, service_id, pkey, as_json):
    """The SL of the path from LID SRC to LID DST (a dfsssp sweep's layer: SL n rides VL n;
    a QoS policy's by target port or default, as the sweep kept it; with --qos-policy,
    its rule by source, service ID or P_Key first)."""
    from smagent.planning import pathsl
    from smagent.config import qospolicy
    from smagent.errors import BadInput
    from smagent.config.files import StateDir, default_state_dir
    if (service_id is not None or pkey is not None) and qos_policy_file is None:
        raise BadInput("--service-id and --pkey choose a rule of a QoS policy: give --qos-policy FILE")
    policy = qospolicy.load(qos_policy_file) if qos_policy_file else None  # before the first SMP
    if path_sls is None:
        default = StateDir(state_dir or default_state_dir()).path_sls
        path_sls = str(default) if os.path.exists(default) else None
    sls = pathsl.load(path_sls) if path_sls is not None else None  # before the first SMP
    topo = obj.session().discover()
    sl, switch = pathsl.sl_of(topo, sls, src, dst)
    rule = None
    if policy is not None:
        from smagent.planning import qoslayers
        ports = qoslayers.dlid_ports(topo)
        dest, source = ports.get(dst), ports.get(src)
        rule = policy.match(dest[0] if dest else None, service_id, pkey, src_guid=source[0] if source else None,
                            members=qospolicy.topology_membership(policy, topo, None))
        if rule is not None and not rule.by_destination:
            sl = rule.sl
        else:
            rule = None
    name = topo.nodes[switch].description
    if as_json:
        emit_json({"src": src, "dst": dst, "sl": sl, "switch": name, "switch_guid": f"0x{switch:016x}",
                   "file": path_sls, "rule": rule.describe() if rule else None})
    else:
        where = f"from {path_sls}" if path_sls else "no path SL file: every path on SL 0"
        if rule is not None:
            where = f"QoS policy rule {rule.describe()}"
        click.echo(f"LID {src} -> LID {dst}: SL {sl} (enters at {name}; {where})")
