-- Leases for remote holders, their audit trail, evictions and namespace
-- tombstones.
--
-- worker_leases.ts_floor_ms: the lowest Snowflake timestamp the holder of the
-- last claim may use, one above the ceiling that claim found. A release gives
-- the last timestamp used, and the store sets the ceiling to the larger of it
-- and ts_floor_ms - 1, refusing one above the ceiling or below the floor.
-- Rows claimed before this migration have 0: unknown (a release then never
-- lowers the ceiling below the last timestamp used, and keeps it when none was).
-- worker_leases.owner and lease_events.owner: the authenticated caller a
-- remote holder acts for (the operator for an eviction); NULL for idgen's own
-- nodes. lease_events.request_id: the request that caused the event.
-- lease_events.event gains 'evict': an operator took the lease from its holder.
-- The indexes serve the reader's filters and the pruning by age.
-- segments.deleted_at: a deleted namespace is a tombstone, never a removed
-- row, so that one created again under the same name starts above the IDs
-- already handed out.
--
-- SQLite cannot change a CHECK constraint, so lease_events is rebuilt, both
-- ways. Its AUTOINCREMENT counter is carried over, so that no event ID is
-- ever used twice, even one whose event was pruned. The new columns of
-- worker_leases carry their constraints, so that the way down can drop them.

-- +goose Up
ALTER TABLE worker_leases ADD COLUMN ts_floor_ms INTEGER NOT NULL DEFAULT 0 -- lowest Snowflake timestamp the holder may use; 0: unknown
    CONSTRAINT worker_leases_floor_check CHECK (ts_floor_ms >= 0 AND ts_floor_ms <= ts_ceiling_ms + 1);
ALTER TABLE worker_leases ADD COLUMN owner TEXT -- caller a remote holder acts for; NULL for idgen's nodes and when free
    CONSTRAINT worker_leases_owner_check CHECK (owner IS NULL OR owner <> '');

CREATE TABLE lease_events_new (
    id              INTEGER PRIMARY KEY AUTOINCREMENT, -- never reused, so paging by id is safe
    datacenter_id   INTEGER NOT NULL,
    worker_id       INTEGER NOT NULL,
    holder          TEXT    NOT NULL,
    owner           TEXT,                              -- caller the event was recorded for (the operator for evict)
    request_id      TEXT,                              -- request that caused it
    fencing_version INTEGER NOT NULL,
    event           TEXT    NOT NULL,                  -- acquire, takeover, release, lost or evict
    at              TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    detail          TEXT    NOT NULL DEFAULT '',
    CONSTRAINT lease_events_event_check CHECK (event IN ('acquire', 'takeover', 'release', 'lost', 'evict'))
) STRICT;
INSERT INTO sqlite_sequence (name, seq) SELECT 'lease_events_new', seq FROM sqlite_sequence WHERE name = 'lease_events';
INSERT INTO lease_events_new (id, datacenter_id, worker_id, holder, fencing_version, event, at, detail)
SELECT id, datacenter_id, worker_id, holder, fencing_version, event, at, detail FROM lease_events;
DROP TABLE lease_events;
ALTER TABLE lease_events_new RENAME TO lease_events;
CREATE INDEX lease_events_worker_idx ON lease_events (datacenter_id, worker_id, id);
CREATE INDEX lease_events_holder_idx ON lease_events (holder, id);
CREATE INDEX lease_events_owner_idx ON lease_events (owner, id);
CREATE INDEX lease_events_event_idx ON lease_events (event, id);
CREATE INDEX lease_events_at_idx ON lease_events (at);

ALTER TABLE segments ADD COLUMN deleted_at TEXT; -- NULL: live; else when the namespace was deleted

-- +goose Down
-- Deleted namespaces come back as live ones, with their max_id: none starts
-- again below IDs handed out. Evictions have no place in the old schema's
-- audit trail and are dropped from it.
ALTER TABLE segments DROP COLUMN deleted_at;

CREATE TABLE lease_events_old (
    id              INTEGER PRIMARY KEY AUTOINCREMENT, -- never reused, so paging by id is safe
    datacenter_id   INTEGER NOT NULL,
    worker_id       INTEGER NOT NULL,
    holder          TEXT    NOT NULL,
    fencing_version INTEGER NOT NULL,
    event           TEXT    NOT NULL,                  -- acquire, takeover, release or lost
    at              TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    detail          TEXT    NOT NULL DEFAULT '',
    CONSTRAINT lease_events_event_check CHECK (event IN ('acquire', 'takeover', 'release', 'lost'))
) STRICT;
INSERT INTO sqlite_sequence (name, seq) SELECT 'lease_events_old', seq FROM sqlite_sequence WHERE name = 'lease_events';
INSERT INTO lease_events_old (id, datacenter_id, worker_id, holder, fencing_version, event, at, detail)
SELECT id, datacenter_id, worker_id, holder, fencing_version, event, at, detail FROM lease_events WHERE event <> 'evict';
DROP TABLE lease_events;
ALTER TABLE lease_events_old RENAME TO lease_events;
CREATE INDEX lease_events_worker_idx ON lease_events (datacenter_id, worker_id, id);

ALTER TABLE worker_leases DROP COLUMN owner;
ALTER TABLE worker_leases DROP COLUMN ts_floor_ms;
