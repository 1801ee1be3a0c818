"""Every click command of the `smagent` CLI, one module per family (decode, query, topology,
discover, sweep/plan/apply, lft/mft tables, rft, lft backup/restore, verify), over
`smagent.api`; `common` holds what they share, the error translation included.
`smagent.cli` builds the root group and registers them."""
