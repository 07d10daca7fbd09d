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
    name         VARCHAR(64)  CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    format       VARCHAR(64)  NOT NULL,
    reset_period VARCHAR(16)  NOT NULL,
    time_zone    VARCHAR(64)  NOT NULL,
    start_value  BIGINT       NOT NULL,
    ttl_ms       BIGINT       NOT NULL,
    description  VARCHAR(256) NOT NULL DEFAULT '',
    created_at   DATETIME(6)  NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    PRIMARY KEY (name),
    CONSTRAINT sequences_reset_check CHECK (reset_period IN ('none', 'yearly', 'monthly', 'daily')),
    CONSTRAINT sequences_start_check CHECK (start_value >= 0),
    CONSTRAINT sequences_ttl_check   CHECK (ttl_ms > 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE sequence_counters (
    sequence    VARCHAR(64) NOT NULL,
    period      VARCHAR(16) NOT NULL,
    last_number BIGINT      NOT NULL, -- start_value - 1 before the first number
    updated_at  DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    PRIMARY KEY (sequence, period),
    CONSTRAINT sequence_counters_sequence_fk FOREIGN KEY (sequence) REFERENCES sequences (name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE sequence_ledger (
    sequence       VARCHAR(64)  NOT NULL,
    period         VARCHAR(16)  NOT NULL,
    number         BIGINT       NOT NULL,
    formatted      VARCHAR(200) NOT NULL,
    state          VARCHAR(16)  NOT NULL,
    reservation_id VARCHAR(64)  NOT NULL,
    caller         VARCHAR(64)  NOT NULL, -- token name; '' without tokens
    request_id     VARCHAR(128) NOT NULL,
    reserved_at    DATETIME(6)  NOT NULL,
    expires_at     DATETIME(6)  NOT NULL,
    settled_at     DATETIME(6)  NULL,     -- NULL while reserved
    PRIMARY KEY (sequence, period, number),
    UNIQUE KEY sequence_ledger_formatted (sequence, formatted), -- formatted numbers never repeat
    KEY sequence_ledger_reservation (sequence, reservation_id),
    KEY sequence_ledger_open (sequence, state, expires_at),
    CONSTRAINT sequence_ledger_counter_fk FOREIGN KEY (sequence, period) REFERENCES sequence_counters (sequence, period),
    CONSTRAINT sequence_ledger_state_check CHECK (state IN ('reserved', 'confirmed', 'voided', 'expired'))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE sequence_ledger;
DROP TABLE sequence_counters;
DROP TABLE sequences;
