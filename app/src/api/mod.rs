//! Server functions used by the pages. Each one resolves the caller from the request (the
//! server's auth middleware put the [`Principal`] into the request extensions) and calls the
//! [`crate::backend::Backend`]. State-changing ones check the session's CSRF token.

// Server functions take a form's fields as arguments, one per input.
#![allow(clippy::too_many_arguments)]

use leptos::prelude::*;

use crate::error::AppError;

#[cfg(feature = "ssr")]
use crate::form;
#[cfg(feature = "ssr")]
use crate::model::{
    AbortSpec, Auth, CreateGroup, CreatePool, CreateProfile, CreateQueue, CreateTenant, CreateUser,
    GroupSync, LdapSettings, OidcSettings, PoolNode, Principal, RequestMeta, SamlSettings,
    SaveIdentityProvider, SetPolicy, SubmitJob,
};
use crate::model::{
    AuditEntry, AuditFilter, ConnectionCheck, Group, GroupDetail, IdentityProvider, Job, JobDetail,
    JobQuery, Page, Policy, PolicyConfig, PolicyOverview, Pool, PortalOverview, Profile, Queue,
    SessionInfo, SignInOptions, SignInSettings, Tenant, TenantSummary, User, UserAccess,
};

mod catalog;
mod directory;
mod gateway;
pub mod history;
mod identity;
mod policy;
mod scheduling;
mod sso;

pub use catalog::*;
pub use directory::*;
pub use gateway::*;
pub use identity::*;
pub use policy::*;
pub use scheduling::*;
pub use sso::*;

#[cfg(feature = "ssr")]
mod ctx {
    use std::future::Future;

    use super::*;
    use crate::backend::SharedBackend;

    pub struct Call {
        pub backend: SharedBackend,
        pub principal: Principal,
        pub meta: RequestMeta,
    }

    fn parts() -> Result<http::request::Parts, AppError> {
        use_context::<http::request::Parts>().ok_or(AppError::Internal)
    }

    pub fn principal() -> Result<Option<Principal>, AppError> {
        Ok(parts()?.extensions.get::<Principal>().cloned())
    }

    /// A read: any authenticated caller (the backend checks the permission).
    pub fn read() -> Result<Call, AppError> {
        let parts = parts()?;
        let principal = parts
            .extensions
            .get::<Principal>()
            .cloned()
            .ok_or(AppError::Unauthorized)?;
        let backend = use_context::<SharedBackend>().ok_or(AppError::Internal)?;
        let meta = parts
            .extensions
            .get::<RequestMeta>()
            .cloned()
            .unwrap_or_default();
        Ok(Call {
            backend,
            principal,
            meta,
        })
    }

    /// No caller needed (public data such as a tenant's sign-in options).
    pub fn backend() -> Result<SharedBackend, AppError> {
        use_context::<SharedBackend>().ok_or(AppError::Internal)
    }

    /// A write: also requires the session's CSRF token (tokens in headers are not ambient
    /// credentials and need none).
    pub fn write(csrf: &str) -> Result<Call, AppError> {
        let call = read()?;
        if let Auth::Session { csrf: expected, .. } = &call.principal.auth {
            if !crate::secret::constant_time_eq(expected.as_bytes(), csrf.as_bytes()) {
                return Err(AppError::Forbidden);
            }
        }
        Ok(call)
    }

    /// The body of a read server function: resolves the caller with [`read`], runs `f` with
    /// it and passes the result through [`answer`].
    pub async fn reading<T, F, Fut>(f: F) -> Result<T, AppError>
    where
        F: FnOnce(Call) -> Fut,
        Fut: Future<Output = Result<T, AppError>>,
    {
        answer(match read() {
            Ok(call) => f(call).await,
            Err(e) => Err(e),
        })
    }

    /// The body of a state-changing server function: like [`reading`], but the caller is
    /// resolved with [`write`], so the CSRF token is checked before `f` runs.
    pub async fn writing<T, F, Fut>(csrf: &str, f: F) -> Result<T, AppError>
    where
        F: FnOnce(Call) -> Fut,
        Fut: Future<Output = Result<T, AppError>>,
    {
        answer(match write(csrf) {
            Ok(call) => f(call).await,
            Err(e) => Err(e),
        })
    }

    /// Gives a failed call its real HTTP status (422, 403, 404…) instead of server_fn's 500,
    /// so that logs, metrics and proxies see a client error as one. Plain form posts
    /// (no JavaScript) are left alone: they are answered with a redirect back to the page.
    pub fn answer<T>(result: Result<T, AppError>) -> Result<T, AppError> {
        if let Err(e) = &result {
            let html = parts()
                .ok()
                .and_then(|p| {
                    p.headers
                        .get(http::header::ACCEPT)
                        .and_then(|v| v.to_str().ok())
                        .map(|v| v.contains("text/html"))
                })
                .unwrap_or(false);
            if !html {
                if let (Some(res), Ok(code)) = (
                    use_context::<leptos_axum::ResponseOptions>(),
                    http::StatusCode::from_u16(e.status()),
                ) {
                    res.set_status(code);
                }
            }
        }
        result
    }
}
