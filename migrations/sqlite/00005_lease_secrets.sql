-- Lease secrets: what a lease-API holder must show besides its name.
--
-- worker_leases.secret_sha256: the SHA-256, in lower-case hex, of the random
-- secret the lease API handed the holder with its claim (returned once, in
-- the acquire answer, and never stored itself). A heartbeat or release through
-- the API matches the row only with it and with the row's owner, so that
-- knowing a holder's name and fencing version (the status page shows both)
-- is not enough to act on its lease. NULL for idgen's own nodes and when free.
-- The index on owner serves the per-caller cap on leases, which a claim counts.

-- +goose Up
ALTER TABLE worker_leases ADD COLUMN secret_sha256 TEXT -- SHA-256 (hex) of the holder's lease secret; NULL for idgen's nodes and when free
    CONSTRAINT worker_leases_secret_check CHECK (secret_sha256 IS NULL OR length(secret_sha256) = 64);
CREATE INDEX worker_leases_owner_idx ON worker_leases (owner);

-- +goose Down
-- Leases held through the API lose their secret: their holders' next
-- heartbeat or release matches on holder, owner and version again.
DROP INDEX worker_leases_owner_idx;
ALTER TABLE worker_leases DROP COLUMN secret_sha256;
