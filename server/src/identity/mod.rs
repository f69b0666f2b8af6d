//! Identity: local accounts, single sign-on (OIDC, LDAP), sessions, API tokens, groups, memberships,
//! projects, and the access check every handler calls.

pub mod api;
pub mod directory;
pub mod password;
pub mod scim;
pub mod secret;
pub mod sso;
pub mod throttle;
pub mod tokens;

use app::access::{allowed, Action};
use app::model::Principal;

use crate::http::error::{ApiError, AppError};

/// The access check: every handler calls this before touching data. The tenant of the data is
/// always `p.tenant_id()`, never taken from the request.
pub fn require(p: &Principal, action: Action) -> Result<(), ApiError> {
    if allowed(&p.me, action) {
        Ok(())
    } else {
        Err(ApiError(AppError::Forbidden))
    }
}
