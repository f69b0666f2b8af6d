//! One module per page.

mod audit;
mod group;
mod login;
mod platform;
mod portal;
mod settings;
mod shell;

pub use audit::AuditPage;
pub use group::GroupPage;
pub use login::LoginPage;
pub use platform::PlatformPage;
pub use portal::{PolicyPage, PortalPage};
pub use settings::SettingsPage;
pub use shell::{NotFound, Shell};
