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

-- +goose Up
CREATE TABLE sequences (
    name         text        PRIMARY KEY COLLATE "C",
    format       text        NOT NULL,
    reset_period text        NOT NULL,
    time_zone    text        NOT NULL,
    start_value  bigint      NOT NULL,
    ttl_ms       bigint      NOT NULL,
    description  text        NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT sequences_name_check  CHECK (length(name) BETWEEN 1 AND 64),
    CONSTRAINT sequences_reset_check CHECK (reset_period IN ('none', 'yearly', 'monthly', 'daily')),
    CONSTRAINT sequences_start_check CHECK (start_value >= 0),
    CONSTRAINT sequences_ttl_check   CHECK (ttl_ms > 0)
);

CREATE TABLE sequence_counters (
    sequence    text        NOT NULL COLLATE "C" REFERENCES sequences (name),
    period      text        NOT NULL COLLATE "C",
    last_number bigint      NOT NULL, -- start_value - 1 before the first number
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (sequence, period)
);

CREATE TABLE sequence_ledger (
    sequence       text        NOT NULL COLLATE "C",
    period         text        NOT NULL COLLATE "C",
    number         bigint      NOT NULL,
    formatted      text        NOT NULL,
    state          text        NOT NULL,
    reservation_id text        NOT NULL,
    caller         text        NOT NULL, -- token name; '' without tokens
    request_id     text        NOT NULL,
    reserved_at    timestamptz NOT NULL,
    expires_at     timestamptz NOT NULL,
    settled_at     timestamptz,          -- NULL while reserved
    PRIMARY KEY (sequence, period, number),
    FOREIGN KEY (sequence, period) REFERENCES sequence_counters (sequence, period),
    CONSTRAINT sequence_ledger_state_check CHECK (state IN ('reserved', 'confirmed', 'voided', 'expired'))
);
-- Formatted numbers never repeat within a sequence, whatever the period.
CREATE UNIQUE INDEX sequence_ledger_formatted ON sequence_ledger (sequence, formatted);
CREATE INDEX sequence_ledger_reservation ON sequence_ledger (sequence, reservation_id);
CREATE INDEX sequence_ledger_open ON sequence_ledger (sequence, expires_at) WHERE state = 'reserved';

-- +goose Down
DROP TABLE sequence_ledger;
DROP TABLE sequence_counters;
DROP TABLE sequences;
