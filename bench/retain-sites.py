"""Reads `perf script -F comm,event,ip,sym,dso` with call chains of the swift_retain /
swift_release probes and prints the functions that called them most on the gateway's thread: each
sample's first frame outside libswiftCore, demangled, with its count over the requests served.

    perf script ... | python3 bench/retain-sites.py REQUESTS [TOP] [THREAD]

THREAD is the start of the thread's name: the allocations harness's gateway loop is the third
event loop group it makes, `NIO-ELT-2-#1` (the backend's is `NIO-ELT-1-#1`).
"""
import collections
import subprocess
import sys

requests = int(sys.argv[1])
top = int(sys.argv[2]) if len(sys.argv) > 2 else 30
thread = sys.argv[3] if len(sys.argv) > 3 else "NIO-ELT-2-#"
counts = {"swift_retain": collections.Counter(), "swift_release": collections.Counter()}
event, caller = None, None


def finish():
    if event is not None and wanted:
        counts[event][caller or "?"] += 1


wanted = False


for line in sys.stdin:
    if not line.strip():
        continue
    if "probe_libswiftCore:" in line:
        finish()
        event = "swift_release" if "swift_release" in line else "swift_retain"
        wanted = line.lstrip().startswith(thread)
        caller = None
        continue
    if caller is not None:
        continue
    parts = line.split(None, 1)
    rest = parts[1] if len(parts) > 1 else ""
    if "libswiftCore" in rest:
        continue
    symbol = rest.rsplit(" (", 1)[0]
    caller = symbol.split("+0x")[0] or "?"
finish()

names = sorted({name for counter in counts.values() for name in counter})
demangled = subprocess.run(
    ["swift", "demangle", "--simplified", "--compact"], input="\n".join(names), capture_output=True, text=True
).stdout.splitlines()
readable = dict(zip(names, demangled)) if len(demangled) == len(names) else {}
for event, counter in counts.items():
    total = sum(counter.values())
    print(f"  {event}: {total / requests:.1f} a request")
    for name, count in counter.most_common(top):
        print(f"    {count / requests:8.1f}  {readable.get(name, name)[:150]}")
