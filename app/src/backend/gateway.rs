//! The gateway's part of the pages' backend: endpoints, gateways, routes (HTTP and raw TCP)
//! and gateway tokens.

use crate::error::AppError;
use crate::model::*;

#[async_trait::async_trait]
pub trait GatewayBackend: Send + Sync + 'static {
    /// The endpoints the caller may see (with their instances' health), the projects they may
    /// create one in, the tenant's gateways and the caller's gateway tokens.
    async fn endpoints_overview(&self, p: &Principal) -> Result<EndpointsOverview, AppError>;
    /// One endpoint with its instances' health and counters; `NotFound` when the caller may
    /// not see it.
    async fn endpoint_detail(&self, p: &Principal, id: &str) -> Result<EndpointDetail, AppError>;
    /// One endpoint's traffic over `window`; `NotFound` when the caller may not see it.
    async fn endpoint_traffic(
        &self,
        p: &Principal,
        id: &str,
        window: TrafficWindow,
    ) -> Result<EndpointTraffic, AppError>;
    async fn create_endpoint(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        input: CreateEndpoint,
    ) -> Result<Endpoint, AppError>;
    /// Deletes an endpoint the caller may `manage`, with its instances and routes.
    async fn delete_endpoint(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
    ) -> Result<(), AppError>;
    async fn add_endpoint_target(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        endpoint_id: &str,
        input: CreateTarget,
    ) -> Result<EndpointTarget, AppError>;
    async fn remove_endpoint_target(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        endpoint_id: &str,
        target_id: &str,
    ) -> Result<(), AppError>;
    /// A gateway token for the caller; the secret is in this answer only.
    async fn issue_gateway_token(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        gateway_id: &str,
        input: CreateGatewayToken,
    ) -> Result<IssuedGatewayToken, AppError>;
    async fn revoke_gateway_token(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
    ) -> Result<(), AppError>;
    /// Tenant admins: the gateways, their routes and every endpoint to lead to.
    async fn gateways_overview(&self, p: &Principal) -> Result<GatewaysOverview, AppError>;
    async fn create_gateway(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        input: CreateGateway,
    ) -> Result<Gateway, AppError>;
    async fn delete_gateway(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
    ) -> Result<(), AppError>;
    async fn create_route(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        input: CreateGatewayRoute,
    ) -> Result<GatewayRoute, AppError>;
    async fn update_route(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
        input: UpdateGatewayRoute,
    ) -> Result<GatewayRoute, AppError>;
    async fn delete_route(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
    ) -> Result<(), AppError>;
    /// Opens a TCP port for an endpoint (tenant admins).
    async fn create_tcp_route(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        input: CreateTcpRoute,
    ) -> Result<TcpRoute, AppError>;
    /// Closes a TCP route's port (tenant admins); open connections finish.
    async fn delete_tcp_route(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
    ) -> Result<(), AppError>;
}
