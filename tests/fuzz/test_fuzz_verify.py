"""``soak verify`` on damaged signed reports: each one FAILs (exit 1, and with ``--format json``
a JSON answer) or is refused in one line (exit 2), never a traceback, and never passes.

A damaged report may pass only when the damage changed nothing the signer vouched for: not a
byte of the ranges the signature covers, not the signed attributes nor the signature value
(``changes_what_is_signed``; a hex string may gain spaces or change case, the zeros after the
signature are padding, the CMS's list of digest algorithms is signed by nobody).
The report is the same bytes for the same seed (tests/fuzz/signed_report.py), so a failure
replays from the seed its message names.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import time

import pytest

from tests.fuzz.fuzz_helpers import fuzz_cases, fuzz_seed, mutate_bytes, run_cli
from tests.fuzz.signed_report import signed_report

# slow: signs a real report with soak report pdf, then verifies each case
pytestmark = [pytest.mark.slow, pytest.mark.compute]  # pyproject.toml

# what a signature dictionary and a trailer may say instead of what the signer wrote
DATES = [b"D:20260921992324Z", b"D:20261399000000Z", b"D:2026", b"D:", b"", b"D:20260921102324+99'99'",
         b"D:99999999999999999999Z", b"D:2026092110232\xff", b"x" * 200]
# the signature's /M as pyHanko writes it, "D:" with the colon escaped: /M (D\07220260921102324Z)
_SIGNING_TIME = re.compile(rb"/M ?\(D(?::|\\072)\d{14}Z\)")
NUMBERS = [b"0", b"-1", b"99999999999999999999", b"1e9", b"", b"NaN", b"2147483648"]
_BYTE_RANGE = re.compile(rb"/ByteRange ?\[\s*0\s+(\d+)\s+(\d+)\s+(\d+)\s*\]")
_PDF_WHITESPACE = b"\x00\t\n\x0c\r "


@pytest.fixture(scope="module")
def signed(tmp_path_factory) -> dict:
    seed = fuzz_seed(77)
    pdf, keys = signed_report(seed, tmp_path_factory.mktemp("signed"))
    # the same seed gives the same bytes on the same fonts and libraries: this says which
    print(f"signed report of seed {seed}: {len(pdf)} bytes, sha256 {hashlib.sha256(pdf).hexdigest()}")
    m = _BYTE_RANGE.search(pdf)
    assert m and int(m.group(2)) + int(m.group(3)) == len(pdf), "the signature covers the whole report"
    return {"pdf": pdf, "cert": str(keys.cert_path), "seed": seed, "contents": (int(m.group(1)), int(m.group(2)))}


def _vouching(hex_string: bytes) -> tuple[bytes, bytes] | None:
    """What the signer vouched for in the CMS a PDF hex string ``<...>`` holds: its signed
    attributes (with the digest of the covered bytes) and its signature value; None when the
    string is no hex string or holds no CMS signature to read them from."""
    from asn1crypto import cms

    digits = hex_string[1:-1].translate(None, _PDF_WHITESPACE)
    if hex_string[:1] != b"<" or hex_string[-1:] != b">" or re.search(rb"[^0-9A-Fa-f]", digits):
        return None
    raw = bytes.fromhex((digits + b"0" * (len(digits) % 2)).decode())
    try:
        info = cms.ContentInfo.load(raw, strict=False)["content"]["signer_infos"][0]
        return info["signed_attrs"].dump(), info["signature"].native
    except Exception:  # damaged DER fails anywhere in asn1crypto: nothing to read
        return None


def changes_what_is_signed(original: bytes, data: bytes, contents: tuple[int, int]) -> bool:
    """Whether ``data`` differs from ``original`` in what the signer vouched for: a byte the
    signature covers, the length (something cut off or appended), or the signed attributes or
    signature value in the CMS. The rest of the CMS (its list of digest algorithms, the
    certificates it carries) and the padding after it are outside the signature: changing them
    breaks nothing a pass promises."""
    a, b = contents
    if len(data) != len(original) or data[:a] != original[:a] or data[b:] != original[b:]:
        return True
    return _vouching(data[a:b]) != _vouching(original[a:b])


def test_damage_that_changes_nothing_signed_is_told_apart_from_damage(signed) -> None:
    from asn1crypto import cms

    pdf, contents = signed["pdf"], signed["contents"]
    a, b = contents
    hex_string = pdf[a:b]
    size = len(cms.ContentInfo.load(bytes.fromhex(hex_string[1:-1].decode()), strict=False).dump())
    end = a + 2 * size  # the last digit of the CMS; zeros follow up to the reserved size
    assert _vouching(hex_string) is not None and end < b - 16
    digests = a + hex_string.upper().index(b"06096086480165030402010500")  # SignedData's digestAlgorithms

    def edit(at: int, new: bytes) -> bytes:
        return pdf[:at] + new + pdf[at + len(new):]

    assert not changes_what_is_signed(pdf, pdf, contents)
    assert not changes_what_is_signed(pdf, edit(end + 8, b"0 "), contents)  # a space in the padding
    assert not changes_what_is_signed(pdf, pdf[:a + 1] + pdf[a + 1:b - 1].swapcase() + pdf[b - 1:], contents)
    assert not changes_what_is_signed(pdf, edit(digests + 4, b"3"), contents)  # sha256 -> another OID
    assert changes_what_is_signed(pdf, edit(end - 9, b"1" if pdf[end - 9:end - 8] != b"1" else b"2"), contents)
    assert changes_what_is_signed(pdf, edit(end + 8, b"X"), contents)  # no longer a hex string
    assert changes_what_is_signed(pdf, edit(100, b"\x00" if pdf[100] else b"\x01"), contents)
    assert changes_what_is_signed(pdf, pdf + b"\n", contents)
    assert changes_what_is_signed(pdf, pdf[:-1], contents)


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


def test_fuzzed_signed_reports_fail_or_are_refused_never_pass_nor_a_traceback(tmp_path, signed) -> None:
    seed, pdf = signed["seed"], signed["pdf"]
    cases = fuzz_cases(100)
    rng = random.Random(seed)
    path = tmp_path / "report.pdf"
    t0 = time.monotonic()
    counts = {0: 0, 1: 0, 2: 0}
    harmless = 0
    for i in range(cases):
        data = _structured(rng, pdf) if rng.random() < 0.6 else mutate_bytes(rng, pdf)
        damaged = changes_what_is_signed(pdf, data, signed["contents"])
        harmless += not damaged
        path.write_bytes(data)
        fmt = rng.choice(["table", "json"])
        case = f"seed {seed} case {i} ({fmt})"
        out = run_cli(["verify", str(path), "--cert", signed["cert"], "--format", fmt], case)
        counts[out.rc] += 1
        if damaged:
            assert out.rc != 0, f"{case}: a report whose signed bytes changed passed: {out.out[-800:]!r}"
        if fmt == "json" and out.rc != 2:
            assert json.loads(out.out)["ok"] is (out.rc == 0), f"{case}: {out.out[-800:]!r}"
    # most damage reaches what is signed (the rest falls on the certificate or the padding),
    # so the check above is what runs
    assert harmless < cases // 4 and counts[1] > cases // 2, (harmless, counts)
    print(f"{cases} damaged reports in {time.monotonic() - t0:.1f} s: {counts}, {harmless} changed nothing signed")


def test_signing_time_with_hour_99_fails_the_check_with_a_json_answer(tmp_path, signed, capsys) -> None:
    data = re.sub(_SIGNING_TIME, lambda m: m.group(0)[:-8] + b"99" + m.group(0)[-6:], signed["pdf"], count=1)
    assert data != signed["pdf"]
    path = tmp_path / "hour99.pdf"
    path.write_bytes(data)
    from soak.cli import main

    assert main(["verify", str(path), "--cert", signed["cert"], "--format", "json"]) == 1
    res = json.loads(capsys.readouterr().out)
    assert res["ok"] is False and res["problems"], res
