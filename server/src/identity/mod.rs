//! Identity: local accounts, single sign-on (OIDC, LDAP), sessions, API tokens, groups, memberships,
//! projects, and the access check every handler calls.

pub mod api;
pub mod directory;
pub mod idp_api;
pub mod ldap;
pub mod oidc;
pub mod outbound;
pub mod password;
pub mod saml;
pub mod secret;
pub mod sso;
pub mod sso_link;
pub mod throttle;
pub mod tokens;

use app::access::{allowed, Action};
use app::model::Principal;

use crate::api::error::{ApiError, AppError};

/// The access check: every handler calls this before touching data. The tenant of the data is
/// always `p.tenant_id()`, never taken from the request.
pub fn require(p: &Principal, action: Action) -> Result<(), ApiError> {
    if allowed(&p.me, action) {
        Ok(())
    } else {
        Err(ApiError(AppError::Forbidden))
    }
}
