"""What the command modules share: the Command record, exit statuses, summaries of a store."""

from __future__ import annotations

import argparse
import contextlib
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from bertology_utils.attention.store import AttentionStore

__all__ = [
    "Command",
    "EXIT_OK",
    "EXIT_FAILED",
    "EXIT_USAGE",
    "SHOW_SKIPPED",
    "plural",
    "store_lines",
    "Terminated",
    "sigterm_as_ctrl_c",
    "interrupting_signal",
]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
SHOW_SKIPPED = 10  # skipped indices listed in a summary


@dataclass(frozen=True)
class Command:
    name: str
    help: str  # one line, for `bertology --help`
    add_arguments: Callable[[argparse.ArgumentParser], None]
    handler: Callable[[argparse.Namespace], int]  # returns the exit status
    epilog: str = ""  # examples, for `bertology NAME --help`
    description: str = ""  # a paragraph for `bertology NAME --help` (default: help)


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def store_lines(store: AttentionStore) -> list[str]:
    """A store's summary as indented lines (items, extracted, skipped with indices, missing, path)."""
    s = store.summary()
    lines = [
        f"store: {s['path']}",
        f"  {s['corpus']} under {s['model']}, from_rule {s['from_rule']}",
        f"  items {s['items']}: extracted {s['extracted']}, skipped {s['skipped']}, missing {s['missing']}"
        f" ({plural(s['shards'], 'shard')})",
    ]
    skipped = sorted(store.skipped())
    if skipped:
        limit = store.metadata["conversion"]["max_tokens"]
        shown = ", ".join(map(str, skipped[:SHOW_SKIPPED]))
        more = f" ... ({len(skipped) - SHOW_SKIPPED} more)" if len(skipped) > SHOW_SKIPPED else ""
        lines.append(
            f"  {plural(len(skipped), 'item')} longer than {limit} tokens "
            f"{'was' if len(skipped) == 1 else 'were'} skipped: indices {shown}{more}"
        )
    if s["missing"]:
        gaps = ", ".join(f"[{a}, {b})" for a, b in store.missing_ranges()[:SHOW_SKIPPED])
        lines.append(f"  missing items {gaps} are not extracted yet (other shards? join them with bertology merge)")
    return lines


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised as Ctrl-C is, so that a command stopped either way cleans up the same way."""


@contextlib.contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    def terminate(_signum: int, _frame: FrameType | None) -> NoReturn:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def interrupting_signal(exc: KeyboardInterrupt) -> signal.Signals:
    """SIGTERM or SIGINT: which one ``exc`` stands for (the exit status is 128 + its number)."""
    return signal.SIGTERM if isinstance(exc, Terminated) or isinstance(exc.__cause__, Terminated) else signal.SIGINT
