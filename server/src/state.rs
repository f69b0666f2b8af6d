//! The application state every handler receives.

use std::sync::{Arc, Mutex};

use axum::extract::FromRef;
use leptos::config::LeptosOptions;

use crate::config::Config;
use crate::http::registry::Metrics;
use crate::identity::throttle::Throttle;
use crate::scheduler::driver::SchedulerHandle;
use crate::store::Store;

#[derive(Clone, FromRef)]
pub struct AppState {
    pub store: Store,
    pub config: Arc<Config>,
    pub throttle: Arc<Mutex<Throttle>>,
    pub metrics: Arc<Metrics>,
    pub leptos: LeptosOptions,
    pub scheduler: SchedulerHandle,
    /// OIDC discovery documents and signing keys, per provider.
    pub oidc: Arc<crate::identity::sso::oidc::DiscoveryCache>,
    /// The gateways' snapshot, listeners and upstream state.
    pub gateways: Arc<crate::gateway::Gateways>,
}
