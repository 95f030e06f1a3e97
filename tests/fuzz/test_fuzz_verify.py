"""``soak verify`` on thousands of damaged signed reports: each one FAILs (exit 1, and with
``--format json`` a JSON answer) or is refused in one line (exit 2), never a traceback."""

from __future__ import annotations

import json
import random
import re
import time

import pytest

from soak.report.signing import create_keys
from soak.store import Store
from tests.fuzz.fuzz_helpers import CASES, mutate_bytes, run_cli
from tests.report.synth import write_run

# what a signature dictionary and a trailer may say instead of what the signer wrote
DATES = [b"D:20260921992324Z", b"D:20261399000000Z", b"D:2026", b"D:", b"", b"D:20260921102324+99'99'",
         b"D:99999999999999999999Z", b"D:2026092110232\xff", b"x" * 200]
# the signature's /M as pyHanko writes it, "D:" with the colon escaped: /M (D\07220260921102324Z)
_SIGNING_TIME = re.compile(rb"/M ?\(D(?::|\\072)\d{14}Z\)")
NUMBERS = [b"0", b"-1", b"99999999999999999999", b"1e9", b"", b"NaN", b"2147483648"]


@pytest.fixture(scope="module")
def signed(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("signed")
    keys = create_keys(root / "keys", common_name="Fuzz Signer")
    run_dir = root / "runs" / "fz"
    run_dir.mkdir(parents=True)
    with Store.open(run_dir / "soak.db") as store:
        write_run(store, "fz", chips=1, hours=0.2, interval_s=30.0, findings=False)
        store.update_run("fz", run_dir=str(run_dir))
    pdf = root / "signed.pdf"
    out = run_cli(["report", "pdf", "fz", "--data-dir", str(root / "runs"), "-o", str(pdf), "--key",
                   str(keys.key_path), "--cert", str(keys.cert_path)], "signing the fuzz report")
    assert out.rc == 0, out.err
    return {"pdf": pdf.read_bytes(), "cert": str(keys.cert_path)}


def _structured(rng: random.Random, data: bytes) -> bytes:
    what = rng.randrange(6)
    if what == 0:  # the signing time /M, e.g. hour 99
        return re.sub(_SIGNING_TIME, b"/M (" + rng.choice(DATES) + b")", data, count=1)
    if what == 1:
        nums = rng.choice(NUMBERS)
        return re.sub(rb"/ByteRange ?\[[^\]]*\]", lambda m: m.group(0).replace(
            rng.choice(m.group(0)[11:-1].split() or [b"0"]), nums, 1), data, count=1)
    if what == 2:
        return re.sub(rb"startxref\s+\d+", b"startxref\n" + rng.choice(NUMBERS), data)
    if what == 3:  # the CMS blob
        i = data.find(b"/Contents <")
        if i < 0:
            return data
        j = i + 11 + rng.randrange(2000)
        return data[:j] + bytes([rng.choice(b"0123456789abcdefXZ ")]) + data[j + 1:]
    if what == 4:  # the end of the file: signature dictionary, xref, trailer
        tail = len(data) - rng.randrange(1, 6000)
        return data[:tail] + mutate_bytes(rng, data[tail:])
    return data[: rng.randrange(len(data))]  # truncated


def test_fuzzed_signed_reports_fail_or_are_refused_never_a_traceback(tmp_path, signed) -> None:
    rng = random.Random(77)
    path = tmp_path / "report.pdf"
    t0 = time.monotonic()
    counts = {0: 0, 1: 0, 2: 0}
    for i in range(CASES):
        data = _structured(rng, signed["pdf"]) if rng.random() < 0.6 else mutate_bytes(rng, signed["pdf"])
        path.write_bytes(data)
        fmt = rng.choice(["table", "json"])
        out = run_cli(["verify", str(path), "--cert", signed["cert"], "--format", fmt], f"case {i} ({fmt})")
        counts[out.rc] += 1
    assert counts[1] > CASES // 2, counts
    print(f"{CASES} damaged reports in {time.monotonic() - t0:.1f} s: {counts}")


def test_signing_time_with_hour_99_fails_the_check_with_a_json_answer(tmp_path, signed, capsys) -> None:
    data = re.sub(_SIGNING_TIME, lambda m: m.group(0)[:-8] + b"99" + m.group(0)[-6:], signed["pdf"], count=1)
    assert data != signed["pdf"]
    path = tmp_path / "hour99.pdf"
    path.write_bytes(data)
    from soak.cli import main

    assert main(["verify", str(path), "--cert", signed["cert"], "--format", "json"]) == 1
    res = json.loads(capsys.readouterr().out)
    assert res["ok"] is False and res["problems"], res
