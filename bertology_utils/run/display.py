"""What ``bertology run`` shows while notebooks run: each one's section, elapsed and expected time.

One status line per running notebook: its place in the run, the markdown heading of the cell it is
executing (:func:`notebook_sections`), the time since it started and, when an earlier run of the same
notebook with the same parameters finished (:func:`expected_seconds`, from the run.json files under
the results root), how long that one took::

    [7/9] 07_head_roles: 4. Pruning with L0-penalised Hard Concrete gates (3:12 elapsed, ~26:40 expected)

On a terminal the lines are redrawn in place every second. Elsewhere (a CI log, a file) nothing is
redrawn: the same lines are printed every ``interval`` seconds, so a log grows by a few lines a minute.
The lines a notebook prints when it starts and ends are printed either way.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from bertology_utils.run.results import RUN_FILE

__all__ = ["RunDisplay", "notebook_sections", "expected_seconds", "format_duration", "LOG_INTERVAL_S"]

#: Seconds between status lines when the output is not a terminal.
LOG_INTERVAL_S = 60.0
#: Seconds between redraws on a terminal.
_REDRAW_S = 1.0
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
_CLEAR_LINE = "\x1b[2K"
_UP = "\x1b[F"


def notebook_sections(cells: list[Mapping]) -> list[str | None]:
    """For each cell, the last markdown heading at or above it (its section); None above the first heading."""
    sections: list[str | None] = []
    current = None
    for cell in cells:
        if cell.get("cell_type") == "markdown":
            source = cell.get("source", "")
            headings = _HEADING.findall(source if isinstance(source, str) else "".join(source))
            if headings:
                current = re.sub(r"[*_`]", "", headings[-1])  # a heading's markup says nothing in a status line
        sections.append(current)
    return sections


def expected_seconds(results_root: Path, name: str, parameters: Mapping, stated: float | None = None) -> float | None:
    """How long notebook ``name`` is expected to take: as long as it took in the latest run under
    ``results_root`` that ran it with exactly ``parameters`` and finished it (status ok or skipped), else
    ``stated`` (the time its metadata states); None when neither is known.

    The one estimate of a notebook's time: the harness starts the longest first by it, and the progress
    lines show it measured (without ``stated``). Failed and interrupted runs do not count: they stopped
    early. Unreadable run.json files are passed over.
    """
    wanted = _plain(parameters)
    latest: tuple[dt.datetime, float] | None = None
    for path in results_root.glob(f"*/{RUN_FILE}"):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            for entry in record.get("notebooks", []):
                if entry.get("name") != name or entry.get("status") not in ("ok", "skipped"):
                    continue
                if _plain(entry.get("parameters") or {}) != wanted:
                    continue
                started = dt.datetime.fromisoformat(entry.get("started") or record["started"])
                if started.tzinfo is None:
                    started = started.astimezone()
                if latest is None or started > latest[0]:
                    latest = (started, float(entry["duration_s"]))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return stated if latest is None else latest[1]


def _plain(parameters: Mapping) -> str:
    """Parameters as run.json holds them (tuples become lists...), comparable whatever their key order."""
    return json.dumps(parameters, sort_keys=True, default=str)


def format_duration(seconds: float) -> str:
    """``75`` -> ``1:15``, ``3725`` -> ``1:02:05``."""
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


@dataclass
class _Running:
    label: str  # "[i/n] stem"
    started: float
    expected: float | None
    section: str | None = None


class RunDisplay:
    """The status lines of the notebooks running now (see the module docstring); safe to call from the
    threads that run notebooks. ``tty`` defaults to whether ``stream`` is a terminal; off a terminal,
    status lines come every ``interval`` seconds (default :data:`LOG_INTERVAL_S`). ``clock`` and the
    explicit :meth:`tick` are for tests."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        tty: bool | None = None,
        interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        if tty is None:  # a dumb terminal cannot move the cursor: it gets the log's lines
            tty = getattr(self.stream, "isatty", lambda: False)() and os.environ.get("TERM") != "dumb"
        self.tty = bool(tty)
        self.interval = _REDRAW_S if self.tty else LOG_INTERVAL_S if interval is None else interval
        self.clock = clock
        self.running: dict[str, _Running] = {}
        self.lock = threading.Lock()
        self.drawn = 0  # status lines on the terminal now, below everything printed
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def __enter__(self) -> RunDisplay:
        self.thread = threading.Thread(target=self._loop, name="bertology-run-display", daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join()
        with self.lock:
            self._erase()
            self.stream.flush()

    def started(self, name: str, label: str, expected: float | None) -> None:
        """Notebook ``name`` started; ``label`` heads its lines, ``expected`` is :func:`expected_seconds`."""
        with self.lock:
            self.running[name] = _Running(label, self.clock(), expected)
            if expected is None:
                self._print(f"{label} ...")
            else:
                self._print(
                    f"{label} ... (~{format_duration(expected)} expected from the last run with these parameters)"
                )

    def section(self, name: str, section: str | None) -> None:
        """Notebook ``name`` is executing a cell of ``section``."""
        with self.lock:
            running = self.running.get(name)
            if running is not None and section is not None:
                running.section = section

    def finished(self, name: str, line: str) -> None:
        """Notebook ``name`` ended: its status lines go, ``line`` is printed."""
        with self.lock:
            self.running.pop(name, None)
            self._print(line)

    def status_lines(self) -> list[str]:
        """One line per running notebook: label, section, elapsed and expected time."""
        now = self.clock()
        lines = []
        for running in self.running.values():
            times = f"{format_duration(now - running.started)} elapsed"
            if running.expected is not None:
                times += f", ~{format_duration(running.expected)} expected"
            section = f": {running.section}" if running.section else ""
            lines.append(f"{running.label}{section} ({times})")
        return lines

    def tick(self) -> None:
        """Redraw the status lines (terminal) or print them (log)."""
        with self.lock:
            if self.tty:
                self._erase()
                self._draw()
            else:
                for line in self.status_lines():
                    self.stream.write(f"{line}\n")
            self.stream.flush()

    def _loop(self) -> None:
        while not self.stop.wait(self.interval):
            self.tick()

    def _print(self, line: str) -> None:
        """``line`` above the status lines, which follow it on a terminal."""
        self._erase()
        self.stream.write(f"{line}\n")
        if self.tty:
            self._draw()
        self.stream.flush()

    def _draw(self) -> None:
        width = shutil.get_terminal_size((120, 24)).columns - 1  # the last column would wrap on some terminals
        lines = [line if len(line) <= width else line[: width - 1] + "…" for line in self.status_lines()]
        self.stream.write("".join(f"{line}\n" for line in lines))
        self.drawn = len(lines)

    def _erase(self) -> None:
        if self.tty and self.drawn:
            self.stream.write((_UP + _CLEAR_LINE) * self.drawn)
            self.drawn = 0
