#!/usr/bin/env bash
# The report with each CJK font set alone: Debian's fonts-droid-fallback, fonts-wqy-microhei and
# fonts-noto-cjk are fetched (apt-get download), unpacked into a folder each (dpkg -x), and for
# each folder, with only it searched (SOAK_FONT_DIRS), the report's font and layout tests run:
# both languages rendered, every text drawn read back with pdftotext, the pages laid out.
#
#   scripts/font-sets.sh                 the tests, per set
#   scripts/font-sets.sh --demo DB       also the report of a `soak demo` run (its soak.db)
#   scripts/font-sets.sh --check         also the fast suite (make check), per set
#
# Prints one line per set: "font set PKG (FILE): ok" or "... FAILED (see LOG)". Exit 1 if any failed.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-$root/.venv/bin/python}
sets=(fonts-droid-fallback fonts-wqy-microhei fonts-noto-cjk)
demo="" check=0
while [ $# -gt 0 ]; do
    case $1 in
        --demo) demo=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift 2 ;;
        --check) check=1; shift ;;
        *) echo "font-sets.sh: unknown argument $1 (--demo DB, --check)" >&2; exit 2 ;;
    esac
done
for tool in apt-get dpkg pdftotext; do
    command -v "$tool" >/dev/null || { echo "font-sets.sh: $tool not found (Debian/Ubuntu with poppler-utils)" >&2; exit 2; }
done
if [ -n "$demo" ] && [ ! -f "$demo" ]; then
    echo "font-sets.sh: --demo $demo: no such file (a demo run's soak.db)" >&2; exit 2
fi

work=$(mktemp -d)
logs=${FONT_SETS_LOGS:-$(mktemp -d)}  # kept: a failed set's log is read after the run
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download "${sets[@]}" >/dev/null)

failed=0
for pkg in "${sets[@]}"; do
    dpkg -x "$work/${pkg}"_*.deb "$work/unpacked-$pkg"
    fonts="$work/set-$pkg"
    mkdir -p "$fonts"
    # the font files alone: no links into the system's font folders
    find "$work/unpacked-$pkg" -type f \( -name '*.ttf' -o -name '*.ttc' -o -name '*.otf' \) -exec cp {} "$fonts/" \;
    files=$(cd "$fonts" && ls | tr '\n' ' ')
    log="$logs/$pkg.log"
    ok=1
    (
        cd "$root"
        export SOAK_FONT_DIRS="$fonts"
        if [ -n "$demo" ]; then export SOAK_TEST_DEMO_DB="$demo"; fi
        "$py" -m pytest -q -p no:cacheprovider -m "" tests/report/test_report_fonts.py tests/report/test_report_layout.py || exit 1
        if [ "$check" = 1 ]; then
            scripts/test.sh --check || exit 1
        fi
    ) >"$log" 2>&1 || ok=0
    if [ "$ok" = 1 ]; then
        echo "font set $pkg (${files% }): ok ($(grep -Eo '[0-9]+ passed[^=]*' "$log" | head -1))"
    else
        echo "font set $pkg (${files% }): FAILED (see $log)"
        failed=1
    fi
done
exit $failed
