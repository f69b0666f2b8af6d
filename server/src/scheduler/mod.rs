//! GPU scheduling. [`core`] is the pure decision function over a snapshot; the driver that loads
//! snapshots from the store, commits decisions and hands jobs to executors builds on it.

pub mod core;

#[cfg(test)]
mod tests;
