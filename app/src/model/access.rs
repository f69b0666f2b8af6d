//! Access rules, models and datasets, and what a user can reach.

use serde::{Deserialize, Serialize};
#[cfg(feature = "ssr")]
use utoipa::ToSchema;

#[allow(unused_imports)]
use super::*;

pub use crate::access::{Permission, ResourceKind};

/// group → permission on resources of a kind: one resource, a project subtree, or all.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct AccessRule {
    pub id: String,
    pub group_id: String,
    pub group_name: String,
    pub permission: Permission,
    pub resource_kind: ResourceKind,
    /// One resource; with `project_id` also absent: every resource of the kind.
    pub resource_id: Option<String>,
    /// A project and every project below it.
    pub project_id: Option<String>,
    pub created_at: i64,
}

impl AccessRule {
    /// The rule as the access check evaluates it.
    pub fn rule(&self) -> crate::access::Rule {
        crate::access::Rule {
            group_id: self.group_id.clone(),
            permission: self.permission,
            kind: self.resource_kind,
            scope: crate::access::Scope::from_ids(
                self.resource_id.clone(),
                self.project_id.clone(),
            ),
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateAccessRule {
    pub group_id: String,
    pub permission: Permission,
    pub resource_kind: ResourceKind,
    #[serde(default)]
    pub resource_id: Option<String>,
    #[serde(default)]
    pub project_id: Option<String>,
}

/// A registered model or dataset.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct Asset {
    pub id: String,
    /// `model` or `dataset`.
    pub kind: ResourceKind,
    pub project_id: String,
    pub name: String,
    /// Where it lives (`s3://…`, `hf://…`, a path).
    pub location_uri: String,
    pub metadata: std::collections::BTreeMap<String, String>,
    pub owner_id: Option<String>,
    /// What the caller may do with it.
    pub permission: Permission,
    pub created_at: i64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateAsset {
    pub project_id: String,
    #[cfg_attr(
        feature = "ssr",
        schema(min_length = 1, max_length = 200, pattern = "\\S")
    )]
    pub name: String,
    pub location_uri: String,
    #[serde(default)]
    pub metadata: std::collections::BTreeMap<String, String>,
}

/// One thing a user may do, and why.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct Grant {
    pub resource_kind: ResourceKind,
    pub resource_id: String,
    pub resource_name: String,
    pub permission: Permission,
    /// Group names, `owner` or `tenant admin`.
    pub via: Vec<String>,
}

/// "What can this user do": their groups and every resource they reach.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct UserAccess {
    pub user_id: String,
    pub username: String,
    pub tenant_admin: bool,
    pub groups: Vec<String>,
    pub grants: Vec<Grant>,
}

/// The catalog page: projects, the models and datasets the caller may see, and who may use
/// them.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Catalog {
    pub projects: Vec<Project>,
    pub models: Vec<Asset>,
    pub datasets: Vec<Asset>,
    /// Every access rule of the tenant (tenant admins only; empty for members).
    pub rules: Vec<AccessRule>,
    /// Whether the caller manages the directory (creates and deletes projects, rules).
    pub admin: bool,
}
