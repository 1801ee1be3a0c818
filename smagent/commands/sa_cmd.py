"""`smagent sa QUERY`: ask the subnet's SA (class 0x03), as saquery does: records by Get
and GetTable, multi-MAD tables reassembled by our RMPP receiver. Keys (M_Key, SM_Key) are
never shown."""
from __future__ import annotations

import json

import click

from smagent.errors import BadInput

SECRET_FIELDS = ("m_key", "sm_key")


def _lid(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        lid = int(text, 0)
    except ValueError:
        raise BadInput(f"{text!r} is not a LID (a number, 1..0xBFFF)") from None
    if not 1 <= lid <= 0xBFFF:
        raise BadInput(f"LID {text} is out of range: unicast LIDs are 1..0xBFFF")
    return lid


def _endpoint(text: str) -> tuple[str, int]:
    """("lid", LID) or ("gid", GID) of a path's end: a LID, or a port GUID (0x and 16 hex
    digits; the GID with the default prefix)."""
    t = text.strip().lower()
    if t.startswith("0x") and len(t) == 18:
        try:
            return "gid", 0xFE80000000000000 << 64 | int(t, 16)
        except ValueError:
            pass
    lid = _lid(text)
    assert lid is not None
    return "lid", lid


def _value(v):
    """A field as JSON holds it: bytes (a GID of ClassPortInfo) as 0x hex."""
    return "0x" + bytes(v).hex() if isinstance(v, (bytes, bytearray)) else v


def _show(records: list, as_json: bool, kind: str) -> None:
    rows = [{k: _value(getattr(r, k)) for k in r.LAYOUT.names if k not in SECRET_FIELDS} for r in records]
    if as_json:
        click.echo(json.dumps({"records": kind, "count": len(rows), "items": rows}, indent=2))
        return
    for row in rows:
        click.echo(f"{kind}:")
        for k, v in row.items():
            shown = f"{v:#x}" if isinstance(v, int) and ("guid" in k or "gid" in k or k in ("p_key",)) else v
            click.echo(f"    {k:<28} {shown}")


def _client(obj):
    from smagent.sa.client import SaClient, sa_address
    from smagent.transport import open_transport
    from smagent.transport.umad import SA_CLIENT
    o = obj.opts
    if o["transport"] != "umad":
        raise BadInput(f"smagent sa asks a live SA: use --transport umad (not {o['transport']})")
    t = open_transport("umad", ca=o["ca"], port=o["port"], record=o["record"], window=o["window"],
                       timeout_ms=o["timeout"], retries=o["retries"], classes=[SA_CLIENT])
    return SaClient(t, sa_address(t)), t


def _run(obj, as_json, kind, query, mask):
    client, t = _client(obj)
    try:
        _show(client.table(query, mask), as_json, kind)
    finally:
        t.close()


@click.group()
def sa():
    """Ask the subnet's SA (needs --transport umad): nodes, ports, paths, SMs, links, switches."""


_json = click.option("--json", "as_json", is_flag=True, help="One JSON document: {records, count, items}.")


@sa.command()
@_json
@click.pass_obj
def classportinfo(obj, as_json):
    """The SA's ClassPortInfo."""
    client, t = _client(obj)
    try:
        _show([client.class_port_info()], as_json, "ClassPortInfo")
    finally:
        t.close()


def _by_lid(name: str, record: str, field: str, help_text: str):
    @click.argument("lid", required=False)
    @_json
    @click.pass_obj
    def cmd(obj, lid, as_json):
        from mad import sa_records
        kind = getattr(sa_records, record)
        value = _lid(lid)
        query = kind(**{field: value}) if value is not None else kind()
        _run(obj, as_json, record, query, kind.mask(field) if value is not None else 0)
    cmd.__doc__ = help_text
    return sa.command(name)(cmd)


_by_lid("nodes", "NodeRecord", "lid", "NodeRecords: every node (one per CA port), or the one at LID.")
_by_lid("portinfo", "PortInfoRecord", "endport_lid", "PortInfoRecords: every port, or those at LID.")
_by_lid("switchinfo", "SwitchInfoRecord", "lid", "SwitchInfoRecords: every switch, or the one at LID.")
_by_lid("links", "LinkRecord", "from_lid", "LinkRecords: every link end, or those from LID.")
_by_lid("sminfo", "SMInfoRecord", "lid", "SMInfoRecords: every SM, or the one at LID.")


@sa.command()
@click.argument("src")
@click.argument("dst")
@_json
@click.pass_obj
def paths(obj, src, dst, as_json):
    """PathRecords from SRC to DST: each a LID or a port GUID (0x and 16 hex digits)."""
    from mad.sa_records import PathRecord
    (sk, sv), (dk, dv) = _endpoint(src), _endpoint(dst)
    fields = {f"s{sk}": sv, f"d{dk}": dv}
    _run(obj, as_json, "PathRecord", PathRecord(**fields), PathRecord.mask(*fields))
