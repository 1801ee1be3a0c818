"""`smagent sa` text writes a record's fields as saquery does: GIDs as IPv6 addresses, MTU and
rate with what their codes mean (issue 39 item 9), GUIDs and P_Keys in hex."""
from smagent.commands.sa_cmd import _text


def test_fields_as_saquery_writes_them():
    assert _text("dgid", 0xFE800000000000000000000000200003) == "fe80::20:3"
    assert _text("port_gid", 0xFE80000000000000_0002C90300000001) == "fe80::2:c903:0:1"
    assert _text("mgid", 0xFF12401BFFFF0000_00000000FFFFFFFF) == "ff12:401b:ffff::ffff:ffff"
    assert _text("mtu", 4) == "4 (2048)" and _text("rate", 7) == "7 (40 Gb/s)"
    assert _text("port_guid", 0x20003) == "0x20003" and _text("p_key", 0xFFFF) == "0xffff"
    assert _text("sgid_count", 2) == 2 and _text("lid", 5) == 5 and _text("mtu", 0) == 0
