//! The HTTP toolkit every domain's handlers use: the extractors (`extract`, with `Caller`),
//! problem+json errors, request ids, input cleaning and the metrics registry. It imports no
//! domain; the domains' routers are put together above them all, in `routes`.

pub mod error;
pub mod extract;
pub mod problems;
pub mod registry;
pub mod request_id;
pub mod text;

pub use extract::Caller;

use app::access::{allowed, Action};
use app::model::Principal;

use error::{ApiError, AppError};

/// The access check: every handler calls this before touching data. The tenant of the data is
/// always `p.tenant_id()`, never taken from the request.
pub fn require(p: &Principal, action: Action) -> Result<(), ApiError> {
    if allowed(&p.me, action) {
        Ok(())
    } else {
        Err(ApiError(AppError::Forbidden))
    }
}
