//! The server's implementation of the pages' backend: thin calls into the domain modules.

use app::backend::Backend;
use app::error::AppError;
use app::model::*;

use crate::catalog;
use crate::identity::directory::{self as dir, ListParams};
use crate::policy as res;
use crate::scheduler::jobs;
use crate::state::AppState;

pub struct WebBackend {
    pub state: AppState,
}

#[async_trait::async_trait]
impl Backend for WebBackend {
    async fn list_users(&self, p: &Principal) -> Result<Vec<User>, AppError> {
        Ok(dir::list_users(&self.state.store, p, &ListParams::all())
            .await?
            .items)
    }
    async fn create_user(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        input: CreateUser,
    ) -> Result<User, AppError> {
        Ok(dir::create_user(&self.state.store, p, meta, input).await?)
    }
    async fn list_groups(&self, p: &Principal) -> Result<Vec<Group>, AppError> {
        Ok(dir::list_groups(&self.state.store, p, &ListParams::all())
            .await?
            .items)
    }
    async fn create_group(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        input: CreateGroup,
    ) -> Result<Group, AppError> {
        Ok(dir::create_group(&self.state.store, p, meta, input).await?)
    }
    async fn group_detail(&self, p: &Principal, group_id: &str) -> Result<GroupDetail, AppError> {
        let store = &self.state.store;
        let group = dir::get_group(store, p, group_id).await?;
        let members = dir::list_members(store, p, group_id).await?;
        let candidates = dir::list_users(store, p, &ListParams::all())
            .await?
            .items
            .into_iter()
            .filter(|u| !u.disabled && !members.iter().any(|m| m.user_id == u.id))
            .collect();
        let rules = crate::access::list_rules(store, p)
            .await?
            .into_iter()
            .filter(|r| r.group_id == group_id)
            .collect();
        Ok(GroupDetail {
            group,
            members,
            candidates,
            rules,
        })
    }
    async fn add_member(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        group_id: &str,
        user_id: &str,
    ) -> Result<(), AppError> {
        dir::add_member(&self.state.store, p, meta, group_id, user_id).await?;
        Ok(())
    }
    async fn remove_member(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        group_id: &str,
        user_id: &str,
    ) -> Result<(), AppError> {
        Ok(dir::remove_member(&self.state.store, p, meta, group_id, user_id).await?)
    }
    async fn my_groups(&self, p: &Principal) -> Result<Vec<Group>, AppError> {
        Ok(dir::my_groups(&self.state.store, p).await?)
    }
    async fn list_audit(
        &self,
        p: &Principal,
        filter: AuditFilter,
    ) -> Result<Page<AuditEntry>, AppError> {
        crate::http::require(p, app::access::Action::ViewAudit)?;
        Ok(crate::audit::list(&self.state.store, p.tenant_id(), &filter).await?)
    }
    async fn list_tenants(&self, p: &Principal) -> Result<Vec<TenantSummary>, AppError> {
        Ok(crate::tenancy::list_tenants(&self.state.store, p).await?)
    }
    async fn create_tenant(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        input: CreateTenant,
    ) -> Result<Tenant, AppError> {
        Ok(crate::tenancy::create_tenant(&self.state.store, p, meta, input).await?)
    }
    async fn policy_overview(&self, p: &Principal) -> Result<PolicyOverview, AppError> {
        Ok(
            crate::scheduler::overview::overview(&self.state.store, &self.state.scheduler, p)
                .await?,
        )
    }
    async fn policy_config(&self, p: &Principal) -> Result<PolicyConfig, AppError> {
        crate::http::require(p, app::access::Action::ViewPolicy)?;
        let store = &self.state.store;
        Ok(PolicyConfig {
            pools: res::list_pools(store, p).await?,
            profiles: res::list_profiles(store, p).await?,
            policies: res::list_policies(store, p).await?,
            queues: res::list_queues(store, p).await?,
            groups: dir::list_groups(store, p, &ListParams::all()).await?.items,
        })
    }
    async fn portal_overview(&self, p: &Principal) -> Result<PortalOverview, AppError> {
        Ok(crate::scheduler::overview::portal(&self.state.store, &self.state.scheduler, p).await?)
    }
    async fn job_detail(&self, p: &Principal, job_id: &str) -> Result<JobDetail, AppError> {
        Ok(jobs::job_detail(&self.state.store, p, job_id).await?)
    }
    async fn list_jobs(&self, p: &Principal, q: JobQuery) -> Result<Page<Job>, AppError> {
        let filter = jobs::JobFilter {
            state: q.state,
            queue_id: q.queue_id,
            group_id: q.group_id,
            user: q.user,
            q: q.q,
            mine: None,
            within: q.within,
            sort: q.sort,
            limit: q.limit,
            cursor: q.cursor,
        };
        Ok(jobs::list_jobs(&self.state.store, p, &filter).await?)
    }
    async fn submit_job(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        input: SubmitJob,
        idempotency_key: Option<String>,
    ) -> Result<Job, AppError> {
        let key = idempotency_key
            .map(|k| jobs::idempotency::IdemKey::new(&k, &input))
            .transpose()?;
        let done = jobs::submit(
            &self.state.store,
            p,
            meta,
            input,
            (&*self.state.config).into(),
            key.as_ref(),
        )
        .await?;
        Ok(done.value)
    }
    async fn abort_job(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        job_id: &str,
    ) -> Result<Job, AppError> {
        let job = jobs::abort(&self.state.store, p, meta, job_id).await?;
        Ok(job)
    }
    async fn create_pool(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        input: CreatePool,
    ) -> Result<Pool, AppError> {
        let allowed = self.state.config.scheduler.allow_local_pools;
        let out = res::create_pool(&self.state.store, p, meta, input, allowed).await?;
        Ok(out)
    }
    async fn create_profile(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        input: CreateProfile,
    ) -> Result<Profile, AppError> {
        Ok(res::create_profile(&self.state.store, p, meta, input).await?)
    }
    async fn set_policy(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        input: SetPolicy,
    ) -> Result<Policy, AppError> {
        let out = res::set_policy(&self.state.store, p, meta, input).await?;
        Ok(out)
    }
    async fn create_queue(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        input: CreateQueue,
    ) -> Result<Queue, AppError> {
        let out = res::create_queue(&self.state.store, p, meta, input).await?;
        Ok(out)
    }
    async fn sign_in_options(&self, tenant: &str) -> Result<SignInOptions, AppError> {
        Ok(crate::identity::sso::sign_in_options(&self.state.store, tenant).await?)
    }
    async fn list_idps(&self, p: &Principal) -> Result<Vec<IdentityProvider>, AppError> {
        Ok(crate::identity::sso::list_providers(&self.state.store, &self.state.config, p).await?)
    }
    async fn create_idp(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        input: SaveIdentityProvider,
    ) -> Result<IdentityProvider, AppError> {
        Ok(crate::identity::sso::create_provider(
            &self.state.store,
            &self.state.config,
            p,
            meta,
            input,
        )
        .await?)
    }
    async fn update_idp(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
        input: SaveIdentityProvider,
    ) -> Result<IdentityProvider, AppError> {
        let (store, config) = (&self.state.store, &self.state.config);
        Ok(crate::identity::sso::update_provider(store, config, p, meta, id, input).await?)
    }
    async fn delete_idp(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
    ) -> Result<(), AppError> {
        Ok(crate::identity::sso::delete_provider(&self.state.store, p, meta, id).await?)
    }
    async fn scim_token_issued_at(&self, p: &Principal) -> Result<Option<i64>, AppError> {
        Ok(crate::identity::scim::token_issued_at(&self.state.store, p).await?)
    }
    async fn issue_scim_token(
        &self,
        p: &Principal,
        meta: &RequestMeta,
    ) -> Result<String, AppError> {
        Ok(crate::identity::scim::issue_token(&self.state.store, p, meta).await?)
    }
    async fn revoke_scim_token(&self, p: &Principal, meta: &RequestMeta) -> Result<(), AppError> {
        Ok(crate::identity::scim::revoke_token(&self.state.store, p, meta).await?)
    }
    async fn test_idp(&self, p: &Principal, id: &str) -> Result<Vec<ConnectionCheck>, AppError> {
        let s = &self.state;
        let row = crate::identity::sso::provider_row(&s.store, p, id).await?;
        Ok(crate::identity::sso::api::test_connection(&s.config, &s.oidc, &row).await)
    }
    async fn set_sign_in_settings(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        input: SignInSettings,
    ) -> Result<SignInSettings, AppError> {
        Ok(crate::identity::sso::set_sign_in_settings(&self.state.store, p, meta, input).await?)
    }
    async fn user_access(&self, p: &Principal, user_id: &str) -> Result<UserAccess, AppError> {
        Ok(crate::access::user_access(&self.state.store, p, user_id).await?)
    }
    // ---- policy objects: edit and delete ----
    async fn update_pool(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
        input: UpdatePool,
    ) -> Result<Pool, AppError> {
        let allowed = self.state.config.scheduler.allow_local_pools;
        Ok(res::update_pool(&self.state.store, p, meta, id, input, allowed).await?)
    }
    async fn delete_pool(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
    ) -> Result<(), AppError> {
        Ok(res::delete_pool(&self.state.store, p, meta, id).await?)
    }
    async fn update_profile(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
        input: UpdateProfile,
    ) -> Result<Profile, AppError> {
        Ok(res::update_profile(&self.state.store, p, meta, id, input).await?)
    }
    async fn delete_profile(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
    ) -> Result<(), AppError> {
        Ok(res::delete_profile(&self.state.store, p, meta, id).await?)
    }
    async fn update_queue(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
        input: UpdateQueue,
    ) -> Result<Queue, AppError> {
        Ok(res::update_queue(&self.state.store, p, meta, id, input).await?)
    }
    async fn delete_queue(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
    ) -> Result<(), AppError> {
        Ok(res::delete_queue(&self.state.store, p, meta, id).await?)
    }
    async fn delete_policy(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
    ) -> Result<(), AppError> {
        Ok(res::delete_policy(&self.state.store, p, meta, id).await?)
    }

    // ---- history ----
    async fn scheduling_history(
        &self,
        p: &Principal,
        window: HistoryWindow,
    ) -> Result<History, AppError> {
        let store = &self.state.store;
        Ok(crate::scheduler::history::read::history(store, p, window, store.now()).await?)
    }

    // ---- directory: edit and delete ----
    async fn get_user(&self, p: &Principal, id: &str) -> Result<User, AppError> {
        Ok(dir::get_user(&self.state.store, p, id).await?)
    }
    async fn update_user(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
        input: UpdateUser,
    ) -> Result<User, AppError> {
        Ok(dir::update_user(&self.state.store, p, meta, id, input).await?)
    }
    async fn delete_user(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
    ) -> Result<(), AppError> {
        Ok(dir::delete_user(&self.state.store, p, meta, id).await?)
    }
    async fn update_group(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
        input: UpdateGroup,
    ) -> Result<Group, AppError> {
        Ok(dir::update_group(&self.state.store, p, meta, id, input).await?)
    }
    async fn delete_group(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
    ) -> Result<(), AppError> {
        Ok(dir::delete_group(&self.state.store, p, meta, id).await?)
    }

    // ---- access rules ----
    async fn create_rule(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        input: CreateAccessRule,
    ) -> Result<AccessRule, AppError> {
        Ok(crate::access::create_rule(&self.state.store, p, meta, input).await?)
    }
    async fn delete_rule(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
    ) -> Result<(), AppError> {
        Ok(crate::access::delete_rule(&self.state.store, p, meta, id).await?)
    }

    // ---- catalog ----
    async fn catalog(&self, p: &Principal) -> Result<Catalog, AppError> {
        Ok(catalog::page(&self.state.store, p).await?)
    }
    async fn create_project(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        input: CreateProject,
    ) -> Result<Project, AppError> {
        Ok(dir::create_project(&self.state.store, p, meta, input).await?)
    }
    async fn update_project(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
        input: UpdateProject,
    ) -> Result<Project, AppError> {
        Ok(dir::update_project(&self.state.store, p, meta, id, input).await?)
    }
    async fn delete_project(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
    ) -> Result<(), AppError> {
        Ok(dir::delete_project(&self.state.store, p, meta, id).await?)
    }
    async fn create_asset(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        kind: ResourceKind,
        input: CreateAsset,
    ) -> Result<Asset, AppError> {
        Ok(catalog::create_asset(&self.state.store, p, meta, kind, input).await?)
    }
    async fn delete_asset(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        kind: ResourceKind,
        id: &str,
    ) -> Result<(), AppError> {
        Ok(catalog::delete_asset(&self.state.store, p, meta, kind, id).await?)
    }

    // ---- gateway ----
}
