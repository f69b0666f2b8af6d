//! The integration suite: every test runs against SQLite and PostgreSQL through the real router.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod access;
mod audit;
mod auth;
mod cli;
mod conformance;
mod crash;
mod directory;
mod driver_faults;
mod fairness;
mod in_use;
mod input;
mod isolation;
mod jobs;
mod ldap;
mod local_jobs;
mod local_preemption;
mod openapi;
mod paging;
mod policies;
mod saml;
mod saml_settings;
mod scim;
mod scim_conformance;
mod security;
mod sign_in;
mod sign_in_limits;
mod sso;
mod sso_linking;
mod ssrf;
mod store;
mod submits;
mod time_limits;
mod web_hardening;
