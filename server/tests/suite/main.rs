//! The integration suite: every test runs against SQLite and PostgreSQL through the real router.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod access;
mod audit;
mod auth;
mod cli;
mod conformance;
mod directory;
mod in_use;
mod input;
mod isolation;
mod jobs;
mod ldap;
mod openapi;
mod policies;
mod saml;
mod scim;
mod sign_in;
mod sso;
mod store;
