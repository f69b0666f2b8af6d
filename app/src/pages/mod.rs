//! One module per page.

mod access;
mod audit;
mod catalog;
mod chart;
pub(crate) mod confirm;
mod group;
mod history;
mod jobs;
mod login;
mod platform;
mod policy;
mod portal;
mod rules;
mod settings;
mod shell;
mod sso;
mod user;

pub use access::UserAccessPage;
pub use audit::AuditPage;
pub use catalog::CatalogPage;
pub use group::GroupPage;
pub use history::HistoryPage;
pub use jobs::JobsPage;
pub use login::{LoginPage, TenantLoginPage};
pub use platform::PlatformPage;
pub use policy::PolicyPage;
pub use portal::{JobPage, PortalPage};
pub use settings::SettingsPage;
pub use shell::{Gate, NotFound, Shell};
pub use sso::SsoSettingsPage;
pub use user::UserPage;
