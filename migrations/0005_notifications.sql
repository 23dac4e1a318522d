-- 0005_notifications: the
-- notification outbox. A row is written in the same transaction as the
-- run's state change and its event, one per channel, so a notification due
-- when the daemon dies is still due when it restarts; a row leaves
-- 'pending' when its delivery is recorded (each attempt is also an event).

CREATE TABLE notifications (
    id          INTEGER PRIMARY KEY,
    run_id      TEXT    NOT NULL REFERENCES runs (id),
    event_seq   INTEGER NOT NULL,                 -- the event that made it due
    event_type  TEXT    NOT NULL,
    channel     TEXT    NOT NULL CHECK (channel IN ('command', 'webhook', 'desktop')),
    state       TEXT    NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sent', 'failed')),
    attempts    INTEGER NOT NULL DEFAULT 0,
    next_at     INTEGER NOT NULL,                 -- when the next attempt is due
    created_at  INTEGER NOT NULL,
    done_at     INTEGER,
    last_error  TEXT    NOT NULL DEFAULT '',
    UNIQUE (event_seq, channel)
);
CREATE INDEX notifications_due ON notifications (next_at) WHERE state = 'pending';
