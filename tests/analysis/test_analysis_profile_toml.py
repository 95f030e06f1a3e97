"""The acceptance profile written as TOML reads back equal through the one reader
(``Profile.from_toml``, what ``soak analyze --profile`` uses): the report attaches it."""

from __future__ import annotations

import dataclasses

import pytest

from soak.analysis import Profile
from soak.analysis.profile import ChipExpectation, Phase


def _round_trip(profile: Profile, tmp_path) -> Profile:
    path = tmp_path / "profile.toml"
    path.write_text(profile.to_toml(), encoding="utf-8")
    return Profile.from_toml(path)


def test_default_profile_reads_back_equal(tmp_path):
    assert _round_trip(Profile.default(), tmp_path) == Profile.default()


def test_a_site_profile_reads_back_equal_every_key(tmp_path):
    base = Profile.default()
    site = dataclasses.replace(
        base,
        name='site "B"\nhall 3\x7f',  # quotes, a newline and DEL must stay valid TOML
        required_runtime_h=8.0,
        severity={**base.severity, "utilization_dropouts": "warn", "outlier": "info"},
        phases=(Phase("checkpoint", every_s=3600.0, duration_s=120.0), Phase("eval", every_s=7200.0, duration_s=300.0)),
        thermal=dataclasses.replace(base.thermal, threshold_c=90.5, throttle_mask=0x28),
        comm=dataclasses.replace(base.comm, rate_counters=("comm_timeouts_total", "hccl_retries_total")),
        evidence=dataclasses.replace(base.evidence, restart_clock_on_failure=True, min_uninterrupted_h=24.0),
        peers=dataclasses.replace(base.peers, outlier_severity="fail", min_peers=5),
        chips={**base.chips, "910B": ChipExpectation(18.5, "measured on site, 2026", 300.0, "bin B3 datasheet"),
               "X1 (lab)": ChipExpectation(None, "no figure", 12.0, "lab")},
    )
    back = _round_trip(site, tmp_path)
    assert back == site
    assert back.required_runtime_h == 8.0 and back.chips["X1 (lab)"].pair_busbw_gbps is None


def test_a_phase_of_explicit_windows_is_refused_not_dropped():
    profile = Profile.default().with_phases([Phase("checkpoint", windows=((10.0, 20.0),))])
    with pytest.raises(ValueError, match="explicit windows"):
        profile.to_toml()
