//! One module per page.

mod access;
mod audit;
mod chart;
mod group;
mod history;
mod jobs;
mod login;
mod platform;
mod policy;
mod portal;
mod settings;
mod shell;
mod sso;

pub use access::UserAccessPage;
pub use audit::AuditPage;
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
