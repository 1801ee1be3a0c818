"""Link configuration: what an SM writes into every port besides LIDs and states, as
OpenSM's link manager, LID manager, QoS manager and P_Key manager do, diffed against
what the ports hold so only differences are written.

Per port (PortInfo, folded into the PortInfo Sets the sweep sends anyway):

* end ports (CA ports, switch port 0): GidPrefix (the subnet prefix) and SubnetTimeout;
* ports with a link: NeighborMTU = the smaller MTUCap of the two ends, capped by
  `max_mtu`; OperationalVLs = the smaller VLCap of the two ends, capped by `max_vls`
  (OpenSM: max_op_vls 5, i.e. VL0-14; a 0 from a non-compliant port counts as 1);
* switch ports with a link: HOQLife and VLStallCount, the "leaf" values (16, 7) on
  ports facing a CA or router, the others (18, 7) between switches (OpenSM's defaults);
* with QoS tables on: VLHighLimit (OpenSM's qos_high_limit, 0).

Per-port tables (their own Sets, written before any port goes ACTIVE):

* SLtoVLMappingTable: every CA port, every switch (input, output) pair whose output
  port has a link (every input port, as OpenSM: a port without a link now may get one). OpenSM's default map (SL i -> VL i, SL15 -> VL7)
  with each VL masked into the VLs the port runs, as OpenSM's QoS manager does; VL15
  (drop) is kept. Only where the port says IsSLMappingSupported. Of a switch output
  port's tables one is read (from a linked input): all are written when it differs
  (see `_switch_wants`).
* VLArbitrationTable: the low and high tables of every such port (switch output
  ports, CA ports) with VLCap above VL0, OpenSM's defaults truncated to the port's
  VLArbitrationLow/HighCap, VLs masked likewise.
* P_KeyTable: without partitions the default partition 0xFFFF (full member) at index 0
  of every end port (CA ports, switch port 0), where OpenSM's P_Key manager puts it,
  other entries left as they are; with partitions every block of every end port's
  table and of the enforcing switch ports facing them (`pkeys`).

Which ports get SL2VL and VLArb tables (`LinkOptions.qos`). OpenSM writes them only with
QoS on (`opensm -Q`), on every port and every switch (input, output) pair: on a 648-host
fat tree that is 8 times the SMPs of the rest of a bring-up. Without -Q it leaves what
the port holds, and on a port at reset values (`smagent.sim.nodes`: identity SL2VL, zero
VLArb) SLs 1-15 land on VLs the port does not run. So there are three modes:

* ``True`` ("always", `--qos`): OpenSM's QoS tables everywhere, as `opensm -Q`;
* ``False`` ("never", `--no-qos`): tables left alone, as `opensm -o`;
* ``"auto"`` (the default): read a probe per CA port and per switch (per group of its
  output ports running the same VLs; `qos_units` says why one port speaks for its
  switch, `QosUnit.probe` why its SL2VL table speaks for its VLArb tables) and, where
  the probe is unusable (an SL, SL15 included, maps to VL15 or a VL at or above the VLs
  the port will run: `codes.unmapped_sls`, the rule `verify` applies; on a port without
  an SL2VL table, VL0 has no weight in its VLArb tables: `codes.starved_vls`), plan for
  those ports exactly what "always" plans. Usable tables
  are left as they are, as `opensm -o` does. VLHighLimit is left too (its reset value,
  0, is OpenSM's default). Tables of one's own (`sl2vl`/`vlarb_*` not OpenSM's) make
  "auto" "always": a usable table would otherwise stay in their place.

A switch's port 0 has tables only where SwitchInfo.EnhancedPort0 says it is enhanced:
there it gets what OpenSM's QoS manager leaves (`qos._sw0_wants`: the (input, 0) SL2VL
pairs from the swe class, the pair (0, 0), its VLArb and VLHighLimit from sw0), and
"auto" probes it as a unit of its own; a base port 0 is never asked.

ibsim pre-sets SL i -> VL i (SL15 -> VL7) on links running VL0-7, so SLs 8-14 are
unusable there and "auto" repairs every port, as -Q does; on a fabric an SM already
configured, "auto" costs its probes only: one Get a CA port and a switch.

Every table Set goes through the one apply path (`smagent.fdb.apply`): what it
overwrites (the value read to diff) is backed up and the Sets are journalled.

Fields deliberately not written: RespTimeValue (read-only), LocalPhyErrors /
OverrunErrors thresholds (ibsim does not store them; a value a port cannot hold would
be rewritten by every sweep), M_Key fields (`smagent.config.mkeys`). SubnetTimeout rides
along: it is written in every PortInfo Set that goes out anyway, but a difference in
it alone does not trigger one, because ibsim (and so possibly other SMAs) ignore it.

Modules: `options` (LinkOptions and their parsing), `portinfo` (the PortInfo link fields),
`qos` (SL2VL and VLArb), `pkeys` (P_Key tables), `io` (what to read, reading and
diffing); the table units themselves and their Sets are `smagent.fdb.porttables`. This
package keeps every public name.
"""
from __future__ import annotations

from smagent.fdb.porttables import (LINK_TABLES, TABLES, LinkTable, TableChange, Want, check_modifier, confirmed_units,
                                    table_from_json, table_json, write)
from smagent.linkconf.io import plan_tables, read_and_diff, read_and_repair, table_wants
from smagent.config.linkoptions import (DEFAULT_SUBNET_PREFIX, OPTION_KEYS, OSM_HOQ_LIFE, OSM_LEAF_HOQ_LIFE,
                                   OSM_LEAF_VL_STALL, OSM_MAX_OP_VLS, OSM_SL2VL, OSM_SUBNET_TIMEOUT, OSM_VL_HIGH_LIMIT,
                                   OSM_VL_STALL, OSM_VLARB_HIGH, OSM_VLARB_LOW, QOS_AUTO, QOS_MODES, LinkConfigError,
                                   LinkOptions, options_from_mapping, parse_sl2vl, parse_vlarb)
from smagent.linkconf.portinfo import (CAP_SL_MAPPING, HIDDEN, LINK_FIELDS, RIDE_ALONG, SECRET_FIELDS, describe_diff,
                                    port_diff, port_fields)
from smagent.linkconf.qos import QosUnit, layers_problem, qos_units, sl2vl_table

__all__ = ["CAP_SL_MAPPING", "HIDDEN", "SECRET_FIELDS", "DEFAULT_SUBNET_PREFIX", "LINK_FIELDS", "LINK_TABLES", "LinkConfigError", "LinkOptions",
           "LinkTable", "OPTION_KEYS", "OSM_HOQ_LIFE", "OSM_LEAF_HOQ_LIFE", "OSM_LEAF_VL_STALL", "OSM_MAX_OP_VLS",
           "OSM_SL2VL", "OSM_SUBNET_TIMEOUT", "OSM_VL_HIGH_LIMIT", "OSM_VL_STALL", "OSM_VLARB_HIGH", "OSM_VLARB_LOW",
           "QOS_AUTO", "QOS_MODES", "QosUnit", "RIDE_ALONG", "TABLES", "TableChange", "Want", "check_modifier",
           "confirmed_units", "describe_diff", "options_from_mapping", "parse_sl2vl", "parse_vlarb", "plan_tables",
           "layers_problem", "port_diff", "sl2vl_table", "port_fields", "qos_units", "read_and_diff", "read_and_repair", "table_from_json", "table_json",
           "table_wants", "write"]
