//! Who may do what at the tenant and platform level. Pure, used by every server handler (through
//! the server's `require`) and by the navigation, so the menu shows exactly what a user may use.
//! Resource-level rules (group -> permission on a project, queue, endpoint, ...) build on this.

use crate::model::Me;

/// An operation at the tenant or platform level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// See the own tenant's users, groups and projects.
    ViewDirectory,
    /// Create and change users, groups, memberships and projects of the own tenant.
    ManageDirectory,
    /// Read the own tenant's audit log.
    ViewAudit,
    /// See and manage tenants across the platform (counts only, never their workloads).
    ManagePlatform,
    /// Read any tenant's audit log (platform operators, for incidents).
    ViewAnyAudit,
    /// Manage one's own API tokens.
    ManageOwnTokens,
    /// Manage every token of the own tenant (revoke a leaked one).
    ManageTenantTokens,
    /// Use the Policy Manager of the own tenant.
    ViewPolicy,
    /// Create and change the own tenant's pools, profiles, policies and queues.
    ManagePolicy,
    /// Create pools shared by every tenant.
    ManageSharedPools,
    /// Submit jobs (to queues of one's own groups) and see one's own jobs.
    SubmitJobs,
}

/// The one access decision. Platform admins administer their home tenant too.
pub fn allowed(me: &Me, action: Action) -> bool {
    let admin = me.is_tenant_admin || me.is_platform_admin;
    match action {
        Action::ViewDirectory | Action::ManageOwnTokens | Action::SubmitJobs => true,
        Action::ManageDirectory
        | Action::ViewAudit
        | Action::ManageTenantTokens
        | Action::ViewPolicy
        | Action::ManagePolicy => admin,
        Action::ManagePlatform | Action::ViewAnyAudit | Action::ManageSharedPools => {
            me.is_platform_admin
        }
    }
}

/// The navigation entries a user may use, in order: (href, label).
pub fn navigation(me: &Me) -> Vec<(&'static str, &'static str)> {
    let mut items = vec![("/portal", "Portal")];
    if allowed(me, Action::ViewPolicy) {
        items.push(("/policy", "Policy Manager"));
    }
    if allowed(me, Action::ManagePlatform) {
        items.push(("/platform", "Platform"));
    }
    if allowed(me, Action::ViewAudit) {
        items.push(("/audit", "Audit"));
    }
    if allowed(me, Action::ManageDirectory) {
        items.push(("/settings", "Settings"));
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me(tenant_admin: bool, platform_admin: bool) -> Me {
        Me {
            user_id: "u".into(),
            username: "u".into(),
            display_name: "U".into(),
            email: None,
            tenant_id: "t".into(),
            tenant_slug: "t".into(),
            tenant_name: "T".into(),
            is_platform_admin: platform_admin,
            is_tenant_admin: tenant_admin,
        }
    }

    #[test]
    fn decision_table() {
        use Action::*;
        // (action, member, tenant admin, platform admin)
        let table = [
            (ViewDirectory, true, true, true),
            (ManageOwnTokens, true, true, true),
            (ManageDirectory, false, true, true),
            (ViewAudit, false, true, true),
            (ManageTenantTokens, false, true, true),
            (ViewPolicy, false, true, true),
            (ManagePolicy, false, true, true),
            (SubmitJobs, true, true, true),
            (ManageSharedPools, false, false, true),
            (ManagePlatform, false, false, true),
            (ViewAnyAudit, false, false, true),
        ];
        for (action, member, tenant_admin, platform_admin) in table {
            assert_eq!(
                allowed(&me(false, false), action),
                member,
                "{action:?} member"
            );
            assert_eq!(
                allowed(&me(true, false), action),
                tenant_admin,
                "{action:?} tenant admin"
            );
            assert_eq!(
                allowed(&me(false, true), action),
                platform_admin,
                "{action:?} platform admin"
            );
        }
    }

    #[test]
    fn navigation_shows_only_usable_pages() {
        let labels = |m: &Me| {
            navigation(m)
                .into_iter()
                .map(|(_, l)| l)
                .collect::<Vec<_>>()
        };
        assert_eq!(labels(&me(false, false)), ["Portal"]);
        assert_eq!(
            labels(&me(true, false)),
            ["Portal", "Policy Manager", "Audit", "Settings"]
        );
        assert_eq!(
            labels(&me(false, true)),
            ["Portal", "Policy Manager", "Platform", "Audit", "Settings"]
        );
    }
}
