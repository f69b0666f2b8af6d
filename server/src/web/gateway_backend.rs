//! The server's implementation of the gateway's part of the pages' backend: thin calls into
//! the gateway's domain modules.

use app::backend::GatewayBackend;
use app::error::AppError;
use app::model::*;

use super::backend::WebBackend;
use crate::gateway as gw;
use crate::identity::directory::{self as dir, ListParams};

#[async_trait::async_trait]
impl GatewayBackend for WebBackend {
    async fn endpoints_overview(&self, p: &Principal) -> Result<EndpointsOverview, AppError> {
        let s = &self.state;
        let projects = dir::list_projects(&s.store, p, &ListParams::all())
            .await?
            .items;
        Ok(
            gw::overview::endpoints_overview(&s.store, &s.config.gateway, &s.gateways, p, projects)
                .await?,
        )
    }
    async fn endpoint_detail(&self, p: &Principal, id: &str) -> Result<EndpointDetail, AppError> {
        let s = &self.state;
        let projects = dir::list_projects(&s.store, p, &ListParams::all())
            .await?
            .items;
        Ok(gw::overview::endpoint_detail(
            &s.store,
            &s.config.gateway,
            &s.gateways,
            p,
            &projects,
            id,
        )
        .await?)
    }
    async fn endpoint_traffic(
        &self,
        p: &Principal,
        id: &str,
        window: TrafficWindow,
    ) -> Result<EndpointTraffic, AppError> {
        let s = &self.state;
        Ok(
            gw::sampler::endpoint_traffic(&s.store, &s.config.gateway, &s.gateways, p, id, window)
                .await?,
        )
    }
    async fn create_endpoint(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        input: CreateEndpoint,
    ) -> Result<Endpoint, AppError> {
        let s = &self.state;
        Ok(gw::endpoints::create_endpoint(&s.store, &s.config.gateway, p, meta, input).await?)
    }
    async fn delete_endpoint(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
    ) -> Result<(), AppError> {
        Ok(gw::endpoints::delete_endpoint(&self.state.store, p, meta, id).await?)
    }
    async fn add_endpoint_target(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        endpoint_id: &str,
        input: CreateTarget,
    ) -> Result<EndpointTarget, AppError> {
        Ok(gw::endpoints::add_target(&self.state.store, p, meta, endpoint_id, input).await?)
    }
    async fn remove_endpoint_target(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        endpoint_id: &str,
        target_id: &str,
    ) -> Result<(), AppError> {
        Ok(
            gw::endpoints::remove_target(&self.state.store, p, meta, endpoint_id, target_id)
                .await?,
        )
    }
    async fn issue_gateway_token(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        gateway_id: &str,
        input: CreateGatewayToken,
    ) -> Result<IssuedGatewayToken, AppError> {
        Ok(gw::tokens::issue_token(&self.state.store, p, meta, gateway_id, input).await?)
    }
    async fn revoke_gateway_token(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
    ) -> Result<(), AppError> {
        Ok(gw::tokens::revoke_token(&self.state.store, p, meta, id).await?)
    }
    async fn gateways_overview(&self, p: &Principal) -> Result<GatewaysOverview, AppError> {
        let s = &self.state;
        Ok(gw::overview::gateways_overview(&s.store, &s.config.gateway, p).await?)
    }
    async fn create_gateway(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        input: CreateGateway,
    ) -> Result<Gateway, AppError> {
        let s = &self.state;
        Ok(gw::instances::create_gateway(&s.store, &s.config.gateway, p, meta, input).await?)
    }
    async fn delete_gateway(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
    ) -> Result<(), AppError> {
        let s = &self.state;
        Ok(gw::instances::delete_gateway(&s.store, &s.config.gateway, p, meta, id).await?)
    }
    async fn create_route(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        input: CreateGatewayRoute,
    ) -> Result<GatewayRoute, AppError> {
        Ok(gw::routes::create_route(&self.state.store, p, meta, input).await?)
    }
    async fn update_route(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
        input: UpdateGatewayRoute,
    ) -> Result<GatewayRoute, AppError> {
        Ok(gw::routes::update_route(&self.state.store, p, meta, id, input).await?)
    }
    async fn delete_route(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
    ) -> Result<(), AppError> {
        Ok(gw::routes::delete_route(&self.state.store, p, meta, id).await?)
    }
    async fn create_tcp_route(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        input: CreateTcpRoute,
    ) -> Result<TcpRoute, AppError> {
        let s = &self.state;
        Ok(gw::tcp_routes::create(&s.store, &s.config.gateway, p, meta, input).await?)
    }
    async fn delete_tcp_route(
        &self,
        p: &Principal,
        meta: &RequestMeta,
        id: &str,
    ) -> Result<(), AppError> {
        let s = &self.state;
        Ok(gw::tcp_routes::delete(&s.store, &s.config.gateway, p, meta, id).await?)
    }
}
