"""`smagent query ATTRIBUTE TARGET`: read one attribute, as smpquery/smpdump do (through
`api.Session.query_reply`)."""
from __future__ import annotations

import click

from smagent import api
from smagent.commands import render
from smagent.discovery import targets
from smagent.commands.common import emit_json


@click.command()
@click.argument("attribute", type=click.Choice(sorted(targets.QUERY_ATTRIBUTES)))
@click.argument("target")
@click.option("--port", "portnum", type=click.IntRange(0, 255), default=None,
              help="Port (portinfo, pkeys; the output port of sl2vl and vlarb).")
@click.option("--in-port", type=click.IntRange(0, 255), default=None, help="sl2vl: a switch's input port.")
@click.option("--block", type=click.IntRange(0, 3071), default=None,
              help="Table block (lft, rft, mft, pkeys, guids); vlarb: 0-3 = low 0-31, low 32-63, high 0-31, high 32-63.")
@click.option("--position", type=click.IntRange(0, 15), default=None, help="MFT PortMask position.")
@click.option("--ext-speeds", is_flag=True, help="portinfo: set AttributeModifier bit 31 (extended speeds form).")
@click.option("--show-keys", is_flag=True, help="Show M_Key / SM_Key (hidden by default, as smpquery does).")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON document: the target, the attribute and modifier, its fields (IBA snake_case names).")
@click.pass_obj
def query(obj, attribute, target, portnum, in_port, block, position, ext_speeds, show_keys, as_json):
    """Read one attribute from TARGET: a LID (5, 0x5), a DR path (0,1,3), a node or port
    GUID (0x0002c90300001234) or a node description (Switch2); GUIDs and descriptions are
    found by discovering the fabric first.

    In the spirit of smpquery/smpdump: ATTRIBUTE is one of nodeinfo, nodedesc, portinfo,
    switchinfo, sminfo, lft, rft, mft, pkeys, sl2vl, vlarb, guids (GUIDInfo: the port's
    GUID and its alias GUIDs, 8 a block).
    """
    kw = dict(port=portnum, block=block, position=position, ext_speeds=ext_speeds, in_port=in_port)
    api.check_query(attribute, target, **kw)  # before the transport opens
    tgt, resp = obj.session().query_reply(attribute, target, **kw)
    value = resp.attribute()
    if as_json:
        emit_json({"target": tgt.describe(), "attribute": resp.attribute_name,
                   "modifier": resp.attribute_modifier, "value": render.jsonable(value, show_keys)})
    else:
        click.echo(f"# {resp.attribute_name}: {tgt.describe()} modifier {resp.attribute_modifier:#x}")
        click.echo(render.attribute_text(value, show_keys=show_keys))
