"""M_Key protection (IBA 14.2.4): may this SMP touch this node?

The key that guards a switch is port 0's; a CA's ports are guarded one by one.
Protection levels (PortInfo.M_KeyProtectBits), when the SMP's M_Key does not match
a non-zero port M_Key:

    0  Get allowed, PortInfo.M_Key returned;  Set/TrapRepress refused
    1  Get allowed, PortInfo.M_Key read as 0; Set/TrapRepress refused
    2  everything refused
    3  everything refused (IBA 1.2 adds rules for 3 that a later issue will model)

A refused SMP gets no response: the SMA counts an M_Key violation and starts the
lease timer (unless it is running); an SMP with the matching M_Key stops it. When
the lease (M_KeyLeasePeriod seconds, 0 = forever) runs out first, the protect bits
fall back to 0 (the M_Key itself stays: at level 0 a Get shows it, and Sets still need
it). Expiry is settled before every check, so a matching key that arrives after the
lease ran out finds the bits already cleared. A refused Get or Set sends trap 256
(bad M_Key) to the port's MasterSMLID (`SimFabric.bad_mkey_trap`).
"""
from __future__ import annotations

from mad.header import Method

ALLOW, ALLOW_HIDDEN, REFUSE = 0, 1, 2


def expire(node, kp: int, now: float) -> None:
    """Run port ``kp``'s lease timer up to ``now``: once M_KeyLeasePeriod seconds have
    passed since it started, the protect bits fall back to 0 and the timer stops. It
    runs whether or not SMPs arrive, so it is settled before any check (a valid key that
    arrives after the expiry finds the bits already cleared, as in Linux's check_mkey)."""
    start = node.lease_start.get(kp)
    if start is None:
        return
    pi = node.pi[kp]
    if pi.m_key_lease_period and now - start >= pi.m_key_lease_period:
        pi.m_key_protect_bits = 0  # lease expired: the SM is presumed gone
        del node.lease_start[kp]


def check(node, in_port: int, method: int, m_key: int, now: float) -> int:
    """ALLOW, ALLOW_HIDDEN (Get allowed, PortInfo.M_Key must read 0) or REFUSE."""
    kp = node.lid_port(in_port)
    expire(node, kp, now)
    pi = node.pi[kp]
    key = pi.m_key
    if key == 0 or m_key == key:
        node.lease_start.pop(kp, None)  # a matching key stops the lease timer
        return ALLOW
    level = pi.m_key_protect_bits
    if method == Method.GET and level <= 1:
        return ALLOW if level == 0 else ALLOW_HIDDEN  # not a violation: the timer is untouched
    pi.m_key_violations = min(pi.m_key_violations + 1, 0xFFFF)
    if pi.m_key_lease_period and kp not in node.lease_start:
        node.lease_start[kp] = now  # started by the first violation; later ones do not restart it
    return REFUSE
