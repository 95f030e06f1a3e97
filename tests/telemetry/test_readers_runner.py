"""The vendor-tool runner, against real child processes."""

from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from soak.errors import ToolError
from soak.telemetry.runner import (
    KNOWN_ERROR_TEXTS,
    ReplayRunner,
    Runner,
    ToolResult,
    check_result,
    run_tool,
)
from tests import otheruser
from tests.procs import alive, wait_until


def _script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return path


def test_plain_output_and_duration(tmp_path):
    tool = _script(
        tmp_path, "npu-smi", "print('hello'); import sys; print('warn', file=sys.stderr)\n"
    )
    result = run_tool([str(tool), "info"], timeout_s=10)
    assert result.stdout == "hello\n"
    assert result.stderr == "warn\n"
    assert result.returncode == 0
    assert result.duration_s > 0


def test_hanging_tool_is_killed_with_its_grandchildren(tmp_path):
    # The tool starts a child that would outlive it and then hangs.
    pidfile = tmp_path / "grandchild.pid"
    tool = _script(
        tmp_path,
        "npu-smi",
        f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open({str(pidfile)!r}, "w").write(str(child.pid))
        print("partial", flush=True)
        time.sleep(60)
        """,
    )
    with pytest.raises(ToolError) as info:
        run_tool([str(tool)], timeout_s=1.0)
    assert info.value.kind == "timeout"
    assert info.value.tool == "npu-smi"
    assert "1 s" in str(info.value)
    grandchild = int(pidfile.read_text())
    wait_until(lambda: not alive(grandchild), (), 5, what=f"the grandchild (pid {grandchild}) to be killed",
               interval_s=0.05)


def test_missing_executable(tmp_path):
    with pytest.raises(ToolError) as info:
        run_tool([str(tmp_path / "npu-smi")], timeout_s=5)
    assert info.value.kind == "missing"
    assert "not found" in str(info.value)


def test_not_executable_counts_as_missing(tmp_path):
    path = tmp_path / "hccn_tool"
    path.write_text("echo hi\n")
    with pytest.raises(ToolError) as info:
        run_tool([str(path)], timeout_s=5)
    assert info.value.kind == "missing"


# A tool on PATH in a folder others may write (a shared /tmp/bin) is theirs to replace, and
# soak runs it as its own user (root on an Ascend node): refused, not run, as ssh refuses such
# keys; a sticky folder (/tmp itself) lets no one replace another's file.
def test_a_tool_others_may_replace_is_refused_and_not_run(tmp_path):
    shared = tmp_path / "bin"
    shared.mkdir()
    ran = tmp_path / "ran"
    tool = _script(shared, "npu-smi", f"open({str(ran)!r}, 'w').write('x')\n")
    shared.chmod(0o777)
    with pytest.raises(ToolError) as info:
        run_tool(["npu-smi"], timeout_s=5, env={"PATH": str(shared)})
    assert info.value.kind == "missing" and not ran.exists()
    assert str(info.value) == (f"npu-smi: refused {tool}: the folder {shared} is writable by group or others "
                               "(mode 0777), so another user may replace the tool soak runs")
    shared.chmod(0o1777)
    run_tool(["npu-smi"], timeout_s=5, env={"PATH": str(shared)})
    assert ran.exists()
    tool.chmod(0o757)
    with pytest.raises(ToolError, match=r"the file .* is writable by group or others \(mode 0757\)"):
        run_tool([str(tool)], timeout_s=5)
    # a link on PATH to a tool in a safe folder: the link's folder could swap the link
    tool.chmod(0o755)
    shared.chmod(0o755)
    links = tmp_path / "links"
    links.mkdir()
    (links / "npu-smi").symlink_to(tool)
    links.chmod(0o775)
    with pytest.raises(ToolError, match=rf"the folder {links} is writable by group or others"):
        run_tool(["npu-smi"], timeout_s=5, env={"PATH": str(links)})
    links.chmod(0o755)
    run_tool(["npu-smi"], timeout_s=5, env={"PATH": str(links)})
    # a folder higher up that others may write: they could rename the tool's folder away
    tmp_path.chmod(0o777)
    try:
        with pytest.raises(ToolError, match=rf"the folder {tmp_path} is writable by group or others"):
            run_tool([str(tool)], timeout_s=5)
    finally:
        tmp_path.chmod(0o700)


def _tool_by_root(folder: Path, marker: Path) -> Path:
    # a /bin/sh tool: the interpreter nobody may run, whatever the test's own is
    tool = folder / "npu-smi"
    tool.write_text(f"#!/bin/sh\necho ran > {marker}\necho ok\n")
    tool.chmod(0o755)
    return tool


def test_a_tool_another_user_made_in_a_sticky_folder_is_refused(tmp_path):
    # the sticky bit stops nobody from replacing root's files in /tmp, not from making their own
    otheruser.require()
    with otheruser.shared_folder() as base:
        open_ = base / "open"
        marker = tmp_path / "ran"
        otheruser.sh(f"printf '#!/bin/sh\\necho ran > {marker}\\n' > {open_}/npu-smi; chmod 755 {open_}/npu-smi")
        assert (open_ / "npu-smi").stat().st_uid == otheruser.uid()
        with pytest.raises(ToolError) as info:
            run_tool(["npu-smi", "info"], timeout_s=10, env={"PATH": f"{open_}:/usr/bin:/bin"})
        assert info.value.kind == "missing" and not marker.exists()
        assert str(info.value) == (f"npu-smi: refused {open_}/npu-smi: the file {open_}/npu-smi is owned by uid "
                                   f"{otheruser.uid()}, neither root nor soak's user, so another user may replace "
                                   "the tool soak runs")


def test_a_tool_in_a_folder_another_user_owns_is_refused_whatever_its_mode(tmp_path):
    # 0755 keeps group and others out, not the folder's owner: they rename root's tool away
    otheruser.require()
    with otheruser.shared_folder() as base:
        theirs = base / "open" / "bin"
        otheruser.sh(f"mkdir -m 755 {theirs}")
        marker = tmp_path / "ran"
        tool = _tool_by_root(theirs, marker)
        with pytest.raises(ToolError, match=rf"the folder {theirs} is owned by uid {otheruser.uid()}, neither root"):
            run_tool(["npu-smi"], timeout_s=10, env={"PATH": str(theirs)})
        assert not marker.exists()
        # a folder of root's below theirs: they rename it away as well
        deeper = theirs / "sbin"
        deeper.mkdir(mode=0o755)
        tool = _tool_by_root(deeper, marker)
        with pytest.raises(ToolError, match=rf"the folder {theirs} is owned by uid {otheruser.uid()}"):
            run_tool([str(tool)], timeout_s=10)
        assert not marker.exists()
        # the same tool in a folder of root's runs
        ours = base / "bin"
        ours.mkdir(mode=0o755)
        tool = _tool_by_root(ours, marker)
        assert run_tool(["npu-smi"], timeout_s=10, env={"PATH": str(ours)}).stdout == "ok\n"
        assert marker.exists()


def test_the_file_checked_is_the_file_run(tmp_path, monkeypatch):
    # between the check and the start, a tool of the same name appears earlier on PATH (a race
    # someone won): what runs is the file that was checked, not a second search of PATH
    import soak.telemetry.runner as runner

    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    _script(second, "npu-smi", "print('checked')\n")
    check = runner.others_may_replace

    def check_then_race(path, *args, **kwargs):
        found = check(path, *args, **kwargs)
        _script(first, "npu-smi", "print('planted')\n")
        return found

    monkeypatch.setattr(runner, "others_may_replace", check_then_race)
    result = run_tool(["npu-smi"], timeout_s=10, env={"PATH": f"{first}:{second}"})
    assert result.stdout == "checked\n"


def test_nonzero_exit_reports_last_stderr_line(tmp_path):
    tool = _script(
        tmp_path,
        "npu-smi",
        """
        import sys
        print("first problem", file=sys.stderr)
        print("Usage: the last line", file=sys.stderr)
        sys.exit(1)
        """,
    )
    with pytest.raises(ToolError) as info:
        run_tool([str(tool)], timeout_s=10)
    assert info.value.kind == "exit"
    assert str(info.value) == "npu-smi: exit status 1: Usage: the last line"


def test_dcmi_failure_with_exit_0_is_an_error(tmp_path):
    tool = _script(
        tmp_path,
        "npu-smi",
        """
        print("dcmi module initialize failed. ret is -8005")
        print("DrvMngGetConsoleLogLevel failed. (ret=4)")
        """,
    )
    with pytest.raises(ToolError) as info:
        run_tool([str(tool), "info"], timeout_s=10)
    assert info.value.kind == "error_text"
    assert "dcmi module initialize failed. ret is -8005" in str(info.value)


def test_error_text_on_stderr_with_exit_0(tmp_path):
    tool = _script(
        tmp_path,
        "npu-smi",
        "import sys; print('There is no NPU card on this server.', file=sys.stderr)\n",
    )
    with pytest.raises(ToolError) as info:
        run_tool([str(tool)], timeout_s=10)
    assert info.value.kind == "error_text"


def test_hccn_driver_warning_before_a_good_result_is_not_an_error(tmp_path):
    tool = _script(
        tmp_path,
        "hccn_tool",
        """
        print("call drvMngGetConsoleLogLevel failed , g_conLogLevel = 3")
        print("link status: UP")
        """,
    )
    assert run_tool([str(tool)], timeout_s=10).stdout.endswith("link status: UP\n")


def test_runner_passes_env_and_default_timeout(tmp_path):
    tool = _script(tmp_path, "npu-smi", "import os; print(os.environ.get('SOAK_X', 'unset'))\n")
    runner = Runner(timeout_s=10, env={"SOAK_X": "42", "PATH": os.environ["PATH"]})
    assert runner([str(tool)]).stdout == "42\n"


@pytest.mark.parametrize(
    "text",
    [
        "Invalid card id.\nError parameter of -i\nUsage: npu-smi info <watch|proc|-h|-m|-l|-t type>",
        "There is no NPU chip on this card.",
        "Device ID is out of the valid range.\nCmd execute failed!",
        "call drvMngGetConsoleLogLevel failed , g_conLogLevel = 3\nCommand execute failed!",
    ],
)
def test_every_fixture_error_text_is_known(text):
    with pytest.raises(ToolError) as info:
        check_result(["npu-smi"], ToolResult(text, "", 0, 0.0))
    assert info.value.kind == "error_text"


def test_known_error_texts_cover_fixture_060(fixtures_dir):
    text = (fixtures_dir / "npu" / "060_npu_smi_error_outputs.txt").read_text()
    # every block of npu-smi/DCMI/hccn_tool output (A, D, E, F) carries at least one known text
    for block in text.split("\n## ")[1:]:
        tag = block[:2]
        if tag in ("A)", "D)", "E)", "F)"):
            body = block.split("\n", 1)[1]
            for line in body.splitlines():
                if line.startswith(("Usage:", "DrvMngGetConsoleLogLevel", "Error parameter")):
                    continue
                low = line.lower()
                assert any(t.lower() in low for t in KNOWN_ERROR_TEXTS), line


def test_replay_runner_answers_and_checks_text():
    runner = ReplayRunner(
        {"info": "table", "info -l": "dcmi module initialize failed. ret is -8005"}
    )
    assert runner(["npu-smi", "info"]).stdout == "table"
    with pytest.raises(ToolError) as info:
        runner(["npu-smi", "info", "-l"])
    assert info.value.kind == "error_text"
    with pytest.raises(ToolError):
        runner(["npu-smi", "info", "-m"])
    assert runner.calls == [
        ("npu-smi", "info"),
        ("npu-smi", "info", "-l"),
        ("npu-smi", "info", "-m"),
    ]


def test_tool_flooding_after_its_table_is_killed_at_the_output_cap(tmp_path, fixtures_dir):
    table = fixtures_dir / "npu" / "001_910B3_8card_procs.txt"
    tool = tmp_path / "npu-smi"
    tool.write_text(f"#!/bin/sh\ncat '{table}'\nexec yes garbage\n")
    tool.chmod(0o755)
    started = time.monotonic()
    with pytest.raises(ToolError) as info:
        Runner(timeout_s=60, max_output_bytes=1 << 20)([str(tool), "info"])
    assert info.value.kind == "output_limit"
    assert str(info.value) == f"npu-smi: printed more than {1 << 20} bytes; process group killed"
    assert time.monotonic() - started < 30  # cut at the cap, not at the 60 s timeout


def test_output_up_to_the_cap_is_read_whole(tmp_path, fixtures_dir):
    table = fixtures_dir / "npu" / "001_910B3_8card_procs.txt"
    tool = tmp_path / "npu-smi"
    tool.write_text(f"#!/bin/sh\ncat '{table}'\n")
    tool.chmod(0o755)
    size = table.stat().st_size
    assert run_tool([str(tool)], timeout_s=30, max_output_bytes=size).stdout == table.read_text()
    with pytest.raises(ToolError) as info:
        run_tool([str(tool)], timeout_s=30, max_output_bytes=size - 1)
    assert info.value.kind == "output_limit"
