"""The shell commands of README.md and docs/guide/*.md, as tests/unit/test_docs.py and
tests/live/test_docs_live.py run them.

Every line of a ```sh block is a command, except comment lines (``#`` first) and lines that
go on a command (indented). A trailing comment may carry a marker the tests obey:

* ``[exit N]``: the command exits N (default 0), e.g. `diff` finding differences;
* ``[not run: REASON]``: not run; REASON must be one of `NOT_RUN` and hold for the line
  (the tests check both), so nothing is left out silently.

Lines naming ``--transport umad`` (and the lines of a block that starts `smagent run`) need a live fabric: the live test runs them on ibsim (a
block with other programs in it, `ibsim` and diags, is run whole by bash there); every
other ``smagent`` line runs in process on the simulator, in a scratch directory.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# what may be left out, and the rule each reason must meet on its line
NOT_RUN = {
    # a fresh venv and pip installs take minutes and the network: verified by hand
    "set-up": lambda c: c.text.startswith("python3 -m venv"),
    # `smagent run` waits for SIGTERM: tests/live/test_docs_live.py starts it, waits for MASTER,
    # runs the block's other lines against it, then stops it (exit 0)
    "runs until stopped": lambda c: c.live and " run " in f" {c.text} ",
}


@dataclass(frozen=True)
class Command:
    doc: str          # path relative to the repository
    line: int         # 1-based line in the doc
    block: int        # the line of the block's opening fence
    text: str         # the command, without its comment
    comment: str
    exit_code: int
    not_run: str | None

    @property
    def argv(self) -> list[str]:
        """The arguments after ``smagent``."""
        words = shlex.split(self.text)
        assert words and words[0] == "smagent", self
        return words[1:]

    @property
    def is_smagent(self) -> bool:
        return self.text.split(maxsplit=1)[:1] == ["smagent"] and not re.search(r"&&|\||;|\$\(|&\s*$", self.text)

    @property
    def live(self) -> bool:
        return "--transport umad" in self.text

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}: {self.text}"


def docs() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs" / "guide").glob("*.md"))]


def _split_comment(line: str) -> tuple[str, str]:
    """The command and its trailing comment (a ``#`` after whitespace, outside quotes)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1:].strip()
    return line.rstrip(), ""


def commands(path: Path) -> list[Command]:
    out: list[Command] = []
    fence = None
    rel = str(path.relative_to(REPO))
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.startswith("```"):
            fence = (n if line.strip() == "```sh" else -1) if fence is None else None
            continue
        if fence is None or fence < 0 or not line.strip() or line.lstrip().startswith("#") or line[0].isspace():
            continue
        text, comment = _split_comment(line)
        m = re.search(r"\[exit (\d+)\]", comment)
        skip = re.search(r"\[not run: ([^\]]+)\]", comment)
        out.append(Command(rel, n, fence, text, comment, int(m.group(1)) if m else 0,
                           skip.group(1).strip() if skip else None))
    return out


def all_commands() -> list[Command]:
    return [c for p in docs() for c in commands(p)]


def beside_run(cmds: list[Command]) -> set[Command]:
    """The lines of a block that starts `smagent run`: they talk to it (`status`), so the live
    test runs them while it serves."""
    return {c for v in blocks(cmds).values() if any(x.not_run == "runs until stopped" for x in v)
            for c in v if c.not_run is None}


def blocks(cmds: list[Command]) -> dict[tuple[str, int], list[Command]]:
    out: dict[tuple[str, int], list[Command]] = {}
    for c in cmds:
        out.setdefault((c.doc, c.block), []).append(c)
    return out
