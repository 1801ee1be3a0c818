"""The base every layer stands on: the fabric model (`fabric`: nodes, ports, cables) and its
files (`netfile`, ibsim's topology format; `lftdump`, ibroute and dump_lfts text;
`topogen`, generated topologies), the subnet the SM programmed as the SA publishes it
(`subnet`), and the order OpenSM keeps GUIDs and P_Keys in (`order`)."""
