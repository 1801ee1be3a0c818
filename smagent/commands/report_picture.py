"""The picture `smagent report` draws: the fabric itself, each link coloured by its load
relative to the ideal.

Switches sit where `smagent.commands.report_layout` puts them (tree levels, a grid, layers). Every
cable between two drawn nodes is one line in two halves: the half at a node is coloured
by the load that node sends over it divided by the ideal of its link group (1 =
balanced, drawn neutral grey; above, red; below, blue), so where traffic piles up and in
which direction shows at a glance. Parallel cables between two nodes are one line (the
worst of them), and a big tree is drawn by groups (pods and their levels,
`layout.aggregate`), each line the worst of the cables it stands for. The worst halves
above the ideal are labelled load/ideal. Hosts are drawn as dots under their switch
only on small fabrics.
"""
from __future__ import annotations

from smagent.commands import report_layout as layoutmod

LABELS = 8  # worst links labelled
SCALE_AT_LEAST = 1.25  # the colour scale's top (load / ideal) at least
HOST_DOTS_UP_TO = 300  # hosts drawn one by one up to this many
NAMES_UP_TO = 64  # switch names written up to this many drawn nodes


def _ratio(load: float, ideal: float) -> float:
    if ideal <= 0:
        return 0.0 if load <= 0 else 2.0
    return load / ideal


def model(b: dict):
    """(layout, node of each switch, node positions, node sizes, lines) from balance
    figures: lines map (node a, node b) -> {a: worst (ratio, load, ideal) a sends, b: ...}."""
    ids = [s[0] for s in b["switches"]]
    hosts = {s[0]: s[2] for s in b["switches"]}
    cables = [(r[0], r[2]) for r in b["link_loads"]]
    lay = layoutmod.compute(ids, cables, hosts)
    node = {s: s for s in ids}
    if lay.kind == "tree" and len(ids) > layoutmod.AGGREGATE_ABOVE:
        node = layoutmod.aggregate(lay, layoutmod.neighbours(ids, cables))
    members: dict = {}
    for s in ids:
        members.setdefault(node[s], []).append(s)
    pos = {n: (sum(lay.pos[s][0] for s in ms) / len(ms), lay.pos[ms[0]][1]) for n, ms in members.items()}
    lines: dict = {}
    for frm, _fp, to, _tp, load, ideal in _grid_ideals(lay, b["link_loads"]):
        a, z = node[frm], node[to]
        if a == z:
            continue
        key = (a, z) if str(a) < str(z) else (z, a)
        ends = lines.setdefault(key, {"cables": 0})
        ends["cables"] += 1
        worst = ends.get(a)
        r = _ratio(load, ideal)
        if worst is None or r > worst[0]:
            ends[a] = (r, load, ideal)
    for ends in lines.values():
        ends["cables"] //= 2  # both directions counted
    return lay, node, pos, {n: len(ms) for n, ms in members.items()}, hosts, lines


def _grid_ideals(lay, records: list) -> list:
    """On a grid the ideal is per dimension: shortest routes cross each dimension a fixed
    number of times whatever the engine, so the routes over a dimension's links divided by
    their number is what each would carry spread perfectly (a longer dimension carries
    more). Elsewhere the records' own ideal (per tree level group)."""
    if lay.kind != "grid":
        return records
    def dim(r):
        return 0 if lay.coords[r[0]][1] == lay.coords[r[2]][1] else 1
    total, count = [0.0, 0.0], [0, 0]
    for r in records:
        total[dim(r)] += r[4]
        count[dim(r)] += 1
    mean = [round(total[d] / count[d], 2) if count[d] else 0.0 for d in (0, 1)]
    lay.ideals = tuple(mean)
    return [r[:5] + [mean[dim(r)]] for r in records]


def _halves(lay, pos: dict, a, z):
    """The two halves of the line a-z: ((a's start, mid), (z's start, mid)). On a torus a
    wrap-around cable is two stubs pointing off the grid; in layers a cable within one
    rank bows upwards."""
    (ax, ay), (zx, zy) = pos[a], pos[z]
    if lay.kind == "grid" and (abs(ax - zx) > 1 or abs(ay - zy) > 1):
        dx = 0.0 if ax == zx else (0.45 if ax > zx else -0.45)
        dy = 0.0 if ay == zy else (0.45 if ay > zy else -0.45)
        return ((ax, ay), (ax + dx, ay + dy)), ((zx, zy), (zx - dx, zy - dy))
    mx, my = (ax + zx) / 2, (ay + zy) / 2
    if lay.kind != "grid" and ay == zy:
        my += 0.35
    return ((ax, ay), (mx, my)), ((zx, zy), (mx, my))


def figure(b: dict, title: str, unit: str = "routes"):
    """The matplotlib Figure and what it shows: {"kind", "nodes", "lines", "halves",
    "labelled", "worst": (ratio, load, ideal, where) or None}."""
    from matplotlib import colors, pyplot as plt
    from matplotlib.collections import LineCollection
    lay, node, pos, size, hosts, lines = model(b)
    segs, vals, worst = [], [], []
    for (a, z), ends in lines.items():
        for end, half in zip((a, z), _halves(lay, pos, a, z)):
            if end in ends:
                r, load, ideal = ends[end]
                segs.append(half)
                vals.append(r)
                worst.append((r, load, ideal, half, end, a if end == z else z, ends["cables"]))
    big = len(pos) > NAMES_UP_TO
    fig, ax = plt.subplots(figsize=(16, 9) if big or lay.kind != "grid" else (12, 10), layout="constrained")
    # the scale reaches at least 1.25 x ideal, so that a few overloaded cables stand out
    # red among balanced ones; a balanced fabric is all the neutral centre whatever the scale
    top = max(SCALE_AT_LEAST, max(vals, default=1.0))
    norm = colors.TwoSlopeNorm(vmin=0.0, vcenter=1.0, vmax=top)
    order = sorted(range(len(segs)), key=lambda n: vals[n])  # the hottest drawn last, on top
    base = 3.0 if len(segs) < 200 else 1.6 if len(segs) < 2000 else 0.8
    widths = [base * (1 + 1.5 * min(1.0, max(0.0, (vals[n] - 1) / (top - 1)))) for n in order]
    coll = LineCollection([segs[n] for n in order], array=[vals[n] for n in order], cmap="coolwarm", norm=norm,
                          linewidths=widths, gid="links", zorder=1)
    ax.add_collection(coll)
    missing = _missing(ax, lay, pos, node, b)
    fig.colorbar(coll, ax=ax, shrink=0.8, label=f"{unit} per link / ideal (1 = balanced)")
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    dot = [max(12.0, min(120.0, 6000.0 / max(len(pos), 1))) * (1 + (size[n] > 1)) for n in pos]
    ax.scatter(xs, ys, s=dot, c="#444444", zorder=3, gid="switches")
    _names(ax, lay, pos, size, node, b, big)
    _hosts(ax, lay, pos, node, hosts, big or len(pos) < len(node))
    labelled = _labels(ax, worst, unit)
    _frame(ax, lay, pos, size)
    ax.set_title(title, fontsize=11)
    best = max(worst, key=lambda w: w[0], default=None)
    name = {s[0]: s[1] for s in b["switches"]}
    label = (lambda n: name.get(n, str(n))) if len(pos) == len(node) else _group_name
    return fig, {"kind": lay.kind, "nodes": len(pos), "lines": len(lines), "halves": len(segs),
                 "labelled": labelled, "aggregated": len(pos) < len(node), "grid_ideals": lay.ideals,
                 "missing_cables": missing,
                 "worst": None if best is None else (best[0], best[1], best[2], f"{label(best[4])} -> {label(best[5])}")}


def _missing(ax, lay, pos, node, b) -> int:
    """Cables the fabric's shape says are missing (`layout.missing_cables`), dashed: a damaged
    tree shows where it is damaged. Returns how many."""
    from matplotlib.collections import LineCollection
    ids = [s[0] for s in b["switches"]]
    gone = layoutmod.missing_cables(lay, layoutmod.neighbours(ids, [(r[0], r[2]) for r in b["link_loads"]]))
    segs = sorted({(pos[node[a]], pos[node[z]]) for a, z in gone if node[a] != node[z]})
    if segs:
        ax.add_collection(LineCollection(segs, colors="#888888", linestyles="dashed", linewidths=1.0,
                                         gid="missing", zorder=0))
    return len(gone)


def _group_name(group) -> str:
    """A group of `layout.aggregate`: (level, pod) or (level, "top", positions)."""
    if group[1] == "top":
        return f"level {group[0]} group serving position {','.join(map(str, group[2]))}"
    return f"level {group[0]} of pod {group[1]}"


def _names(ax, lay, pos, size, node, b, big) -> None:
    """Switch names (small fabrics), or, drawn by groups, a short name per group (pod N,
    or the pod positions a top group serves)."""
    name = {s[0]: s[1] for s in b["switches"]}
    grouped = len(pos) < len(node)
    if big:
        return
    for n, (x, y) in pos.items():
        text = _group_label(n) if grouped else name.get(n, str(n))
        ax.annotate(text, (x, y), xytext=(0, 6), textcoords="offset points", fontsize=7, ha="center", zorder=4)


def _group_label(group) -> str:
    if group[1] == "top":
        return "pos " + ",".join(map(str, group[2]))
    return f"pod {group[1]}"


def _hosts(ax, lay, pos, node, hosts, big) -> None:
    """Hosts as dots under their switch (trees and layers, small fabrics drawn switch by switch)."""
    total = sum(hosts.values())
    if big or lay.kind == "grid" or not total or total > HOST_DOTS_UP_TO:
        return
    gap = 0.8 / max(len([p for p in pos.values() if p[1] == 1.0]), 1)
    xs, ys = [], []
    for s, h in hosts.items():
        x, y = pos[node[s]]
        for i in range(h):
            xs.append(x + (i - (h - 1) / 2) * gap / max(h, 1))
            ys.append(y - 0.2)
    ax.scatter(xs, ys, s=6, c="#999999", marker="s", zorder=2, gid="hosts")


def _labels(ax, worst: list, unit: str) -> int:
    over: list = []
    per_node: dict = {}  # at most two labels on the lines leaving one node: spread over the picture
    for w in sorted((w for w in worst if w[0] > 1.001), key=lambda w: -w[0]):
        if per_node.get(w[4], 0) < 2 and len(over) < LABELS:
            per_node[w[4]] = per_node.get(w[4], 0) + 1
            over.append(w)
    for n, (r, load, ideal, ((x0, y0), (x1, y1)), _frm, _to, cables) in enumerate(over):
        more = f" x{cables}" if cables > 1 else ""  # a line standing for several cables: the worst of them
        at = 0.3 + 0.4 * (n % 3) / 2  # staggered along the half: labels of neighbouring halves apart
        ax.annotate(f"{_short(load)}/{_short(ideal)}{more}", (x0 + (x1 - x0) * at, y0 + (y1 - y0) * at), fontsize=7,
                    color="#880000",
                    ha="center", zorder=5, bbox={"boxstyle": "round,pad=0.15", "fc": "white", "alpha": 0.8, "lw": 0})
    return len(over)


def _short(x: float) -> str:
    """630, 11,646, 2.1 G: a label stays short whatever the unit."""
    for size, suffix in ((1e12, " T"), (1e9, " G"), (1e6, " M")):
        if abs(x) >= size:
            return f"{x / size:.3g}{suffix}"
    return f"{x:,.4g}" if x != int(x) else f"{int(x):,}"


def _row_note(y: float, pos: dict, size: dict) -> str:
    """Under a level's name, drawn by groups: how many switches in how many groups."""
    row = [n for n, p in pos.items() if p[1] == y]
    switches = sum(size[n] for n in row)
    return f"\n{switches:,} switches\n{len(row)} groups" if switches > len(row) else ""


def _frame(ax, lay, pos, size) -> None:
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    pad = 0.7 if lay.kind == "grid" else 0.03
    ax.set_xlim(min(xs) - pad, max(xs) + pad)
    ax.set_ylim(min(ys) - (0.7 if lay.kind == "grid" else 0.6), max(ys) + 0.6)
    if lay.kind == "grid":
        ax.set_aspect("equal")
        ax.set_xlabel(f"{lay.size[0]} x {lay.size[1]} {'torus' if any(lay.wrap) else 'mesh'} "
                      "(coordinates recovered from the cabling)")
        ax.set_xticks([])
        ax.set_yticks([])
    else:
        ax.set_xticks([])
        ax.set_yticks(sorted(set(ys)), [f"level {int(y)}" + _row_note(y, pos, size) for y in sorted(set(ys))])
        ax.set_xlabel("fat tree: leaves at the bottom" if lay.kind == "tree" else
                      "layers by distance from the switches that carry hosts")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
