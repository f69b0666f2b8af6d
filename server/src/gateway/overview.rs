//! What the console's gateway pages read: each endpoint the caller may see with its routes'
//! URLs, its instances' health and its counters (from the running [`Gateways`], in memory),
//! the projects the caller may create an endpoint in, and the tenant's routes with their URLs.
//! Reads only; every check is the REST layer's own (`list_endpoints`, `endpoint_with`, ...).
//! An endpoint's serving jobs are read from the scheduler's `jobs` table (reading only).

use std::sync::atomic::Ordering;

use sqlx::Row;

use app::access::{Action, Permission, ResourceKind};
use app::model::*;

use super::endpoints::{self, Rights};
use super::metrics::BUCKETS;
use super::shared::Gateways;
use super::{instances, routes, tokens};
use crate::access::is_admin;
use crate::config::GatewayConfig;
use crate::http::error::{ApiResult, AppError};
use crate::http::require;
use crate::store::Store;

/// The tenant's routes with their gateway's name and the URL clients call, in the order of
/// the gateways' names.
pub async fn published_routes(
    store: &Store,
    gw: &GatewayConfig,
    p: &Principal,
) -> ApiResult<Vec<PublishedRoute>> {
    let gateways = instances::list_gateways(store, gw, p).await?;
    let mut out: Vec<PublishedRoute> = routes::list_routes(store, p, None)
        .await?
        .into_iter()
        .filter_map(|route| {
            let g = gateways.iter().find(|g| g.id == route.gateway_id)?;
            Some(PublishedRoute {
                url: format!(
                    "{}{}",
                    super::names::base_url(gw, &route.host, g.port),
                    route.path_prefix
                ),
                gateway_name: g.name.clone(),
                route,
            })
        })
        .collect();
    out.sort_by(|a, b| {
        (&a.gateway_name, &a.route.host, &a.route.path_prefix).cmp(&(
            &b.gateway_name,
            &b.route.host,
            &b.route.path_prefix,
        ))
    });
    Ok(out)
}

/// What the gateway knows of each instance now (`now`: the store's clock, ms).
pub fn instance_health(g: &Gateways, targets: &[EndpointTarget], now: i64) -> Vec<InstanceHealth> {
    targets
        .iter()
        .map(|t| {
            let s = g.target(&t.id);
            InstanceHealth {
                target_id: t.id.clone(),
                address: t.address.clone(),
                up: !s.down.load(Ordering::Relaxed),
                ejected: s.ejected_until.load(Ordering::Relaxed) > now,
                requests: s.requests.load(Ordering::Relaxed),
                failures: s.failures.load(Ordering::Relaxed),
                in_flight: s.inflight.load(Ordering::Relaxed),
            }
        })
        .collect()
}

/// An endpoint's counters since the server started; zeros when it has served nothing (read
/// without adding a series to `/metrics`).
pub fn counters(g: &Gateways, endpoint_id: &str) -> EndpointCounters {
    let bucket_ms = BUCKETS
        .iter()
        .map(|s| (s * 1000.0).round() as u64)
        .collect();
    let Some(s) = g.metrics.get(endpoint_id) else {
        return EndpointCounters {
            bucket_ms,
            cumulative: vec![0; BUCKETS.len() + 1],
            ..Default::default()
        };
    };
    EndpointCounters {
        by_class: std::array::from_fn(|i| s.status[i].load(Ordering::Relaxed)),
        bucket_ms,
        cumulative: s.cumulative(),
        bytes_out: s.bytes_out.load(Ordering::Relaxed),
        in_flight: s.inflight.load(Ordering::Relaxed),
    }
}

/// The endpoints the caller may see, each with its project's name, the caller's permission,
/// its routes and how many of its instances serve now. `projects`: the tenant's.
async fn summaries(
    store: &Store,
    gw: &GatewayConfig,
    g: &Gateways,
    p: &Principal,
    projects: &[Project],
    only: Option<&str>,
) -> ApiResult<Vec<EndpointSummary>> {
    let now = store.now();
    let rights = Rights::load(store, p, ResourceKind::Endpoint).await?;
    let routes = published_routes(store, gw, p).await?;
    let list = match only {
        Some(id) => vec![endpoints::get_endpoint(store, gw, p, id).await?],
        None => endpoints::list_endpoints(store, gw, p).await?,
    };
    Ok(list
        .into_iter()
        .filter_map(|e| {
            let permission = rights.of(&e.id, &e.project_id, e.owner_id.as_deref())?;
            let project_name = projects
                .iter()
                .find(|x| x.id == e.project_id)
                .map_or_else(|| e.project_id.clone(), |x| x.name.clone());
            let instances_up = instance_health(g, &e.targets, now)
                .iter()
                .filter(|i| i.serving())
                .count();
            Some(EndpointSummary {
                routes: routes
                    .iter()
                    .filter(|r| r.route.endpoint_id == e.id)
                    .cloned()
                    .collect(),
                endpoint: e,
                project_name,
                permission,
                instances_up,
            })
        })
        .collect())
}

/// The endpoints page. `projects`: the tenant's (the caller may create an endpoint in those
/// it may `use`).
pub async fn endpoints_overview(
    store: &Store,
    gw: &GatewayConfig,
    g: &Gateways,
    p: &Principal,
    projects: Vec<Project>,
) -> ApiResult<EndpointsOverview> {
    let endpoints = summaries(store, gw, g, p, &projects, None).await?;
    let rights = Rights::load(store, p, ResourceKind::Project).await?;
    let projects = projects
        .into_iter()
        .filter(|x| rights.of(&x.id, &x.id, None) >= Some(Permission::Use))
        .collect();
    Ok(EndpointsOverview {
        endpoints,
        projects,
        gateways: instances::list_gateways(store, gw, p).await?,
        tokens: tokens::list_tokens(store, p, false).await?,
        queues: deploy_queues(store, p).await?,
        now: store.now(),
    })
}

/// The queues the caller may submit a serving job to (none for one who may not submit jobs).
async fn deploy_queues(store: &Store, p: &Principal) -> ApiResult<Vec<Queue>> {
    if require(p, Action::SubmitJobs).is_err() {
        return Ok(Vec::new());
    }
    crate::policy::usable_queues(store, p).await
}

/// The endpoint's serving jobs, the newest first (at most 20), whoever submitted them.
async fn serving_jobs(
    store: &Store,
    p: &Principal,
    endpoint_id: &str,
) -> ApiResult<Vec<ServingJob>> {
    let rows = sqlx::query(
        "SELECT j.id, j.name, j.state, j.username, q.name AS queue_name, j.submitted_at
         FROM jobs j JOIN queues q ON q.id = j.queue_id
         WHERE j.serve_endpoint_id = $1 AND j.tenant_id = $2 ORDER BY j.submitted_at DESC, j.id DESC LIMIT 20",
    )
    .bind(endpoint_id)
    .bind(p.tenant_id())
    .fetch_all(&store.pool)
    .await?;
    rows.iter()
        .map(|r| -> ApiResult<ServingJob> {
            let state: String = r.try_get("state")?;
            Ok(ServingJob {
                id: r.try_get("id")?,
                name: r.try_get("name")?,
                state: JobState::parse(&state).ok_or(AppError::Internal)?,
                username: r.try_get("username")?,
                queue_name: r.try_get("queue_name")?,
                submitted_at: r.try_get("submitted_at")?,
            })
        })
        .collect()
}

/// One endpoint's page; 404 when the caller may not see it.
pub async fn endpoint_detail(
    store: &Store,
    gw: &GatewayConfig,
    g: &Gateways,
    p: &Principal,
    projects: &[Project],
    id: &str,
) -> ApiResult<EndpointDetail> {
    let summary = summaries(store, gw, g, p, projects, Some(id))
        .await?
        .pop()
        .ok_or(AppError::NotFound)?;
    Ok(EndpointDetail {
        instances: instance_health(g, &summary.endpoint.targets, store.now()),
        counters: counters(g, id),
        serving_jobs: serving_jobs(store, p, id).await?,
        summary,
    })
}

/// The gateways page: tenant admins only (it names every endpoint of the organization).
pub async fn gateways_overview(
    store: &Store,
    gw: &GatewayConfig,
    p: &Principal,
) -> ApiResult<GatewaysOverview> {
    if !is_admin(p) {
        return Err(AppError::Forbidden.into());
    }
    let endpoints = endpoints::endpoint_rows(store, p.tenant_id(), None)
        .await?
        .into_iter()
        .map(|e| (e.id, e.name))
        .collect();
    Ok(GatewaysOverview {
        gateways: instances::list_gateways(store, gw, p).await?,
        routes: published_routes(store, gw, p).await?,
        tcp_routes: super::tcp_routes::list(store, gw, p, None).await?,
        endpoints,
    })
}
