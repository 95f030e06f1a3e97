"""The bytes of ``/Contents`` outside the signature's DER: the padding after it is outside
the signed byte range, so a change there was not seen (``signing.py`` claimed "one changed
byte anywhere breaks it")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from soak.report.build import build_pdf
from soak.report.verify import verify_pdf
from soak.store import Store

pytestmark = pytest.mark.slow  # signs a real PDF


def _contents_gap(data: bytes) -> tuple[int, int]:
    """[start, end) of the hex digits of the last signature's /Contents."""
    m = list(re.finditer(rb"/ByteRange\s*\[\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*\]", data))[-1]
    a, b, c, _ = map(int, m.groups())
    assert data[a + b:a + b + 1] == b"<" and data[c - 1:c] == b">"
    return a + b + 1, c - 1


@pytest.fixture(scope="module")
def signed(recorded, keys, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("contents") / "signed.pdf"
    with Store.open(recorded["db"], create=False) as store:
        build_pdf(store, recorded["run_id"], out, keys=keys)
    return out


def test_a_changed_padding_byte_in_contents_is_tampering(signed, keys, tmp_path):
    data = signed.read_bytes()
    start, end = _contents_gap(data)
    hexdigits = data[start:end]
    assert hexdigits.endswith(b"0000")  # the padding pyHanko reserves after the DER
    changed = bytearray(data)
    changed[end - 1] = ord("1")  # the last padding nibble
    (tmp_path / "pad.pdf").write_bytes(changed)

    assert verify_pdf(signed, keys.cert_path).ok
    res = verify_pdf(tmp_path / "pad.pdf", keys.cert_path)
    assert not res.ok and res.failures == ["tampered"], res.problems
    assert res.problems == ["tampered: the signature's /Contents holds bytes beyond the signature (its padding "
                            "changed after signing)"]


def test_a_hex_digit_written_in_another_case_is_tampering(signed, keys, tmp_path):
    # the same bytes decoded, another file: "one changed byte anywhere" must still hold
    data = bytearray(signed.read_bytes())
    start, end = _contents_gap(bytes(data))
    at = next(i for i in range(start, end) if chr(data[i]) in "abcdefABCDEF")
    data[at] = ord(chr(data[at]).swapcase())
    (tmp_path / "case.pdf").write_bytes(bytes(data))
    res = verify_pdf(tmp_path / "case.pdf", keys.cert_path)
    assert not res.ok and "tampered" in res.failures, res.problems
