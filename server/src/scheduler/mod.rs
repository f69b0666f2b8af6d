//! GPU scheduling. [`core`] is the pure decision function over a snapshot; [`jobs`] submission
//! and the job lifecycle; [`driver`] the loop that loads, decides, commits and dispatches to the
//! executors of [`crate::nodes`]. The pools, profiles, policies and queues it schedules over are
//! [`crate::policy`]'s.

pub mod api;
pub(crate) mod changes;
pub mod core;
pub mod driver;
pub mod history;
pub mod jobs;
pub mod overview;

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;
