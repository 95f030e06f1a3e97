#!/usr/bin/env python3
"""Refresh soak's built-in Ascend fault-code table from a clone of Ascend/mind-cluster.

    git clone https://github.com/Ascend/mind-cluster /tmp/mind-cluster
    scripts/update_ascend_fault_codes.py /tmp/mind-cluster

Writes, in soak/faultcodes/: ascend_fault_codes.json (the device plugin's faultCode.json,
byte-exact), ascend_meanings.json (the meaning of each code the repository gives one) and the
Ascend entries of provenance.json (commit, dates, SHA-256). docs/faults.md says where each
meaning comes from; the tests check the counts, so a refresh that changes them shows there.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import re
import subprocess
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "soak" / "faultcodes"
FAULT_CODES = "component/ascend-device-plugin/build/faultCode.json"
KNOWLEDGE = "component/ascend-faultdiag/src/ascend_fd/configuration/kg-config.json"
CONSTANTS = "component/ascend-common/devmanager/common/constants.go"
# `// NameFaultCode what it is` followed by `NameFaultCode int64 = 0x...`
_CONSTANT = re.compile(r"//\s*(\w+)\s+(.+?)\n\s*\1\s+int64\s*=\s*0x([0-9A-Fa-f]+)")


def git_bytes(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True).stdout


def git(repo: Path, *args: str) -> str:
    return git_bytes(repo, *args).decode("utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", type=Path, help="a clone of https://github.com/Ascend/mind-cluster")
    repo = parser.parse_args().repo
    commit = git(repo, "rev-parse", "HEAD").strip()
    raw = git_bytes(repo, "show", f"HEAD:{FAULT_CODES}")
    levels = json.loads(raw)
    codes = sorted({c for v in levels.values() for c in v}, key=lambda c: (int(c, 16), c))
    knowledge = json.loads(git(repo, "show", f"HEAD:{KNOWLEDGE}"))["knowledge-repository"]
    causes = {int(k, 16): v["attribute"].get("cause_en") for k, v in knowledge.items()
              if re.fullmatch(r"0x[0-9A-Fa-f]+", k)}
    constants = {int(m.group(3), 16): m.group(2).strip()
                 for m in _CONSTANT.finditer(git(repo, "show", f"HEAD:{CONSTANTS}"))}
    short = commit[:8]
    meanings = {}
    for code in codes:
        value = int(code, 16)
        if causes.get(value):
            meanings[code] = {"meaning": causes[value].strip().rstrip("."),
                              "source": f"Ascend/mind-cluster {KNOWLEDGE} @{short} (cause_en)"}
        elif value in constants:
            meanings[code] = {"meaning": constants[value], "source": f"Ascend/mind-cluster {CONSTANTS} @{short} (comment)"}
    (OUT / "ascend_fault_codes.json").write_bytes(raw)
    (OUT / "ascend_meanings.json").write_text(json.dumps({"codes": meanings}, indent=1, ensure_ascii=False))
    prov_path = OUT / "provenance.json"
    prov = json.loads(prov_path.read_text())
    today = datetime.date.today().isoformat()
    entry = prov["ascend_fault_codes.json"]
    entry.update(commit=commit, commit_date=git(repo, "log", "-1", "--format=%cs").strip(), fetched=today,
                 sha256=hashlib.sha256(raw).hexdigest(),
                 file_last_changed_in=git(repo, "log", "-1", "--format=%H (%cs)", "--", FAULT_CODES).strip())
    prov["ascend_meanings.json"].update(commit=commit, fetched=today)
    prov_path.write_text(json.dumps(prov, indent=2, ensure_ascii=False) + "\n")
    print(f"{len(codes)} codes, {len(meanings)} with a meaning, at {short}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
