#!/usr/bin/env python3
"""CPU per job of the jobs_e2e bench's PostgreSQL runs, by process.

Runs a jobs_e2e bench binary (its arguments follow) and prints, for each PostgreSQL run, the
user + system CPU seconds the bench process (router, driver, in-process clients) and all
PostgreSQL processes used from the end of the SQLite run before it to the end of its own
(the PostgreSQL run's setup included: measure it with JOBS_E2E_N=16 and subtract).

  JOBS_E2E_MODES=single scripts/bench/jobs_cpu_split.py target/release/deps/jobs_e2e-HASH --bench
"""
import os
import subprocess
import sys

HZ = os.sysconf("SC_CLK_TCK")


def cpu(pid):
    """User + system seconds of a process (its exited threads included)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / HZ
    except (OSError, IndexError, ValueError):
        return 0.0


def postgres():
    total = 0.0
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/comm") as f:
                    if f.read().strip() in ("postgres", "postmaster"):
                        total += cpu(int(d))
            except OSError:
                pass
    return total


def main():
    n = int(os.environ.get("JOBS_E2E_N", "5000"))
    p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, text=True)
    mark = None
    for line in p.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        if line.startswith("sqlite"):
            mark = (cpu(p.pid), postgres())
        elif line.startswith("postgres") and mark:
            bench, pg = cpu(p.pid) - mark[0], postgres() - mark[1]
            print(
                f"   CPU: bench process {bench:.2f} s ({bench / n * 1e6:.0f} us/job), "
                f"PostgreSQL {pg:.2f} s ({pg / n * 1e6:.0f} us/job)"
            )
    sys.exit(p.wait())


if __name__ == "__main__":
    main()
