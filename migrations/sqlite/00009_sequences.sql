-- Sequences: business numbers, formatted ("INV-2026-000123"), restarted
-- every year, month or day in a named time zone, each accounted for.
--
-- sequences holds the settings, fixed when a sequence is created.
-- sequence_counters holds one row per sequence and period: the last number
-- issued in it. sequence_ledger holds one row per number ever handed out,
-- written in the transaction that advances the counter: within a period it
-- holds every number from the start value to last_number, each once. A
-- row's state goes from 'reserved' to one final state ('confirmed',
-- 'voided', 'expired') and never changes again. idgen deletes no row of
-- either table; an operator who must drop the ledger of a closed period
-- does so on purpose, with SQL (docs/sequences.md).
-- Periods are the store's: 'all' (never reset), '2026', '2026-11' or
-- '2026-11-27', read from the database's now() in the sequence's zone.

-- Times are UTC text, 'YYYY-MM-DD HH:MM:SS.SSS', so they sort and read as times.

-- +goose Up
CREATE TABLE sequences (
    name         TEXT    NOT NULL PRIMARY KEY, -- byte order (BINARY collation)
    format       TEXT    NOT NULL,
    reset_period TEXT    NOT NULL,
    time_zone    TEXT    NOT NULL,
    start_value  INTEGER NOT NULL,
    ttl_ms       INTEGER NOT NULL,
    description  TEXT    NOT NULL DEFAULT '',
    created_at   TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    CONSTRAINT sequences_name_check  CHECK (length(name) BETWEEN 1 AND 64),
    CONSTRAINT sequences_reset_check CHECK (reset_period IN ('none', 'yearly', 'monthly', 'daily')),
    CONSTRAINT sequences_start_check CHECK (start_value >= 0),
    CONSTRAINT sequences_ttl_check   CHECK (ttl_ms > 0)
) STRICT;

CREATE TABLE sequence_counters (
    sequence    TEXT    NOT NULL REFERENCES sequences (name),
    period      TEXT    NOT NULL,
    last_number INTEGER NOT NULL, -- start_value - 1 before the first number
    updated_at  TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    PRIMARY KEY (sequence, period)
) STRICT;

CREATE TABLE sequence_ledger (
    sequence       TEXT    NOT NULL,
    period         TEXT    NOT NULL,
    number         INTEGER NOT NULL,
    formatted      TEXT    NOT NULL,
    state          TEXT    NOT NULL,
    reservation_id TEXT    NOT NULL,
    caller         TEXT    NOT NULL, -- token name; '' without tokens
    request_id     TEXT    NOT NULL,
    reserved_at    TEXT    NOT NULL,
    expires_at     TEXT    NOT NULL,
    settled_at     TEXT,             -- NULL while reserved
    PRIMARY KEY (sequence, period, number),
    FOREIGN KEY (sequence, period) REFERENCES sequence_counters (sequence, period),
    CONSTRAINT sequence_ledger_state_check CHECK (state IN ('reserved', 'confirmed', 'voided', 'expired'))
) STRICT;
-- Formatted numbers never repeat within a sequence, whatever the period.
CREATE UNIQUE INDEX sequence_ledger_formatted ON sequence_ledger (sequence, formatted);
CREATE INDEX sequence_ledger_reservation ON sequence_ledger (sequence, reservation_id);
CREATE INDEX sequence_ledger_open ON sequence_ledger (sequence, expires_at) WHERE state = 'reserved';

-- +goose Down
DROP TABLE sequence_ledger;
DROP TABLE sequence_counters;
DROP TABLE sequences;
