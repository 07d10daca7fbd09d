-- Restore fences (idgen restore-fence).
--
-- store_fence holds one row: store_id, a random identity given to the store
-- when this table is created, which a copy of the file carries along;
-- generation, how many restore fences ran on the store; ceiling_ms, the
-- ceiling of the last fence, which worker rows created later start at (a
-- pool widened after a backup was taken has no rows in it); fenced_at and
-- detail, when and how the last fence ran. A node compares store_id and
-- generation with its own state file at start.
-- lease_events.event gains 'fence': a restore fence took the lease from its
-- holder and raised its ceiling.
--
-- SQLite cannot change a CHECK constraint, so lease_events is rebuilt, both
-- ways, with its AUTOINCREMENT counter carried over (as in 00004).

-- +goose Up
CREATE TABLE store_fence (
    id         INTEGER NOT NULL PRIMARY KEY, -- always 1: the table holds one row
    store_id   TEXT    NOT NULL,             -- random, set once
    generation INTEGER NOT NULL DEFAULT 0,
    ceiling_ms INTEGER NOT NULL DEFAULT 0,   -- Unix ms: the ceiling of worker rows created after the last fence
    fenced_at  TEXT,                         -- UTC; NULL: never fenced
    detail     TEXT    NOT NULL DEFAULT '',
    CONSTRAINT store_fence_single_row CHECK (id = 1),
    CONSTRAINT store_fence_values_check CHECK (generation >= 0 AND ceiling_ms >= 0 AND store_id <> '')
) STRICT;
INSERT INTO store_fence (id, store_id) VALUES (1, lower(hex(randomblob(16))));

CREATE TABLE lease_events_new (
    id              INTEGER PRIMARY KEY AUTOINCREMENT, -- never reused, so paging by id is safe
    datacenter_id   INTEGER NOT NULL,
    worker_id       INTEGER NOT NULL,
    holder          TEXT    NOT NULL,
    owner           TEXT,                              -- caller the event was recorded for (the operator for evict and fence)
    request_id      TEXT,                              -- request that caused it
    fencing_version INTEGER NOT NULL,
    event           TEXT    NOT NULL,                  -- acquire, takeover, release, lost, evict or fence
    at              TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    detail          TEXT    NOT NULL DEFAULT '',
    CONSTRAINT lease_events_event_check CHECK (event IN ('acquire', 'takeover', 'release', 'lost', 'evict', 'fence'))
) STRICT;
INSERT INTO sqlite_sequence (name, seq) SELECT 'lease_events_new', seq FROM sqlite_sequence WHERE name = 'lease_events';
INSERT INTO lease_events_new (id, datacenter_id, worker_id, holder, owner, request_id, fencing_version, event, at, detail)
SELECT id, datacenter_id, worker_id, holder, owner, request_id, fencing_version, event, at, detail FROM lease_events;
DROP TABLE lease_events;
ALTER TABLE lease_events_new RENAME TO lease_events;
CREATE INDEX lease_events_worker_idx ON lease_events (datacenter_id, worker_id, id);
CREATE INDEX lease_events_holder_idx ON lease_events (holder, id);
CREATE INDEX lease_events_owner_idx ON lease_events (owner, id);
CREATE INDEX lease_events_event_idx ON lease_events (event, id);
CREATE INDEX lease_events_at_idx ON lease_events (at);

-- +goose Down
-- Fence events have no place in the old schema's audit trail and are
-- dropped from it.
CREATE TABLE lease_events_old (
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
INSERT INTO sqlite_sequence (name, seq) SELECT 'lease_events_old', seq FROM sqlite_sequence WHERE name = 'lease_events';
INSERT INTO lease_events_old (id, datacenter_id, worker_id, holder, owner, request_id, fencing_version, event, at, detail)
SELECT id, datacenter_id, worker_id, holder, owner, request_id, fencing_version, event, at, detail FROM lease_events WHERE event <> 'fence';
DROP TABLE lease_events;
ALTER TABLE lease_events_old RENAME TO lease_events;
CREATE INDEX lease_events_worker_idx ON lease_events (datacenter_id, worker_id, id);
CREATE INDEX lease_events_holder_idx ON lease_events (holder, id);
CREATE INDEX lease_events_owner_idx ON lease_events (owner, id);
CREATE INDEX lease_events_event_idx ON lease_events (event, id);
CREATE INDEX lease_events_at_idx ON lease_events (at);

DROP TABLE store_fence;
