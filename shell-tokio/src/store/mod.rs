//! The stores behind the KV protocol: embedded SQLite (the default).

mod sqlite;

pub use sqlite::Sqlite;

#[cfg(test)]
mod conformance;
