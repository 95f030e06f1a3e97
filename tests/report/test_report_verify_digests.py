"""An attachment whose digest the findings document holds (the acceptance profile, a cluster's
per-chip table) is checked against it by ``soak verify``: swapped, missing or foreign, it fails."""

from __future__ import annotations

import hashlib

import pytest

from soak.report.verify import CHIPS_NAME, PROFILE_NAME, VerifyResult, _check_digested

PROFILE = b'name = "default"\nrequired_runtime_h = 8.0\n'


def _check(atts: dict[str, bytes], meta: dict) -> VerifyResult:
    res = VerifyResult("r.pdf")
    _check_digested(atts, meta, res, PROFILE_NAME, "profile_sha256")
    return res


def test_the_attached_profile_matches_its_digest():
    assert _check({PROFILE_NAME: PROFILE}, {"profile_sha256": hashlib.sha256(PROFILE).hexdigest()}).ok


@pytest.mark.parametrize(("atts", "meta"), [
    ({PROFILE_NAME: PROFILE.replace(b"8.0", b"168.0")}, {"profile_sha256": hashlib.sha256(PROFILE).hexdigest()}),
    ({}, {"profile_sha256": hashlib.sha256(PROFILE).hexdigest()}),  # the profile taken out
    ({PROFILE_NAME: PROFILE}, {}),  # a profile no digest vouches for
])
def test_a_swapped_missing_or_foreign_profile_is_a_data_mismatch(atts, meta):
    res = _check(atts, meta)
    assert res.failures == ["data-mismatch"]
    assert res.problems == [f"the attached {PROFILE_NAME} does not match the digest in soak-findings.json"]


def test_a_report_made_before_profiles_were_attached_still_verifies():
    res = VerifyResult("old.pdf")
    _check_digested({}, {"raw_data_sha256": "ab"}, res, PROFILE_NAME, "profile_sha256")
    _check_digested({}, {"raw_data_sha256": "ab"}, res, CHIPS_NAME, "chips_csv_sha256")
    assert res.ok
