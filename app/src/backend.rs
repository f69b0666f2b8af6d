//! The seam between the pages' server functions and the server: `server` implements
//! [`Backend`] and puts it into the Leptos context; `app` never depends on `server`.

use std::sync::Arc;

use crate::error::AppError;
use crate::model::*;

mod gateway;
pub use gateway::GatewayBackend;

/// Everything the pages' server functions ask of the server; the gateway's part is
/// [`GatewayBackend`].
#[async_trait::async_trait]
pub trait Backend: GatewayBackend + Send + Sync + 'static {
    async fn list_users(&self, p: &Principal) -> Result<Vec<User>, AppError>;
    async fn create_user(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        input: CreateUser,
    ) -> Result<User, AppError>;
    async fn list_groups(&self, p: &Principal) -> Result<Vec<Group>, AppError>;
    async fn create_group(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        input: CreateGroup,
    ) -> Result<Group, AppError>;
    async fn group_detail(&self, p: &Principal, group_id: &str) -> Result<GroupDetail, AppError>;
    async fn add_member(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        group_id: &str,
        user_id: &str,
    ) -> Result<(), AppError>;
    async fn remove_member(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        group_id: &str,
        user_id: &str,
    ) -> Result<(), AppError>;
    async fn my_groups(&self, p: &Principal) -> Result<Vec<Group>, AppError>;
    async fn list_audit(
        &self,
        p: &Principal,
        filter: AuditFilter,
    ) -> Result<Page<AuditEntry>, AppError>;
    async fn list_tenants(&self, p: &Principal) -> Result<Vec<TenantSummary>, AppError>;
    async fn create_tenant(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        input: CreateTenant,
    ) -> Result<Tenant, AppError>;
    async fn policy_overview(&self, p: &Principal) -> Result<PolicyOverview, AppError>;
    async fn policy_config(&self, p: &Principal) -> Result<PolicyConfig, AppError>;
    async fn portal_overview(&self, p: &Principal) -> Result<PortalOverview, AppError>;
    async fn job_detail(&self, p: &Principal, job_id: &str) -> Result<JobDetail, AppError>;
    async fn list_jobs(&self, p: &Principal, query: JobQuery) -> Result<Page<Job>, AppError>;
    async fn submit_job(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        input: SubmitJob,
        idempotency_key: Option<String>,
    ) -> Result<Job, AppError>;
    async fn abort_job(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        job_id: &str,
    ) -> Result<Job, AppError>;
    async fn create_pool(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        input: CreatePool,
    ) -> Result<Pool, AppError>;
    async fn create_profile(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        input: CreateProfile,
    ) -> Result<Profile, AppError>;
    async fn set_policy(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        input: SetPolicy,
    ) -> Result<Policy, AppError>;
    async fn create_queue(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        input: CreateQueue,
    ) -> Result<Queue, AppError>;
    async fn list_idps(&self, p: &Principal) -> Result<Vec<IdentityProvider>, AppError>;
    async fn create_idp(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        input: SaveIdentityProvider,
    ) -> Result<IdentityProvider, AppError>;
    async fn test_idp(&self, p: &Principal, id: &str) -> Result<Vec<ConnectionCheck>, AppError>;
    async fn update_idp(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
        input: SaveIdentityProvider,
    ) -> Result<IdentityProvider, AppError>;
    async fn delete_idp(&self, p: &Principal, meta: &RequestMeta, id: &str)
        -> Result<(), AppError>;
    /// When the tenant's SCIM token was issued (`None`: there is none).
    async fn scim_token_issued_at(&self, p: &Principal) -> Result<Option<i64>, AppError>;
    /// A new SCIM token, replacing the tenant's current one; shown once.
    async fn issue_scim_token(&self, p: &Principal, meta: &RequestMeta)
        -> Result<String, AppError>;
    async fn revoke_scim_token(&self, p: &Principal, meta: &RequestMeta) -> Result<(), AppError>;
    async fn set_sign_in_settings(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        input: SignInSettings,
    ) -> Result<SignInSettings, AppError>;
    async fn user_access(&self, p: &Principal, user_id: &str) -> Result<UserAccess, AppError>;
    /// Public: what a tenant's sign-in page offers.
    async fn sign_in_options(&self, tenant: &str) -> Result<SignInOptions, AppError>;
    // ---- policy objects: edit and delete ----
    async fn update_pool(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
        input: UpdatePool,
    ) -> Result<Pool, AppError>;
    async fn delete_pool(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
    ) -> Result<(), AppError>;
    async fn update_profile(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
        input: UpdateProfile,
    ) -> Result<Profile, AppError>;
    async fn delete_profile(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
    ) -> Result<(), AppError>;
    async fn update_queue(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
        input: UpdateQueue,
    ) -> Result<Queue, AppError>;
    async fn delete_queue(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
    ) -> Result<(), AppError>;
    async fn delete_policy(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
    ) -> Result<(), AppError>;

    // ---- history ----
    /// The caller's scheduling history over a window (`GET /api/v1/scheduling/history`).
    async fn scheduling_history(
        &self,
        p: &Principal,
        window: HistoryWindow,
    ) -> Result<History, AppError>;

    // ---- directory: edit and delete ----
    async fn get_user(&self, p: &Principal, id: &str) -> Result<User, AppError>;
    async fn update_user(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
        input: UpdateUser,
    ) -> Result<User, AppError>;
    async fn delete_user(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
    ) -> Result<(), AppError>;
    async fn update_group(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
        input: UpdateGroup,
    ) -> Result<Group, AppError>;
    async fn delete_group(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
    ) -> Result<(), AppError>;

    // ---- access rules ----
    async fn create_rule(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        input: CreateAccessRule,
    ) -> Result<AccessRule, AppError>;
    async fn delete_rule(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
    ) -> Result<(), AppError>;

    // ---- catalog: projects, models, datasets ----
    /// The caller's projects, the models and datasets they may see, and the access rules
    /// that name any of them (who may use what).
    async fn catalog(&self, p: &Principal) -> Result<Catalog, AppError>;
    async fn create_project(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        input: CreateProject,
    ) -> Result<Project, AppError>;
    async fn update_project(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
        input: UpdateProject,
    ) -> Result<Project, AppError>;
    async fn delete_project(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
    ) -> Result<(), AppError>;
    async fn create_asset(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        kind: ResourceKind,
        input: CreateAsset,
    ) -> Result<Asset, AppError>;
    async fn delete_asset(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        kind: ResourceKind,
        id: &str,
    ) -> Result<(), AppError>;
}

/// How the backend is stored in the Leptos context.
pub type SharedBackend = Arc<dyn Backend>;
