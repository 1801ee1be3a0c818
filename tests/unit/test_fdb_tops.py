"""SwitchInfo: the one Set path of the sweep and the table commands (smagent.fdb.tops)."""
from mad.attributes import SwitchInfo
from smagent.fdb import tops


def _si(**kw):
    base = dict(linear_fdb_cap=0xC000, multicast_fdb_cap=1024, linear_fdb_top=6, life_time_value=18,
                port_state_change=1)
    base.update(kw)
    return SwitchInfo(**base)


class _Reply:
    ok, error = True, None

    def __init__(self, value):
        self._v = value

    def value(self, kind=None):  # as smagent.transport.base.Reply.value
        return self._v


class _Echo:
    """A switch that stores what it is sent, except the fields in `stuck`."""

    def __init__(self, **stuck):
        self.stuck, self.sent = stuck, []

    def execute(self, reqs):
        self.sent += [r.smp.attribute() for r in reqs]
        return [_Reply(SwitchInfo.LAYOUT.replace(r.smp.attribute(), **self.stuck)) for r in reqs]


def test_port_state_change_one_rule():
    si = _si()
    # the sweep has looked at the fabric: writing 1 clears the pending flag
    swept = tops.change(1, "S", (0, 1), si, {"life_time_value": 18}, clear_port_state_change=True)
    assert swept.new.port_state_change == 1 and swept.changed() == ["port_state_change"]
    assert swept.diffs() == ["port_state_change 1 -> 0 (write 1 to clear)"]
    # a table command writes 0: the event stays for whoever sweeps next
    cmd = tops.change(1, "S", (0, 1), si, {"linear_fdb_top": 9})
    assert cmd.new.port_state_change == 0 and cmd.changed() == ["linear_fdb_top"]
    assert tops.change(1, "S", (0, 1), _si(port_state_change=0), {"life_time_value": 18},
                       clear_port_state_change=True) is None  # nothing to do


def test_every_changed_field_is_checked_in_the_read_back():
    c = tops.change(1, "S", (0, 1), _si(), {"linear_fdb_top": 9, "default_port": 3, "life_time_value": 20})
    assert tops.write(_Echo(), [c]) == []
    problems = tops.write(_Echo(default_port=0, life_time_value=18), [c])
    assert problems == ["S: SwitchInfo default_port reads back 0, expected 3, life_time_value reads back 18, "
                        "expected 20"]
