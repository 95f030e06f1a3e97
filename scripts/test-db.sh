# Sourced by scripts/test.sh: the PostgreSQL the store's second backend and the cluster tests use.
# prepare_test_db sets SOAK_TEST_PG_URL when it can: an URL already set is kept; otherwise the
# local server on 127.0.0.1:5432 is started (as root, when installed and stopped), the database
# soak_test is created, and the URL points at it. When it cannot, it says why and how, and the
# tests that need PostgreSQL skip (in CI they fail: tests/conftest.py).
SOAK_TEST_DB=${SOAK_TEST_DB:-soak_test}
SOAK_TEST_PG=${SOAK_TEST_PG:-postgres@127.0.0.1:5432}

prepare_test_db() {
  if [ -n "${SOAK_TEST_PG_URL:-}" ]; then
    echo "test-db: PostgreSQL tests use SOAK_TEST_PG_URL as set"
    return 0
  fi
  local user=${SOAK_TEST_PG%@*} hostport=${SOAK_TEST_PG#*@}
  local host=${hostport%:*} port=${hostport##*:}
  if ! command -v pg_isready >/dev/null; then
    echo "test-db: PostgreSQL is not installed; its tests skip (apt-get install postgresql)" >&2
    return 1
  fi
  if ! pg_isready -q -h "$host" -p "$port"; then
    local version
    version=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -1)
    if [ "$(id -u)" != 0 ] || [ -z "$version" ] || ! command -v pg_ctlcluster >/dev/null; then
      echo "test-db: PostgreSQL does not answer on $host:$port; its tests skip." >&2
      echo "test-db: start it (sudo pg_ctlcluster ${version:-VERSION} main start) or set SOAK_TEST_PG_URL" >&2
      return 1
    fi
    echo "test-db: starting PostgreSQL $version (cluster main)"
    pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
    for _ in $(seq 30); do pg_isready -q -h "$host" -p "$port" && break; sleep 1; done
    if ! pg_isready -q -h "$host" -p "$port"; then
      echo "test-db: PostgreSQL $version did not come up on $host:$port; its tests skip" >&2
      return 1
    fi
  fi
  local found
  if ! found=$(psql -h "$host" -p "$port" -U "$user" -d postgres -tAc \
      "SELECT 1 FROM pg_database WHERE datname='$SOAK_TEST_DB'" 2>&1); then
    echo "test-db: cannot connect as $user to $host:$port: ${found##*$'\n'}" >&2
    echo "test-db: allow it (pg_hba.conf) or set SOAK_TEST_PG_URL; the PostgreSQL tests skip" >&2
    return 1
  fi
  if [ "$found" != 1 ]; then
    psql -h "$host" -p "$port" -U "$user" -d postgres -qc "CREATE DATABASE $SOAK_TEST_DB" || return 1
  fi
  export SOAK_TEST_PG_URL="postgresql+psycopg://$user@$host:$port/$SOAK_TEST_DB"
  echo "test-db: PostgreSQL tests use $SOAK_TEST_PG_URL"
}
