"""The process tree under a PID, read from /proc (injectable root for tests)."""

from __future__ import annotations

from pathlib import Path


def parent_map(proc_root: Path = Path("/proc")) -> dict[int, int]:
    """pid -> parent pid for every process visible under ``proc_root``."""
    parents: dict[int, int] = {}
    for entry in Path(proc_root).iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # the process ended while we looked
            continue
        # "pid (comm) state ppid ..." -- comm may hold spaces and parentheses: split after the last ')'
        rest = stat[stat.rfind(")") + 2 :].split()
        if len(rest) >= 2 and rest[1].lstrip("-").isdigit():
            parents[int(entry.name)] = int(rest[1])
    return parents


def descendants(pid: int, proc_root: Path = Path("/proc")) -> set[int]:
    """``pid`` and every process below it."""
    children: dict[int, list[int]] = {}
    for child, parent in parent_map(proc_root).items():
        children.setdefault(parent, []).append(child)
    found = {pid}
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def process_name(pid: int, proc_root: Path = Path("/proc")) -> str:
    try:
        return (Path(proc_root) / str(pid) / "comm").read_text().strip() or str(pid)
    except OSError:
        return str(pid)
