"""Pure computation of what the sweep will write, beside routing/: LIDs (`lidassign`, and
guid2lid), multicast groups and their spanning trees (`multicast`), the SL of each path
(`pathsl`), a QoS policy's SLs over a layering engine's (`qoslayers`)."""
