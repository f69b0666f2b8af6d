//! Switchyard's server: REST API, Leptos SSR, the scheduler with its node executors, and the
//! AI gateway. One module per domain; each owns its tables, its REST router and its tests.

pub mod access;
pub mod audit;
pub mod catalog;
pub mod cli;
pub mod clock;
pub mod config;
pub mod demo;
pub mod gateway;
pub mod http;
pub mod identity;
pub mod nodes;
pub mod policy;
pub mod routes;
pub mod scheduler;
pub mod state;
pub mod store;
pub mod tenancy;
pub mod web;

use std::sync::{Arc, Mutex};

/// mimalloc for the server and everything linking this crate (its tests and benchmarks
/// measure what runs): see server/Cargo.toml.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use leptos::config::LeptosOptions;

use crate::config::Config;
use crate::identity::throttle::{Throttle, ThrottlePolicy};
use crate::state::AppState;
use crate::store::Store;

/// Starts the scheduler's driver for this state (on the current Tokio runtime), with the
/// history sampler beside it (it stops with the driver; see `scheduler::history`).
pub fn start_scheduler(state: &AppState) -> tokio::task::JoinHandle<()> {
    scheduler::history::beside(
        &state.store,
        &state.scheduler,
        &state.config.scheduler,
        scheduler::driver::start(
            state.store.clone(),
            state.config.scheduler.clone(),
            state.scheduler.clone(),
        ),
    )
}

/// Builds the state for a connected store.
pub fn state(store: Store, config: Config) -> AppState {
    let leptos = LeptosOptions::builder()
        .output_name("switchyard")
        .site_root(config.site_root.clone())
        .site_pkg_dir("pkg")
        .site_addr(config.listen)
        .build();
    let scheduler = scheduler::driver::SchedulerHandle::for_store(&store);
    let gateways = gateway::Gateways::new(store.clone(), &config.gateway);
    AppState {
        store,
        config: Arc::new(config),
        throttle: Arc::new(Mutex::new(Throttle::new(ThrottlePolicy::default()))),
        metrics: Arc::new(http::registry::Metrics::default()),
        leptos,
        scheduler,
        oidc: Default::default(),
        gateways,
    }
}
