"""What an admin hands the SM and the files it keeps: partitions.conf (`partitions`), a QoS
policy (`qospolicy`), link options (`linkoptions`), M_Keys and guid2mkey (`mkeys`), the state
directory and checked file arguments (`files`), atomic replacement of a file (`atomicfile`)."""
