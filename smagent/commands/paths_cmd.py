"""`smagent paths SRC DST`: the SL the path from LID SRC to LID DST uses, from the SLs a
dfsssp sweep kept (`smagent.pathsl`), until an SA hands it to hosts in PathRecords."""
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
@click.option("--json", "as_json", is_flag=True, help="One JSON object: src, dst, sl, switch, file.")
@click.pass_obj
def paths(obj, src, dst, path_sls, state_dir, as_json):
    """The SL of the path from LID SRC to LID DST (a dfsssp sweep's layer: SL n rides VL n)."""
    from smagent import pathsl
    from smagent.paths import StateDir, default_state_dir
    if path_sls is None:
        default = StateDir(state_dir or default_state_dir()).path_sls
        path_sls = str(default) if os.path.exists(default) else None
    sls = pathsl.load(path_sls) if path_sls is not None else None  # before the first SMP
    topo = obj.session().discover()
    sl, switch = pathsl.sl_of(topo, sls, src, dst)
    name = topo.nodes[switch].description
    if as_json:
        emit_json({"src": src, "dst": dst, "sl": sl, "switch": name, "switch_guid": f"0x{switch:016x}",
                   "file": path_sls})
    else:
        where = f"from {path_sls}" if path_sls else "no path SL file: every path on SL 0"
        click.echo(f"LID {src} -> LID {dst}: SL {sl} (enters at {name}; {where})")
