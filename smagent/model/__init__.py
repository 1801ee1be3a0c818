"""The base every layer stands on: the subnet model (`subnet`: what the SM knows of its
fabric, one immutable value) and its builder (`topology`: the nodes and cables discovery
fills), the fabric of topology files (`fabric`: nodes, ports, cables) and its files
(`netfile`, ibsim's topology format; `lftdump`, ibroute and dump_lfts text; `topogen`,
generated topologies), and the order OpenSM keeps GUIDs and P_Keys in (`order`)."""
