//! The AI Application Gateway: endpoints (a project's named services) and their instances,
//! the namespace-scoped gateways with their listeners and tokens, static routes, and the data
//! path that authenticates, authorizes and balances each request.
//!
//! Owns `endpoints`, `endpoint_targets`, `gateways`, `gateway_routes`, `gateway_tcp_routes` and `gateway_tokens`.
//! Every write commits with its audit entry and says [`crate::store::WriteTx::access_changed`],
//! so the in-memory [`snapshot`] that the data path reads (no database on the hot path) is
//! rebuilt before the next request; identity and access writes (memberships, users, rules,
//! projects) say the same.

pub mod affinity;
pub mod api;
mod cores;
pub mod endpoints;
mod h1;
pub mod instances;
pub mod listener;
pub mod metrics;
mod names;
pub mod overview;
mod problem;
pub mod proxy;
mod refused;
pub mod routes;
pub mod runtime;
pub mod sampler;
pub mod series;
pub mod shared;
pub mod snapshot;
pub mod tcp;
pub mod tcp_api;
pub mod tcp_routes;
pub mod tls;
pub mod tokens;
mod upgrade;
pub mod upstream;
pub mod usage;

pub use runtime::start;
pub use shared::Gateways;
