"""A tiny C writer: indented lines and brace blocks, and fresh-name generation."""
from __future__ import annotations

import contextlib


class Writer:
    def __init__(self) -> None:
        self._lines: list[str] = []
        self._depth = 0

    def line(self, text: str = "") -> None:
        self._lines.append(("    " * self._depth + text) if text else "")

    def lines(self, text: str) -> None:
        for t in text.splitlines():
            self.line(t)

    def open(self, text: str) -> None:
        """A line that opens a brace (what follows is indented one step deeper)."""
        self.line(text)
        self._depth += 1

    def close(self, text: str = "}") -> None:
        self._depth -= 1
        self.line(text)

    def reopen(self, text: str) -> None:
        """A line that closes a brace and opens another, e.g. ``} else {``."""
        self._depth -= 1
        self.line(text)
        self._depth += 1

    @contextlib.contextmanager
    def block(self, opener: str, closer: str = "}"):
        self.line(opener)
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            self.line(closer)

    def mark(self) -> tuple[int, int]:
        """Where the next line goes (for ``insert``)."""
        return len(self._lines), self._depth

    def insert(self, at: tuple[int, int], *texts: str) -> None:
        """Lines at a position ``mark`` returned earlier, in order (e.g. declarations whose
        count is known only after the body is written)."""
        index, depth = at
        self._lines[index:index] = ["    " * depth + t for t in texts]

    def __str__(self) -> str:
        return "\n".join(self._lines) + "\n"


class Namer:
    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def fresh(self, prefix: str) -> str:
        n = self._counts.get(prefix, 0)
        self._counts[prefix] = n + 1
        return f"{prefix}{n}"
