"""A long-running Subnet Manager: the SM state machine, traps, the daemon loop, its control socket."""
