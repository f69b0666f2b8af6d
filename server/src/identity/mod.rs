//! Identity: local accounts, single sign-on (OIDC, LDAP), sessions, API tokens, groups, memberships,
//! projects, and the access check every handler calls.

pub mod api;
pub mod directory;
pub mod login;
pub mod password;
pub mod scim;
pub mod secret;
pub mod sso;
pub mod throttle;
pub mod tokens;
