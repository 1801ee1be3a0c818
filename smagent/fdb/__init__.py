"""The forwarding tables of switches: one module per table and concern.

    switch     addressing a switch (DR path or Target), its facts, the batch order of
               table SMPs, the read of NodeInfo/SwitchInfo for the table commands
    lft        LinearForwardingTable: blocks, which of them a whole-table read asks for
               (`lft_blocks_to_read`), desired image, reads, diffs, writes,
               `lft load` / `lft set` plans
    rft        RandomForwardingTable: the entry planner (cover, DefaultPort, placement,
               two-phase writes), reads, writes, `rft set` plans
    mft        MulticastForwardingTable: (block, position) units, reads, diffs, writes,
               `mft set` plans (groups and spanning trees live in smagent.planning.multicast)
    tops       SwitchInfo: the one SwitchInfo Set path (LinearFDBTop, MulticastFDBTop,
               DefaultPort, ...), with its read-back check
    porttables the per-port tables of link configuration (SL2VL, VLArb, P_Key) as
               units: `Want`, `TableChange`, their JSON, the Sets with read-back check
               (what to want is planned in smagent.linkconf)
    backup     what an apply overwrites, saved before it, and restored from it
    journal    the apply journal (what was about to be written, what came back)
    apply      the one apply path: back up, journal per chunk, write, check read-back
    ops        the table operations of `api.Session` and the CLI (show, set, load, dump,
               backup, restore), with the master-SM refusal before the first Set

Bit packing (PortMasks, RFT entries) and AttributeModifier math live in mad.forwarding.
"""
