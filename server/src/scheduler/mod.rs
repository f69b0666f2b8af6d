//! GPU scheduling. [`core`] is the pure decision function over a snapshot; [`resources`] the
//! tenant's pools, profiles, policies and queues; [`jobs`] submission and the job lifecycle;
//! [`executor`] the seam to the machines that run jobs.

pub mod api;
pub mod caps;
pub mod core;
pub mod driver;
pub mod executor;
pub mod grants;
pub mod jobs;
pub mod overview;
pub mod resources;

#[cfg(test)]
mod tests;
