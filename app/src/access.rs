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
    if allowed(me, Action::SubmitJobs) {
        items.push(("/jobs", "Jobs"));
    }
    if allowed(me, Action::ViewPolicy) {
        items.push(("/policy", "Policy Manager"));
    }
    // Everyone sees history and the catalog, within what they may see.
    items.push(("/history", "History"));
    if allowed(me, Action::ViewDirectory) {
        items.push(("/catalog", "Catalog"));
        items.push(("/endpoints", "Endpoints"));
    }
    if allowed(me, Action::ManageDirectory) {
        items.push(("/gateways", "Gateways"));
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

// ---- resource-level access rules ---------------------------------------------------------

/// Permission on a resource. Each level includes the ones before it: `view` (see it),
/// `use` (submit to a queue, call an endpoint, read a model or dataset), `manage` (change
/// it), `admin` (also grant access to it).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Permission {
    View,
    Use,
    Manage,
    Admin,
}

/// The kinds of resource a rule can cover.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum ResourceKind {
    Project,
    /// Experiments and jobs.
    Job,
    Model,
    Dataset,
    Queue,
    Endpoint,
}

impl ResourceKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            ResourceKind::Project => "project",
            ResourceKind::Job => "job",
            ResourceKind::Model => "model",
            ResourceKind::Dataset => "dataset",
            ResourceKind::Queue => "queue",
            ResourceKind::Endpoint => "endpoint",
        }
    }

    pub fn parse(s: &str) -> Option<ResourceKind> {
        Some(match s {
            "project" => ResourceKind::Project,
            "job" => ResourceKind::Job,
            "model" => ResourceKind::Model,
            "dataset" => ResourceKind::Dataset,
            "queue" => ResourceKind::Queue,
            "endpoint" => ResourceKind::Endpoint,
            _ => return None,
        })
    }
}

impl Permission {
    pub fn as_str(&self) -> &'static str {
        match self {
            Permission::View => "view",
            Permission::Use => "use",
            Permission::Manage => "manage",
            Permission::Admin => "admin",
        }
    }

    pub fn parse(s: &str) -> Option<Permission> {
        Some(match s {
            "view" => Permission::View,
            "use" => Permission::Use,
            "manage" => Permission::Manage,
            "admin" => Permission::Admin,
            _ => return None,
        })
    }
}

/// What a rule covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every resource of the kind in the tenant.
    All,
    /// One resource.
    Resource(String),
    /// Every resource of the kind in this project or a project below it (for kind `project`:
    /// the project itself and its descendants).
    Project(String),
}

/// group → permission on resources of a kind, within a scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub group_id: String,
    pub permission: Permission,
    pub kind: ResourceKind,
    pub scope: Scope,
}

impl Scope {
    /// A rule's scope from its stored columns: one resource, else a project subtree, else all.
    pub fn from_ids(resource_id: Option<String>, project_id: Option<String>) -> Scope {
        match (resource_id, project_id) {
            (Some(id), _) => Scope::Resource(id),
            (None, Some(p)) => Scope::Project(p),
            (None, None) => Scope::All,
        }
    }
}

impl Rule {
    /// Whether the rule's kind and scope cover `target`, whoever asks.
    pub fn covers(&self, target: &Target) -> bool {
        self.kind == target.kind
            && match &self.scope {
                Scope::All => true,
                Scope::Resource(id) => id == target.id,
                Scope::Project(p) => target.projects.iter().any(|x| x == p),
            }
    }
}

/// A resource being accessed.
#[derive(Clone, Debug)]
pub struct Target<'a> {
    pub kind: ResourceKind,
    pub id: &'a str,
    /// The resource's project and its ancestors, nearest first (for a project: itself first).
    pub projects: &'a [String],
    /// Its owner, who holds `admin` on it.
    pub owner: Option<&'a str>,
}

/// Who is asking: the user and the groups they are in right now.
#[derive(Clone, Debug)]
pub struct Subject<'a> {
    pub user_id: &'a str,
    pub groups: &'a [String],
    /// Tenant (and platform) admins hold `admin` on everything in their tenant.
    pub tenant_admin: bool,
}

/// The one evaluation: the highest permission the subject holds on the target, from being a
/// tenant admin, owning it, or any rule of any of their groups whose kind and scope cover it.
/// `None`: no access (the resource is also invisible).
pub fn effective(subject: &Subject, rules: &[Rule], target: &Target) -> Option<Permission> {
    if subject.tenant_admin {
        return Some(Permission::Admin);
    }
    if target.owner.is_some_and(|o| o == subject.user_id) {
        return Some(Permission::Admin);
    }
    rules
        .iter()
        .filter(|r| subject.groups.contains(&r.group_id) && r.covers(target))
        .map(|r| r.permission)
        .max()
}

/// Whether the subject holds at least `needed` on the target.
pub fn can(subject: &Subject, rules: &[Rule], target: &Target, needed: Permission) -> bool {
    effective(subject, rules, target).is_some_and(|p| p >= needed)
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
        assert_eq!(
            labels(&me(false, false)),
            ["Portal", "Jobs", "History", "Catalog", "Endpoints"]
        );
        assert_eq!(
            labels(&me(true, false)),
            [
                "Portal",
                "Jobs",
                "Policy Manager",
                "History",
                "Catalog",
                "Endpoints",
                "Gateways",
                "Audit",
                "Settings"
            ]
        );
        assert_eq!(
            labels(&me(false, true)),
            [
                "Portal",
                "Jobs",
                "Policy Manager",
                "History",
                "Catalog",
                "Endpoints",
                "Gateways",
                "Platform",
                "Audit",
                "Settings"
            ]
        );
    }

    #[test]
    fn resource_rules_table() {
        use Permission::*;
        let groups = vec!["research".to_string(), "all-staff".to_string()];
        let member = Subject {
            user_id: "bob",
            groups: &groups,
            tenant_admin: false,
        };
        let admin = Subject {
            user_id: "alice",
            groups: &[],
            tenant_admin: true,
        };
        let rule = |g: &str, p, k, s| Rule {
            group_id: g.into(),
            permission: p,
            kind: k,
            scope: s,
        };
        let rules = vec![
            // research may use the "train" queue
            rule(
                "research",
                Use,
                ResourceKind::Queue,
                Scope::Resource("q-train".into()),
            ),
            // all staff may view every model
            rule("all-staff", View, ResourceKind::Model, Scope::All),
            // research manages models in the vision project and below
            rule(
                "research",
                Manage,
                ResourceKind::Model,
                Scope::Project("p-vision".into()),
            ),
            // another group's rule never applies to bob
            rule("finance", Admin, ResourceKind::Model, Scope::All),
            rule("finance", Admin, ResourceKind::Queue, Scope::All),
            // research uses datasets of the vision project subtree
            rule(
                "research",
                Use,
                ResourceKind::Dataset,
                Scope::Project("p-vision".into()),
            ),
        ];
        let vision = vec!["p-vision".to_string(), "p-root".to_string()];
        let detection = vec![
            "p-detection".to_string(),
            "p-vision".to_string(),
            "p-root".to_string(),
        ];
        let finance = vec!["p-finance".to_string(), "p-root".to_string()];
        let t = |kind, id, projects: &'static [String], owner| Target {
            kind,
            id,
            projects,
            owner,
        };
        let vision: &'static [String] = Box::leak(vision.into_boxed_slice());
        let detection: &'static [String] = Box::leak(detection.into_boxed_slice());
        let finance: &'static [String] = Box::leak(finance.into_boxed_slice());
        // (target, expected for bob, why)
        let cases: Vec<(Target, Option<Permission>, &str)> = vec![
            (
                t(ResourceKind::Queue, "q-train", &[], None),
                Some(Use),
                "the named queue",
            ),
            (
                t(ResourceKind::Queue, "q-other", &[], None),
                None,
                "another queue",
            ),
            (
                t(ResourceKind::Model, "m1", finance, None),
                Some(View),
                "every model: view",
            ),
            (
                t(ResourceKind::Model, "m2", vision, None),
                Some(Manage),
                "project rule, highest wins",
            ),
            (
                t(ResourceKind::Model, "m3", detection, None),
                Some(Manage),
                "inherited down the subtree",
            ),
            (
                t(ResourceKind::Dataset, "d1", detection, None),
                Some(Use),
                "datasets in the subtree",
            ),
            (
                t(ResourceKind::Dataset, "d2", finance, None),
                None,
                "datasets elsewhere",
            ),
            (
                t(ResourceKind::Endpoint, "e1", vision, None),
                None,
                "no rule for the kind",
            ),
            (
                t(ResourceKind::Dataset, "d3", finance, Some("bob")),
                Some(Admin),
                "the owner",
            ),
            (
                t(ResourceKind::Project, "p-vision", vision, None),
                None,
                "model rules say nothing about the project",
            ),
        ];
        for (target, expected, why) in &cases {
            assert_eq!(effective(&member, &rules, target), *expected, "{why}");
            assert_eq!(
                effective(&admin, &rules, target),
                Some(Admin),
                "tenant admin: {why}"
            );
        }
        // Levels include the ones below.
        let m2 = &cases[3].0;
        assert!(can(&member, &rules, m2, View));
        assert!(can(&member, &rules, m2, Use));
        assert!(can(&member, &rules, m2, Manage));
        assert!(!can(&member, &rules, m2, Admin));
        // Leaving the group takes it all away at once.
        let none: Vec<String> = Vec::new();
        let left = Subject {
            user_id: "bob",
            groups: &none,
            tenant_admin: false,
        };
        for (target, _, why) in &cases {
            let expected = target.owner.map(|_| Admin);
            assert_eq!(
                effective(&left, &rules, target),
                expected,
                "after leaving: {why}"
            );
        }
        assert!(View < Use && Use < Manage && Manage < Admin);
        for p in [View, Use, Manage, Admin] {
            assert_eq!(Permission::parse(p.as_str()), Some(p));
        }
    }
}
