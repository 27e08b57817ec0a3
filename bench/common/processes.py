"""Process trees and their memory, from /proc: shared by the bench/*/run scripts."""
import os


def descendants(root):
    """(pid, parent) of every process below ROOT."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry))
        except OSError:
            continue
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            found.append((child, pid))
            todo.append(child)
    return found


def statm(pid):
    try:
        with open("/proc/%d/statm" % pid) as statm_file:
            return statm_file.read()
    except OSError:
        return ""


def resident_mib(pid, parent):
    """PID's resident memory in MiB; 0 for a child not yet executed."""
    own = statm(pid)
    # A worker being started (posix_spawn) shares its parent's memory until
    # it executes: the same statm, which is the parent's, not a worker's.
    if not own or own == statm(parent):
        return 0.0
    return int(own.split()[1]) * os.sysconf("SC_PAGE_SIZE") / (1 << 20)


def environment(pid):
    """PID's initial environment as a dict (empty if unreadable)."""
    try:
        with open("/proc/%d/environ" % pid, "rb") as environ:
            entries = environ.read().split(b"\0")
    except OSError:
        return {}
    variables = {}
    for entry in entries:
        name, _, value = entry.partition(b"=")
        if name:
            variables[name.decode(errors="replace")] = value.decode(errors="replace")
    return variables
