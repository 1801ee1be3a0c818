"""Draw `smagent report` pictures of four fabrics swept in the in-process simulator: a
648-host 2-level fat tree, a 1,024-host 3-level fat tree (both ftree), an 8x6 torus with
two hosts a switch (dfsssp), and the 648-host tree damaged (a spine and four leaf-spine
cables gone, ftree). Each is swept, verified (its link loads saved as `verify --json`
saves them) and drawn by the `smagent report --from-json` command itself.

    python examples/report_pictures.py OUTDIR

Needs matplotlib (`pip install 'smagent[report]'`); about a minute on two cores."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import smagent
from smagent.model import netfile, topogen


def fabrics():
    """(name, engine, Fabric) of each picture."""
    ft2 = topogen.fat_tree_2(36)  # leaf i port 19+j <-> spine j port i+1
    gone = [(("L7", 20), ("S1", 8)), (("L7", 21), ("S2", 8)), (("L3", 22), ("S3", 4)), (("L12", 25), ("S6", 13))]
    return [
        ("ft2-648", "ftree", ft2),
        ("ft3-1024", "ftree", topogen.fat_tree_3(16)),
        ("torus-8x6", "dfsssp", topogen.torus_2d(8, 6, hosts_per_switch=2)),
        ("ft2-648-damaged", "ftree", topogen.variant(ft2, drop_nodes={"S5"}, drop_links=gone)),
    ]


def draw(name: str, engine: str, fabric, outdir: str, tmp: str) -> None:
    net = os.path.join(tmp, f"{name}.net")
    netfile.save(fabric, net)
    with smagent.connect("sim", topology=net) as session:
        result = session.sweep(routing=engine)
        if not result.ok:
            sys.exit(f"{name}: the sweep left problems: {result.problems[:3]}")
        balance = session.verify(mcast=False).balance
    saved = os.path.join(tmp, f"{name}.json")
    with open(saved, "w") as f:
        json.dump({"balance": balance}, f)
    out = os.path.join(outdir, f"{name}.png")
    subprocess.run([sys.executable, "-m", "smagent", "report", "--from-json", saved, "--name", name,
                    "--engine", engine, out], check=True)


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    os.makedirs(sys.argv[1], exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, engine, fabric in fabrics():
            draw(name, engine, fabric, sys.argv[1], tmp)


if __name__ == "__main__":
    main()
