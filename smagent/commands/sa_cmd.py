"""`smagent sa QUERY`: ask the subnet's SA (class 0x03), as saquery does: records by Get
and GetTable, multi-MAD tables reassembled by our RMPP receiver. Keys (M_Key, SM_Key) are
never shown."""
from __future__ import annotations

import json

import click

from smagent.commands import render
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
    """A field as JSON holds it: bytes (a GID of ClassPortInfo) as 0x hex; text as UTF-8
    (a NodeDescription's bytes that are not, kept undecoded by the codec, shown replaced)."""
    if isinstance(v, (bytes, bytearray)):
        return "0x" + bytes(v).hex()
    return render.jsonable(v) if isinstance(v, str) else v


def _show(records: list, as_json: bool, kind: str) -> None:
    rows = [{k: _value(getattr(r, k)) for k in r.LAYOUT.names if k not in SECRET_FIELDS} for r in records]
    if as_json:
        click.echo(json.dumps({"records": kind, "count": len(rows), "items": rows}, indent=2))
        return
    for row in rows:
        click.echo(f"{kind}:")
        for k, v in row.items():
            click.echo(f"    {k:<28} {_text(k, v)}")


def _text(name: str, v):
    """A record's field as saquery writes it: a GID as an IPv6 address (fe80::20:3), an MTU
    and a rate with what their codes mean, GUIDs and P_Keys in hex."""
    import ipaddress

    from mad import codes
    if not isinstance(v, int) or isinstance(v, bool):
        return v
    if name.endswith("gid") and "count" not in name:
        return str(ipaddress.IPv6Address(v))
    if name == "mtu" and v in codes.MTUS:
        return f"{v} ({codes.MTUS[v]})"
    if name == "rate" and codes.rate_gbps(v):
        return f"{v} ({codes.rate_gbps(v):g} Gb/s)"
    return f"{v:#x}" if "guid" in name or name == "p_key" else v


def _client(obj):
    from smagent.sa.client import SaClient, sa_address
    from smagent.transport import open_transport
    from smagent.transport.umad import SA_CLIENT
    o = obj.opts
    if o["transport"] != "umad":
        raise BadInput(f"smagent sa asks a live SA: use --transport umad (not {o['transport']})")
    t = open_transport("umad", ca=o["ca"], port=o["port"], record=o["record"], node_name_map=o["node_name_map"], window=o["window"],
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
    """Ask the subnet's SA (needs --transport umad): nodes, ports, paths, traces, SMs, links, switches."""


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


NODE_TYPES = {1: "CA", 2: "switch", 3: "router"}


@sa.command()
@click.argument("src")
@click.argument("dst")
@_json
@click.pass_obj
def trace(obj, src, dst, as_json):
    """The nodes a packet from SRC to DST crosses, in order (SubnAdmGetTraceTable, IBA 15.2.5
    TraceRecord): each a LID or a port GUID (0x and 16 hex digits); with LMC > 0 give LIDs
    (a GUID names one path per LID). Node descriptions from the SA's NodeRecords."""
    from mad.sa_records import PathRecord
    (sk, sv), (dk, dv) = _endpoint(src), _endpoint(dst)
    fields = {f"s{sk}": sv, f"d{dk}": dv}
    client, t = _client(obj)
    try:
        hops = client.trace(PathRecord(**fields), PathRecord.mask(*fields))
        names = _descriptions(client, {h.node_id for h in hops})
    finally:
        t.close()
    rows = [{"hop": i, **{k: getattr(h, k) for k in h.LAYOUT.names}, "node_description": names.get(h.node_id, "")}
            for i, h in enumerate(hops)]
    if as_json:
        click.echo(json.dumps({"records": "TraceRecord", "count": len(rows), "items": rows}, indent=2))
        return
    for r in rows:
        kind = NODE_TYPES.get(r["node_type"], f"type {r['node_type']}")
        click.echo(f"[{r['hop']}] {kind:<6} {r['node_id']:#018x} in port {r['entry_port']:<3} out port "
                   f"{r['exit_port']:<3} {r['node_description']!r}")


def _descriptions(client, guids: set[int]) -> dict[int, str]:
    """Node GUID -> NodeDescription, from one NodeRecord GetTable per node (an SA that
    answers none for a node: no description)."""
    from mad.sa_records import NodeRecord
    from smagent.sa.client import SaError
    out = {}
    for g in sorted(guids):
        try:
            found = client.table(NodeRecord(node_guid=g), NodeRecord.mask("node_guid"))
        except SaError:
            continue
        if found:
            out[g] = found[0].node_string
    return out


@sa.command()
@click.argument("guids", nargs=-1, required=True)
@click.option("--sources", type=click.IntRange(1, 10), default=1, show_default=True,
              help="How many of GUIDS (the first ones) are sources; the rest are destinations.")
@click.option("--num-path", type=click.IntRange(1, 127), default=None, help="At most this many paths in all (NumbPath).")
@_json
@click.pass_obj
def multipaths(obj, guids, sources, num_path, as_json):
    """PathRecords between port GUIDs at once (SubnAdmGetMulti with a MultiPathRecord, IBA
    15.2.5.17): each GUID 0x and 16 hex digits, at most 11, the first --sources the sources."""
    from mad.sa import MULTIPATH_GIDS
    from mad.sa_records import MultiPathRecord
    gids = []
    for g in guids:
        kind, value = _endpoint(g)
        if kind != "gid":
            raise BadInput(f"{g}: a port GUID (0x and 16 hex digits) is needed here, not a LID")
        gids.append(value)
    if len(gids) > MULTIPATH_GIDS:
        raise BadInput(f"{len(gids)} GUIDs: one request carries at most {MULTIPATH_GIDS}")
    if sources >= len(gids):
        raise BadInput(f"--sources {sources} leaves no destination among {len(gids)} GUID(s)")
    query = MultiPathRecord(sgid_count=sources, dgid_count=len(gids) - sources, num_path=num_path or 0)
    mask = MultiPathRecord.mask("sgid_count", "dgid_count", *(("num_path",) if num_path else ()))
    client, t = _client(obj)
    try:
        _show(client.multi_paths(query, gids, mask), as_json, "PathRecord")
    finally:
        t.close()


# -- multicast groups (for tests and for trying the SA: a host's IPoIB joins by itself) --------
SELECTORS = {"greater": 0, "less": 1, "exactly": 2, "largest": 3}
JOIN_STATES = {"full": 1, "non": 2, "send-only": 4, "send-only-full": 8}


def _mgid(text: str | None) -> int:
    """An MGID: IPv6 text (ff12:401b:ffff::ffff:ffff) or 0x hex; none: 0, the SA assigns one."""
    import ipaddress
    if text is None:
        return 0
    try:
        value = int(text, 16) if text.lower().startswith("0x") else int(ipaddress.IPv6Address(text))
    except ValueError:
        raise BadInput(f"{text!r} is not an MGID (IPv6 text such as ff12:401b:ffff::ffff:ffff, or 0x hex)") from None
    if value >> 120 != 0xFF:
        raise BadInput(f"MGID {text} is not a multicast GID (it starts with ff)")
    return value


def _own_gid(t) -> int:
    info = t.local_port()
    return (info.gid_prefix or 0xFE80000000000000) << 64 | info.port_guid


@sa.command()
@click.argument("mgid", required=False)
@_json
@click.pass_obj
def groups(obj, mgid, as_json):
    """MCMemberRecords: one per multicast group we may see, or of MGID (members only with the SA's SM_Key)."""
    from mad.sa_records import MCMemberRecord
    value = _mgid(mgid) if mgid is not None else None
    _run(obj, as_json, "MCMemberRecord", MCMemberRecord(mgid=value or 0), MCMemberRecord.mask("mgid") if value else 0)


_state = click.option("--join-state", type=click.Choice(list(JOIN_STATES)), default="full", show_default=True,
                      help="The membership: full, non (receive only), send-only (non-member) or send-only-full "
                           "(a sender that keeps the group alive, JoinState 0x8).")


@sa.command()
@click.argument("mgid", required=False)
@_state
@click.option("--mtu", type=click.IntRange(1, 5), default=None, help="MTU code (1 256 .. 5 4096).")
@click.option("--rate", type=click.IntRange(2, 22), default=None, help="Rate code (IBA: 3 10 Gb/s, 7 40 Gb/s, ...).")
@click.option("--selector", type=click.Choice(list(SELECTORS)), default="exactly", show_default=True,
              help="How --mtu and --rate compare with the group's.")
@click.option("--q-key", type=str, default="0x0b1b", show_default=True, help="The group's Q_Key (a new group).")
@click.option("--p-key", type=str, default="0xffff", show_default=True, help="The group's P_Key (a new group).")
@_json
@click.pass_obj
def join(obj, mgid, join_state, mtu, rate, selector, q_key, p_key, as_json):
    """Join this port to multicast group MGID (none: a new group, MGID assigned by the SA)."""
    from mad.sa_records import MCMemberRecord
    from smagent.sa.groups import CREATE_NEEDS
    try:
        qk, pk = int(q_key, 0), int(p_key, 0)
    except ValueError:
        raise BadInput(f"--q-key {q_key!r} / --p-key {p_key!r}: numbers (0x hex) expected") from None
    if not (0 <= qk <= 0xFFFFFFFF and 0 <= pk <= 0xFFFF):
        raise BadInput("--q-key is 32 bits, --p-key 16 bits")
    fields = list(CREATE_NEEDS)
    extra = {}
    for name, value in (("mtu", mtu), ("rate", rate)):
        if value is not None:
            extra.update({name: value, f"{name}_selector": SELECTORS[selector]})
            fields += [name, f"{name}_selector"]
    group = _mgid(mgid)
    client, t = _client(obj)
    try:
        rec = MCMemberRecord(mgid=group, port_gid=_own_gid(t), q_key=qk, p_key=pk,
                             join_state=JOIN_STATES[join_state], **extra)
        _show([client.set(rec, MCMemberRecord.mask(*fields))], as_json, "MCMemberRecord")
    finally:
        t.close()


@sa.command()
@click.argument("mgid")
@_state
@_json
@click.pass_obj
def leave(obj, mgid, join_state, as_json):
    """Leave multicast group MGID (the membership named by --join-state)."""
    from mad.sa_records import MCMemberRecord
    group = _mgid(mgid)
    client, t = _client(obj)
    try:
        rec = MCMemberRecord(mgid=group, port_gid=_own_gid(t), join_state=JOIN_STATES[join_state])
        _show([client.delete(rec, MCMemberRecord.mask("mgid", "port_gid", "join_state"))], as_json, "MCMemberRecord")
    finally:
        t.close()


@sa.command()
@click.argument("index", type=click.IntRange(1, 255))
@click.argument("guid", required=False)
@click.option("--delete", is_flag=True, help="Delete the alias GUID at INDEX instead.")
@_json
@click.pass_obj
def alias(obj, index, guid, delete, as_json):
    """Register GUID as the alias at INDEX (1..GUIDCap-1) of this port's GUID table, as an
    SR-IOV virtual function does (GUIDInfoRecord Set; no GUID: the SM assigns one), or
    --delete it. Shows the block of 8 the SA answers with."""
    from mad.sa_records import GUIDInfoRecord
    value = _number(guid, "GUID", 64) if guid is not None else 0
    if delete and guid is not None:
        raise BadInput("--delete takes the INDEX alone")
    client, t = _client(obj)
    try:
        guids = [0] * 8
        guids[index % 8] = value
        rec = GUIDInfoRecord(lid=t.local_port().base_lid, block_num=index // 8, guids=guids)
        mask = GUIDInfoRecord.mask("lid", "block_num", f"guids[{index % 8}]")
        _show([(client.delete if delete else client.set)(rec, mask)], as_json, "GUIDInfoRecord")
    finally:
        t.close()


# -- services (for tests and for trying the SA: a host's daemons register their own) ---------
def _number(text: str, what: str, bits: int) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise BadInput(f"{what} {text!r} is not a number (decimal or 0x hex)") from None
    if not 0 <= value < 1 << bits:
        raise BadInput(f"{what} {text} does not fit in {bits} bits")
    return value


@sa.command()
@_json
@click.pass_obj
def services(obj, as_json):
    """ServiceRecords: every registration we may see (ServiceKey only with the SA's SM_Key)."""
    from mad.sa_records import ServiceRecord
    _run(obj, as_json, "ServiceRecord", ServiceRecord(), 0)


def _service(name: str, service_id: str, p_key: str | None, lease: int | None):
    """The ServiceRecord of service NAME (its ServiceGID filled in once the port is open) and
    its component mask: checked before anything is sent."""
    from mad.sa_records import ServiceRecord
    if len(name.encode()) > 64:
        raise BadInput(f"service name {name!r} is longer than 64 bytes")
    fields: dict = {"service_id": _number(service_id, "ServiceID", 64), "service_gid": 0, "service_name": name}
    if p_key is not None:
        fields["service_p_key"] = _number(p_key, "--p-key", 16)
    if lease is not None:
        fields["service_lease"] = lease
    return ServiceRecord(**fields), ServiceRecord.mask(*fields)


_service_args = [click.argument("name"), click.argument("service_id", metavar="ID"),
                 click.option("--p-key", default=None, help="ServiceP_Key (none: not in the component mask).")]


def _with_service_args(f):
    for deco in reversed(_service_args):
        f = deco(f)
    return f


@sa.command("service-register")
@_with_service_args
@click.option("--lease", type=click.IntRange(0, 0xFFFFFFFF), default=None,
              help="ServiceLease in seconds (none: for ever, 0xFFFFFFFF).")
@_json
@click.pass_obj
def service_register(obj, name, service_id, p_key, lease, as_json):
    """Register service NAME with ServiceID ID on this port (ServiceRecord Set)."""
    rec, mask = _service(name, service_id, p_key, lease)
    client, t = _client(obj)
    try:
        _show([client.set(rec.replace(service_gid=_own_gid(t)), mask)], as_json, "ServiceRecord")
    finally:
        t.close()


@sa.command("service-delete")
@_with_service_args
@_json
@click.pass_obj
def service_delete(obj, name, service_id, p_key, as_json):
    """Delete this port's registration of service NAME, ServiceID ID (ServiceRecord Delete)."""
    rec, mask = _service(name, service_id, p_key, None)
    client, t = _client(obj)
    try:
        _show([client.delete(rec.replace(service_gid=_own_gid(t)), mask)], as_json, "ServiceRecord")
    finally:
        t.close()


# -- event subscriptions (for tests: a host's own stack subscribes by itself) ------------------
def _lid_range(text: str) -> tuple[int, int]:
    first, _, last = text.partition("-")
    return _number(first, "--lids", 16), _number(last, "--lids", 16) if last else 0


@sa.command()
@click.argument("trap")
@click.option("--unsubscribe", is_flag=True, help="Subscribe 0: end the subscription these fields name.")
@click.option("--gid", "guid", default=None, help="Traps about this port GUID only (0x and 16 hex digits).")
@click.option("--lids", default=None, help="Traps about LIDs BEGIN[-END] only (0xffff: every port, the default).")
@click.option("--qpn", default="1", show_default=True,
              help="The QPN Reports go to (OpenSM sends them to the source QP).")
@_json
@click.pass_obj
def subscribe(obj, trap, unsubscribe, guid, lids, qpn, as_json):
    """Subscribe this port to generic trap TRAP (a number, or 'all') with InformInfo Set:
    the SA's answer. Reports come to a process that listens, not to this command."""
    from mad.sa_records import InformInfo
    number = 0xFFFF if trap == "all" else _number(trap, "TRAP", 16)
    gid, (begin, end) = 0, (0xFFFF, 0)
    if guid is not None and lids is not None:
        raise BadInput("give --gid or --lids, not both")
    if guid is not None:
        kind, gid = _endpoint(guid)
        if kind != "gid":
            raise BadInput(f"--gid {guid}: a port GUID (0x and 16 hex digits) is needed")
        begin = 0
    elif lids is not None:
        begin, end = _lid_range(lids)
    info = InformInfo(gid=gid, lid_range_begin=begin, lid_range_end=end, is_generic=1, subscribe=int(not unsubscribe),
                      type=0xFFFF, trap_number_or_device_id=number, qpn=_number(qpn, "--qpn", 24),
                      producer_type_or_vendor_id=0xFFFFFF)
    client, t = _client(obj)
    try:
        _show([client.set(info, 0)], as_json, "InformInfo")
    finally:
        t.close()
