"""``soak faults lookup`` and ``soak faults check``: the table's entries as JSON and text, an
operator's file laid over it, and one line for anything that is no code or no good file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from soak.cli import main

BUILTIN = "built-in: Ascend/mind-cluster faultCode.json @22bb3d98"


def _operator(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "faultCode.json"
    path.write_text(json.dumps(data))
    return path


def test_lookup_json_gives_each_code_with_its_table_entry(capsys) -> None:
    assert main(["faults", "lookup", "--format", "json", "80e3a201", "12345678"]) == 0
    codes = json.loads(capsys.readouterr().out)["codes"]
    assert codes == [
        {"vendor": "ascend", "code": "80E3A201", "level": "SeparateNPU", "severity": "fail",
         "meaning": "Voltage adjustment function exception detected by the LPM", "action": "isolate the chip",
         "source": BUILTIN, "known": True, "interrupts_training": True},
        {"vendor": "ascend", "code": "12345678", "level": "Unknown", "severity": "warn", "meaning": None,
         "action": None, "source": "unknown code", "known": False, "interrupts_training": False},
    ]
    assert main(["faults", "lookup", "--xid", "--format", "json", "79"]) == 0
    (xid,) = json.loads(capsys.readouterr().out)["codes"]
    assert (xid["level"], xid["severity"], xid["interrupts_training"]) == ("hardware", "fail", True)


def test_lookup_with_the_operators_file(tmp_path, capsys) -> None:
    path = _operator(tmp_path, {"SeparateNPUCodes": ["A4025021"]})
    assert main(["faults", "lookup", "A4025021", "--codes-file", str(path)]) == 0
    out = capsys.readouterr().out
    assert "  level     SeparateNPU\n  severity  fail\n  meaning   N/A\n" in out
    assert f"  source    operator: {path}\n" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["faults", "lookup", "zz"], "soak: error: fault code 'zz': not a hex code like 80E01801\n"),
        (["faults", "lookup", "--xid", "4x"], "soak: error: Xid '4x': not a number like 79\n"),
    ],
)
def test_lookup_of_something_that_is_no_code_is_one_line(argv, message, capsys) -> None:
    assert main(argv) == 2
    assert capsys.readouterr().err == message


def test_check_counts_codes_per_level(tmp_path, capsys) -> None:
    path = _operator(tmp_path, {"SeparateNPUCodes": ["80E01801", "ABCD1234"], "RestartNPUCodes": ["8C03A000"],
                                "NotHandleFaultCodes": ["8C03A000"]})
    assert main(["faults", "check", str(path), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "file": str(path), "codes": 3, "levels": {"SeparateNPU": 2, "RestartNPU": 1},
        "changed_from_builtin": 1, "not_in_builtin": 1}
    assert main(["faults", "check", str(path)]) == 0
    assert capsys.readouterr().out == (f"{path}: 3 codes\n  SeparateNPU         2\n  RestartNPU          1\n"
                                       "  1 differ from the built-in level, 1 not in the built-in table\n")


def test_check_of_a_bad_file_is_one_line_exit_2(tmp_path, capsys) -> None:
    path = _operator(tmp_path, {"SeparateNPUCodes": ["nope"]})
    assert main(["faults", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == (f"soak: error: fault codes file {path}: SeparateNPUCodes: 'nope' is not 8 hex digits "
                   "(9 for the device plugin's own hang and UB codes)\n")


@pytest.mark.parametrize("text", ['{"SeparateNPUCodes": [' + "9" * 5000 + "]}", '{"SeparateNPUCodes": ["80E01801"], "x": ' + "1" * 5000 + "}"])
def test_check_of_a_file_with_a_5000_digit_number_is_one_line_exit_2(tmp_path, text, capsys) -> None:
    path = tmp_path / "faultCode.json"
    path.write_text(text)
    assert main(["faults", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"soak: error: fault codes file {path}: ") and err.count("\n") == 1
    assert "Traceback" not in err
