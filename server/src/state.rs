//! The application state of the top layer (router assembly in `routes`, pages in `web`,
//! start-up in `lib` and `cli`). No domain knows it: each domain's router is generic over the
//! state, and its handlers and middleware take only the parts they need (`State<Store>`,
//! `State<Arc<Config>>`, …), which `FromRef` extracts from this one.

use std::sync::{Arc, Mutex};

use axum::extract::FromRef;
use leptos::config::LeptosOptions;

use crate::config::Config;
use crate::http::registry::Metrics;
use crate::identity::throttle::Throttle;
use crate::scheduler::driver::SchedulerHandle;
use crate::store::Store;

/// Every field is extractable on its own as `State<FieldType>` (`FromRef`).
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
