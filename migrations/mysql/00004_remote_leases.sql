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
-- Replacing the CHECK constraint (DROP CONSTRAINT) needs MySQL 8.0.19 or
-- later, or MariaDB 10.2 or later.

-- +goose Up
ALTER TABLE worker_leases
    ADD COLUMN owner       VARCHAR(255) NULL AFTER holder,                     -- caller a remote holder acts for; NULL for idgen's nodes and when free
    ADD COLUMN ts_floor_ms BIGINT       NOT NULL DEFAULT 0 AFTER ts_ceiling_ms, -- lowest Snowflake timestamp the holder may use; 0: unknown
    ADD CONSTRAINT worker_leases_floor_check CHECK (ts_floor_ms >= 0 AND ts_floor_ms <= ts_ceiling_ms + 1),
    ADD CONSTRAINT worker_leases_owner_check CHECK (owner IS NULL OR owner <> '');

ALTER TABLE lease_events
    ADD COLUMN owner      VARCHAR(255) NULL AFTER holder, -- caller the event was recorded for (the operator for evict)
    ADD COLUMN request_id VARCHAR(255) NULL AFTER owner,  -- request that caused it
    DROP CONSTRAINT lease_events_event_check;
ALTER TABLE lease_events
    ADD CONSTRAINT lease_events_event_check CHECK (event IN ('acquire', 'takeover', 'release', 'lost', 'evict')),
    ADD KEY lease_events_holder_idx (holder, id),
    ADD KEY lease_events_owner_idx (owner, id),
    ADD KEY lease_events_event_idx (event, id),
    ADD KEY lease_events_at_idx (at);

ALTER TABLE segments ADD COLUMN deleted_at DATETIME(6) NULL; -- NULL: live; else when the namespace was deleted

-- +goose Down
-- Deleted namespaces come back as live ones, with their max_id: none starts
-- again below IDs handed out. Evictions have no place in the old schema's
-- audit trail and are dropped from it.
ALTER TABLE segments DROP COLUMN deleted_at;

DELETE FROM lease_events WHERE event = 'evict';
ALTER TABLE lease_events
    DROP KEY lease_events_at_idx,
    DROP KEY lease_events_event_idx,
    DROP KEY lease_events_owner_idx,
    DROP KEY lease_events_holder_idx,
    DROP CONSTRAINT lease_events_event_check;
ALTER TABLE lease_events
    ADD CONSTRAINT lease_events_event_check CHECK (event IN ('acquire', 'takeover', 'release', 'lost')),
    DROP COLUMN request_id,
    DROP COLUMN owner;

ALTER TABLE worker_leases
    DROP CONSTRAINT worker_leases_owner_check,
    DROP CONSTRAINT worker_leases_floor_check;
ALTER TABLE worker_leases
    DROP COLUMN ts_floor_ms,
    DROP COLUMN owner;
