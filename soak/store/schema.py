"""Every table of the soak store, defined in one place (SQLAlchemy Core).

Timestamps are unix seconds as floats: the same numbers the CSV traces, heartbeats and the
analysis use, portable across SQLite and PostgreSQL, and on the run's (possibly accelerated)
time line. Free-form structures (plan, manifest, event detail) are JSON text so a reader
does not depend on a backend's JSON type.

Bump ``SCHEMA_VERSION`` on any change to a table; ``Store.open`` refuses a database whose
version row differs, rather than reading columns that are not there.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from sqlalchemy import (
    REAL,
    BigInteger,
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    bindparam,
    func,
    select,
    text,
    update,
)
from sqlalchemy.engine import Connection

from soak.runfolder import RUN_ID_MAX_CHARS
from soak.telemetry.records import METRICS

# 2: samples keyed by (series, ts) with REAL util/temp/power; sample_series holds run + device.
# 3: cluster runs: a ``nodes`` table; runs gain nodes, generation and plan_digest; events,
#    steps and findings gain ``node``. A version-2 database is upgraded in place (columns
#    added, nothing rewritten): see ``MIGRATIONS``.
# 4: steps gain ``compute_s``, a rank's time outside the collectives (the straggler's tell
#    under synchronous data parallelism, where every rank's step time is the same).
# 5: ``chip_buckets``: each node agent's per-chip bucket statistics, what the leader of a
#    cluster run compares (a version-4 database gains the table in place).
# 6: ``sample_series`` gains ``node``: a cluster node's device is stored as its node and its
#    name on the node, no longer as one ``node/device`` string (a version-5 database has its
#    series and findings split in place: ``_split_node_device``).
# 8: samples gain the chip's own fault evidence: isolated ECC pages and the NVML Xid count
#    (a version-7 database gains the columns in place).
# 9: steps gain ``numeric_checks``, the numerical checks a rank has run so far (the evidence of
#    the "numerical correctness" criterion; a version-8 database gains the column in place).
# 10: samples gain ``detail_ts``, when a chip's slow views (health view, ECC, port) in the row
#    were read, where not at the row's tick (a version-9 database gains the column in place).
SCHEMA_VERSION = 10

# SQLite only autoincrements an INTEGER PRIMARY KEY; PostgreSQL wants BIGINT for long runs.
_ID = BigInteger().with_variant(Integer(), "sqlite")

metadata = MetaData()

meta = Table(
    "soak_meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", String(256), nullable=False),
)

runs = Table(
    "runs",
    metadata,
    Column("id", String(RUN_ID_MAX_CHARS), primary_key=True),
    Column("host", String(255), nullable=False),
    Column("workload", String(255)),  # comma-joined workload names, for listings
    Column("backend", String(32)),
    Column("plan", Text, nullable=False),  # JSON of the plan as run
    Column("manifest", Text),  # JSON of the version manifest
    Column("started_ts", Float, nullable=False),
    Column("planned_end_ts", Float),
    Column("ended_ts", Float),
    Column("status", String(32), nullable=False),  # running, finished, stopped, failed
    Column("verdict", String(16)),  # pass, fail, None while running
    Column("time_scale", Float, nullable=False, default=1.0),
    Column("restarts", Integer, nullable=False, default=0),
    Column("run_dir", Text),
    Column("nodes", Integer, nullable=False, default=1),  # nodes of a cluster run
    # a cluster run's job generation: every whole-job restart starts a new rendezvous id
    Column("generation", Integer, nullable=False, default=0),
    Column("plan_digest", String(64)),  # every node of a cluster run must run this plan
    # the one agent that judges a cluster run: a lease on the store's clock (compare and set)
    Column("leader", String(255)),
    Column("lease_until", Float),  # store clock, unix seconds
    # the current generation's rendezvous, NODE@HOST:PORT: the node hosting the c10d store and
    # where the others reach it (None: the plan's cluster.rendezvous, on node rank 0)
    Column("rendezvous", String(255)),
)

# One row per node of a run (a single-node run has none): who joined, with what, how alive.
nodes = Table(
    "nodes",
    metadata,
    Column("run_id", String(RUN_ID_MAX_CHARS), primary_key=True),
    Column("name", String(255), primary_key=True),
    Column("rank", Integer, nullable=False),
    Column("host", String(255)),
    Column("chips", Integer),
    Column("manifest", Text),  # JSON of the node's version manifest
    Column("preflight", String(16)),  # pass, fail, error, skipped
    Column("status", String(16), nullable=False),  # joined, running, finished, failed, lost, stopped
    Column("joined_ts", Float, nullable=False),
    Column("last_seen", Float, nullable=False),
    Column("ended_ts", Float),
    Column("restarts", Integer, nullable=False, default=0),
    Column("listen", String(255)),  # where the node serves /metrics
)

NODE_STATUSES = ("joined", "running", "finished", "failed", "lost", "stopped")

# One row per (run, node, device): samples carry this small integer instead of repeating
# their strings in every row and every index entry. It also keeps the primary-key index entries
# of ``samples`` at 4 + 8 bytes, small enough for PostgreSQL to split its pages 90/10 while
# each device's timestamps grow (instead of 50/50: half-empty pages).
sample_series = Table(
    "sample_series",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(RUN_ID_MAX_CHARS), nullable=False),
    Column("node", String(255)),  # the cluster node the device is on; None on a single-node run
    Column("device", String(64), nullable=False),  # as named on its node (npu0-0, host)
)
# One series per (run, node, device). A unique constraint would let a single-node run's
# series repeat (NULL differs from NULL there); the index counts every NULL node as one.
Index("uq_sample_series_run_node_device", sample_series.c.run_id, func.coalesce(sample_series.c.node, ""),
      sample_series.c.device, unique=True)

# One row per device per tick, wide: the canonical metric names are columns. The key is
# (series = run + device, ts): a repeated reading of a device at the same instant is kept
# once. Columns are ordered widest first so PostgreSQL pads nothing between them.
# Utilisation, temperature and power are REAL (7 significant digits; the tools report 3-4
# and the report prints 4); timestamps and byte counts stay 8 bytes wide.
samples = Table(
    "samples",
    metadata,
    Column("series_id", Integer, primary_key=True, autoincrement=False),
    Column("ts", Float, primary_key=True),
    Column("util_pct", REAL),
    Column("temp_c", REAL),
    Column("power_w", REAL),
    Column("hbm_used_bytes", BigInteger),
    Column("hbm_total_bytes", BigInteger),
    Column("host_rss_bytes", BigInteger),
    Column("comm_timeouts_total", BigInteger),
    Column("ddr_used_bytes", BigInteger),
    Column("ddr_total_bytes", BigInteger),
    Column("ecc_single_bit_errors", BigInteger),
    Column("ecc_double_bit_errors", BigInteger),
    Column("ecc_single_bit_isolated_pages", BigInteger),
    Column("ecc_double_bit_isolated_pages", BigInteger),
    Column("xid_errors", BigInteger),
    Column("link_up_count", BigInteger),
    Column("detail_ts", Float),  # when the row's health view, ECC and port were read (None: at ts)
    Column("up", Boolean, nullable=False),
    Column("healthy", Boolean),
    Column("link_up", Boolean),
    Column("health", String(32)),
    Column("error", Text),
)

# The samples as readers want them, with ``run_id``, ``node`` and ``device`` (a join the
# databases flatten): ``select(...).where(sample_rows.c.run_id == ...)``.
sample_rows = (
    select(sample_series.c.run_id, sample_series.c.node, sample_series.c.device, samples)
    .join_from(samples, sample_series, samples.c.series_id == sample_series.c.id)
    .subquery("sample_rows")
)

# Per rank, aggregated by the daemon to at most one row per rank per window (10 s by default).
steps = Table(
    "steps",
    metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("run_id", String(RUN_ID_MAX_CHARS), nullable=False),
    Column("ts", Float, nullable=False),
    Column("workload", String(64), nullable=False),
    Column("rank", Integer, nullable=False),
    Column("step", BigInteger, nullable=False),
    Column("n_steps", Integer),  # heartbeat step lines folded into this row
    Column("step_time_s", Float),  # median over the window
    # median over the window of the time outside the collectives: under synchronous data
    # parallelism the fast ranks wait in the all-reduce, so only this shows the slow rank
    Column("compute_s", Float),
    Column("loss", Float),
    Column("tokens_per_s", Float),
    Column("tflops", Float),
    Column("mem_allocated_bytes", BigInteger),
    Column("mem_reserved_bytes", BigInteger),
    Column("mem_peak_bytes", BigInteger),
    Column("host_rss_bytes", BigInteger),
    Column("comm_timeouts", Integer),
    Column("attempt", Integer),
    Column("node", String(255)),
    Column("numeric_checks", BigInteger),  # cumulative per rank: numerical checks run, passed or not
)
Index("ix_steps_run_rank_ts", steps.c.run_id, steps.c.rank, steps.c.ts)

EVENT_KINDS = (
    "start",
    "stop",
    "restart",
    "checkpoint",
    "phase",
    "comm_timeout",
    "inject",
    "gap",
    "resume",
    "note",
    "preflight",
    "finding",
    "crash",
    "hang",
    "exit",
    "disk",
    "outage",  # a reader or chips without readings: start, end_ts, error (no table change)
    "data_stall",  # a step waited for its data: ts its end, detail.seconds (wall) how long
    "store_outage",  # the store did not answer: start, end_ts, node; what it missed was spooled and written later
    "node_joined",
    "node_lost",
    "cluster_restart",
    "capture",  # a profiler capture: detail = its summary and trace path (soak.analysis.captures)
    "link_test",  # the pairwise link test between nodes: detail.pairs (soak.analysis.links)
    "device_fault",  # the chip's own fault report changed: detail = soak.analysis.device_faults.FaultChange
    "clock_drift",  # a node's clock past (or back within) cluster.max_clock_offset of the store's
    # a workload's numerical check (soak.analysis.numerics): detail = the heartbeat's fields
    # (check, error, tolerance, suspect_rank, classification, ...) with chip, serial, severity
    "sdc",
    "nonfinite",
    "loss_spike",
    "alignment",
)


events = Table(
    "events",
    metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("run_id", String(RUN_ID_MAX_CHARS), nullable=False),
    Column("ts", Float, nullable=False),
    Column("end_ts", Float),  # for spans (a gap)
    Column("kind", String(32), nullable=False),
    Column("workload", String(64)),
    Column("rank", Integer),
    Column("message", Text),
    Column("detail", Text),  # JSON object
    Column("node", String(255)),  # the node it happened on (cluster runs)
)
Index("ix_events_run_ts", events.c.run_id, events.c.ts)

findings = Table(
    "findings",
    metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("run_id", String(RUN_ID_MAX_CHARS), nullable=False),
    Column("kind", String(64), nullable=False),
    Column("device", String(64)),
    Column("metric", String(64)),
    Column("start_ts", Float),
    Column("end_ts", Float),
    Column("severity", String(16)),
    Column("summary", Text),
    Column("detail", Text),  # JSON object: the analysis' own keys (slope_per_hour, ...)
    Column("node", String(255)),
)
Index("ix_findings_run", findings.c.run_id)

def _split_node_device(conn: Connection) -> None:
    """Version 5 to 6: ``sample_series`` gains ``node``, and what version 5 stored as one
    ``node/device`` string becomes the two columns, in series and findings alike.

    This is the one place soak takes such a string apart: version 5 kept a cluster node's
    device as ``node/device`` (the node agents' devices, and the findings of a cluster judged
    from its samples), and a node name holds no ``/`` (``soak.cluster.node``), so the text
    before the first one is the node. Everything after version 5 keeps the two apart.
    """
    ss, f = sample_series, findings
    if conn.dialect.name == "sqlite":
        # SQLite cannot drop the old unique (run_id, device) constraint: the table is made
        # anew with the same ids (the samples refer to them)
        conn.execute(text("ALTER TABLE sample_series RENAME TO sample_series_v5"))
        ss.create(conn)
        conn.execute(text("INSERT INTO sample_series (id, run_id, device) SELECT id, run_id, device FROM sample_series_v5"))
        conn.execute(text("DROP TABLE sample_series_v5"))
    else:
        conn.execute(text("ALTER TABLE sample_series ADD COLUMN node VARCHAR(255)"))
        conn.execute(text("ALTER TABLE sample_series DROP CONSTRAINT uq_sample_series_run_device"))
        for index in ss.indexes:
            index.create(conn)
    series = [{"sid": sid, "n": node, "d": dev}
              for sid, old in conn.execute(select(ss.c.id, ss.c.device).where(ss.c.device.contains("/")))
              for node, _, dev in [old.partition("/")]]
    if series:
        conn.execute(update(ss).where(ss.c.id == bindparam("sid")).values(node=bindparam("n"), device=bindparam("d")),
                     series)
    rows = []
    for fid, node, device, detail in conn.execute(select(f.c.id, f.c.node, f.c.device, f.c.detail)):
        # version 5 also copied a finding's node into its detail: the column holds it now
        extra = json.loads(detail) if detail else {}
        if "node" not in extra and not (device and "/" in device):
            continue
        node = node or extra.pop("node", None)
        extra.pop("node", None)
        if device and "/" in device:
            prefix, _, device = device.partition("/")
            node = node or prefix
        rows.append({"fid": fid, "n": node, "d": device, "x": json.dumps(extra)})
    if rows:
        conn.execute(update(f).where(f.c.id == bindparam("fid"))
                     .values(node=bindparam("n"), device=bindparam("d"), detail=bindparam("x")), rows)


# Upgrades in place, from the version named to the next: columns added with their defaults
# (new tables are created by ``create_all``), plain DDL both SQLite and PostgreSQL accept; or a
# step that needs more, given the connection of the upgrade's transaction.
MIGRATIONS: dict[int, tuple[str | Callable[[Connection], None], ...]] = {
    2: (
        "ALTER TABLE runs ADD COLUMN nodes INTEGER NOT NULL DEFAULT 1",
        "ALTER TABLE runs ADD COLUMN generation INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE runs ADD COLUMN plan_digest VARCHAR(64)",
        "ALTER TABLE events ADD COLUMN node VARCHAR(255)",
        "ALTER TABLE steps ADD COLUMN node VARCHAR(255)",
        "ALTER TABLE findings ADD COLUMN node VARCHAR(255)",
    ),
    3: ("ALTER TABLE steps ADD COLUMN compute_s FLOAT",),
    4: (),  # chip_buckets is a new table: create_all makes it
    5: (_split_node_device,),
    6: (
        "ALTER TABLE runs ADD COLUMN leader VARCHAR(255)",
        "ALTER TABLE runs ADD COLUMN lease_until FLOAT",
        "ALTER TABLE runs ADD COLUMN rendezvous VARCHAR(255)",
    ),
    7: tuple(f"ALTER TABLE samples ADD COLUMN {c} BIGINT" for c in (
        "ecc_single_bit_isolated_pages", "ecc_double_bit_isolated_pages", "xid_errors", "link_up_count")),
    8: ("ALTER TABLE steps ADD COLUMN numeric_checks BIGINT",),
    9: ("ALTER TABLE samples ADD COLUMN detail_ts FLOAT",),
}

# A cluster run's per-chip summaries, written by each node agent for its own chips and ranks
# as the run goes (``soak.analysis.peers.bucket_rows``): per time bucket of the peer
# comparison, the bucket statistic of a metric (median; HBM: minimum), the readings it came
# from, and the seconds of the bucket those readings cover (``soak.analysis.evidence``). The
# leader compares and judges the whole cluster from these rows, never from every node's raw
# samples. ``metric`` "any" is a chip's readings of any chip metric (chip-hours). The key
# makes a rewrite of a bucket (an agent resumed) a no-op.
chip_buckets = Table(
    "chip_buckets",
    metadata,
    # key in this order: the leader reads one metric of every chip at a time, in key order
    Column("run_id", String(RUN_ID_MAX_CHARS), primary_key=True),
    Column("metric", String(32), primary_key=True),
    Column("node", String(255), primary_key=True),
    Column("device", String(64), primary_key=True),
    Column("ts", Float, primary_key=True),  # the bucket's start, run time line
    Column("value", Float),  # None: no reading in the bucket (coverage only)
    Column("n", Integer, nullable=False),
    Column("covered_s", Float, nullable=False),
)
Index("ix_chip_buckets_node_ts", chip_buckets.c.run_id, chip_buckets.c.node, chip_buckets.c.ts)  # where a node is

# Sample columns that carry canonical metrics: every records.METRICS name but step_time_s,
# which lives in the steps table (a new metric needs its column in `samples` above).
SAMPLE_METRIC_COLUMNS: tuple[str, ...] = tuple(m for m in METRICS if m != "step_time_s")
# The other value columns of a sample: the device's state at the tick (up, health, ECC, ...),
# named as the DeviceSample fields they hold.
SAMPLE_STATE_COLUMNS: tuple[str, ...] = tuple(
    c.name for c in samples.c if c.name not in ("series_id", "ts", *SAMPLE_METRIC_COLUMNS)
)
