//! The jobs' change numbers (migration 0015): every write of a job row that the driver must
//! see (a new row, a state or `updated_at` change) gives the row a change number that grows in
//! commit order, and the driver reads, each cycle, only the rows numbered at or after the
//! horizon it took before its previous read. Nothing is read twice to be safe and nothing is
//! missed, whatever a transaction's length.
//!
//! - SQLite serializes writers: the number is the largest so far plus one, taken under the
//!   write lock; the horizon is the largest committed plus one, so a transaction that holds the
//!   lock while the driver reads has a number at or after it.
//! - PostgreSQL commits out of id order: the number is the writing transaction's id, and the
//!   horizon is the oldest transaction still running (`pg_snapshot_xmin`), so every
//!   transaction that commits after a read has a number at or after the horizon taken
//!   before it.
//!
//! The statements below set the number themselves; a trigger gives it to any other write of
//! a job that did not (on SQLite only then, to spare a second row write; on PostgreSQL always).

use crate::store::Dialect;

/// `change_seq = <the next change number>`, for a job `UPDATE`'s `SET` list.
pub(crate) fn set_change(d: Dialect) -> &'static str {
    match d {
        Dialect::Sqlite => "change_seq = (SELECT COALESCE(MAX(change_seq), 0) + 1 FROM jobs)",
        Dialect::Postgres => "change_seq = pg_current_xact_id()::text::bigint",
    }
}

/// The next change number as a value, for a job `INSERT`.
pub(crate) fn next_change(d: Dialect) -> &'static str {
    match d {
        Dialect::Sqlite => "(SELECT COALESCE(MAX(change_seq), 0) + 1 FROM jobs)",
        Dialect::Postgres => "pg_current_xact_id()::text::bigint",
    }
}

/// The query for the horizon: taken before a read, every change committed after that read
/// has a number at or after it.
pub(crate) fn horizon_query(d: Dialect) -> &'static str {
    match d {
        Dialect::Sqlite => "SELECT COALESCE(MAX(change_seq), 0) + 1 FROM jobs",
        Dialect::Postgres => "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint",
    }
}
