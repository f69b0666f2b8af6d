//! The HTTP edge: router assembly (`router`), the extractors every handler uses (`extract`,
//! with `Caller`), problem+json errors, request ids, input cleaning, metrics, and starting and
//! stopping the server (`serve`). Domain routers live with their domains and import from here;
//! only `router` imports them.

pub mod error;
pub mod extract;
mod metrics;
pub mod problems;
pub mod registry;
pub mod request_id;
pub mod router;
pub mod serve;
pub mod text;

pub use extract::Caller;
pub use router::{app, rest};
