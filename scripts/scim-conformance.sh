#!/usr/bin/env bash
# Checks a running Switchyard's SCIM 2.0 service with an independent client: the PyPI
# conformance checker scim2-tester (installed by scripts/bootstrap.sh). It reads the
# server's discovery documents, builds its models from them, then creates, reads, lists,
# filters attributes of, replaces, patches (add, replace, remove of every writable
# attribute) and deletes Users and Groups, and checks every error is a SCIM error.
# Prints one line per check and exits non-zero when any check fails.
#
#   scripts/scim-conformance.sh http://127.0.0.1:3000 "$SCIM_TOKEN"
#
# SCIM_CONFORMANCE_VERBOSE=1 also prints why each check failed at length.
set -euo pipefail

base="${1:?usage: scim-conformance.sh BASE_URL SCIM_TOKEN}"
token="${2:?usage: scim-conformance.sh BASE_URL SCIM_TOKEN}"

if ! python3 -c 'import scim2_tester, httpx2' 2>/dev/null; then
  echo "[scim] scim2-tester is not installed (scripts/bootstrap.sh installs it)" >&2
  exit 2
fi

SCIM_BASE="${base%/}/scim/v2" SCIM_TOKEN="$token" python3 - <<'PY'
import os
import sys
from collections import Counter

from httpx2 import Client
from scim2_client.engines.httpx2 import SyncSCIMClient
from scim2_tester import Status, check_server

http = Client(
    base_url=os.environ["SCIM_BASE"],
    headers={"Authorization": f"Bearer {os.environ['SCIM_TOKEN']}"},
    timeout=30,
)
results = check_server(SyncSCIMClient(http))
verbose = os.environ.get("SCIM_CONFORMANCE_VERBOSE") == "1"
counts = Counter()
for r in results:
    counts[r.status.name] += 1
    where = f"[{r.resource_type}] " if r.resource_type else ""
    reason = (r.reason or "").replace("\n", " | ")
    if not verbose and len(reason) > 300:
        reason = reason[:300] + "..."
    print(f"{r.status.name:8} {where}{r.title}: {reason}")
    if verbose and r.status in (Status.ERROR, Status.CRITICAL, Status.DEVIATION) and r.data is not None:
        print(f"         data: {r.data!r}"[:4000])
passed = counts["SUCCESS"] + counts["COMPLIANT"] + counts["ACCEPTABLE"]
failed = sum(counts.values()) - passed - counts["SKIPPED"]
print(
    f"scim2-tester: {passed}/{passed + failed} checks passed"
    + (f", {counts['SKIPPED']} skipped" if counts["SKIPPED"] else "")
)
sys.exit(1 if failed else 0)
PY
