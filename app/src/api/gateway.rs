//! Server functions of the gateway's pages: endpoints and their instances, gateway tokens
//! (the endpoints pages), gateways and routes (the gateways page). Each works as a plain form
//! post too.

use super::*;
#[cfg_attr(not(feature = "ssr"), allow(unused_imports))]
use crate::error::FieldError;
#[cfg(feature = "ssr")]
use crate::model::{
    CreateEndpoint, CreateGateway, CreateGatewayRoute, CreateGatewayToken, CreateTarget,
    CreateTcpRoute, Serve, UpdateGatewayRoute,
};
use crate::model::{
    EndpointCreated, EndpointDetail, EndpointTraffic, EndpointsOverview, Gateway, GatewayRoute,
    GatewaysOverview, IssuedGatewayToken, TcpRoute,
};

/// A conflict the REST layer words as `field: message` ("name: an endpoint named llama
/// already exists") is said at that field of the form, as a rejected value is.
#[cfg_attr(not(feature = "ssr"), allow(dead_code))]
fn at_field(e: AppError, fields: &[&str]) -> AppError {
    if let AppError::Conflict(message) = &e {
        if let Some((field, rest)) = message.split_once(": ") {
            if fields.contains(&field) {
                return AppError::field(field, rest);
            }
        }
    }
    e
}

/// The addresses typed one per line (blank lines left out).
#[cfg_attr(not(feature = "ssr"), allow(dead_code))]
fn lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

#[server(prefix = "/_sf", endpoint = "endpoints/overview")]
pub async fn load_endpoints() -> Result<EndpointsOverview, AppError> {
    ctx::reading(|c| async move { c.backend.endpoints_overview(&c.principal).await }).await
}

#[server(prefix = "/_sf", endpoint = "endpoints/detail")]
pub async fn load_endpoint(id: String) -> Result<EndpointDetail, AppError> {
    ctx::reading(|c| async move { c.backend.endpoint_detail(&c.principal, &id).await }).await
}

/// An endpoint's traffic over `window` (`15m` or `1h`; empty: the hour).
#[server(prefix = "/_sf", endpoint = "endpoints/traffic")]
pub async fn load_endpoint_traffic(
    id: String,
    window: String,
) -> Result<EndpointTraffic, AppError> {
    ctx::reading(|c| async move {
        let window = crate::model::TrafficWindow::parse(Some(&window))?;
        c.backend.endpoint_traffic(&c.principal, &id, window).await
    })
    .await
}

/// An endpoint in a project, with its instances' addresses one per line; with a `command`,
/// deployed too: a serving job (`PORT` = `port`, empty: 8000) submitted to `queue_id` with
/// `serve` set to the new endpoint. A refused submit removes the endpoint again, and its
/// field errors are said at the form's fields (queue, command, port).
#[server(prefix = "/_sf", endpoint = "endpoints/create")]
pub async fn create_endpoint_form(
    csrf: String,
    project_id: String,
    name: String,
    targets: String,
    #[server(default)] queue_id: String,
    #[server(default)] command: String,
    #[server(default)] port: String,
) -> Result<EndpointCreated, AppError> {
    ctx::writing(&csrf, move |c| async move {
        // What is typed is checked before anything is made; the rules of a job are the
        // submit's own (a port below 1024 is refused there).
        let deploy = if command.trim().is_empty() {
            None
        } else {
            if queue_id.is_empty() {
                return Err(AppError::field("queue_id", "choose a queue"));
            }
            Some(form::int_in("port", &port, 1..=65535)?.unwrap_or(DEFAULT_PORT))
        };
        let input = CreateEndpoint {
            project_id,
            name,
            public: false,
            targets: lines(&targets),
        };
        let endpoint = c
            .backend
            .create_endpoint(&c.principal, &c.meta, input)
            .await
            .map_err(|e| at_field(e, &["name"]))?;
        let Some(port) = deploy else {
            return Ok(EndpointCreated {
                endpoint,
                job: None,
            });
        };
        let job = SubmitJob {
            queue_id,
            name: endpoint.name.clone(),
            command,
            image: None,
            env: Default::default(),
            gpu_milli: None,
            priority_class: None,
            abort: None,
            checkpoint_dir: None,
            max_runtime_ms: None,
            duration_ms: None,
            serve: Some(Serve {
                endpoint_id: endpoint.id.clone(),
                port,
            }),
        };
        match c.backend.submit_job(&c.principal, &c.meta, job, None).await {
            Ok(job) => Ok(EndpointCreated {
                endpoint,
                job: Some(job),
            }),
            Err(refused) => {
                // Nothing half-made is left: the endpoint goes again.
                let removed = c
                    .backend
                    .delete_endpoint(&c.principal, &c.meta, &endpoint.id)
                    .await;
                let mut e = at_deploy_fields(refused);
                if let (Err(gone), AppError::Validation(errors)) = (removed, &mut e) {
                    errors.push(FieldError {
                        field: "name".into(),
                        message: format!(
                            "endpoint {} was created but could not be removed again: {gone}",
                            endpoint.name
                        ),
                    });
                }
                Err(e)
            }
        }
    })
    .await
}

/// The port a serving job listens on when the form leaves it empty.
#[cfg_attr(not(feature = "ssr"), allow(dead_code))]
const DEFAULT_PORT: i64 = 8000;

/// A refused submit's field errors at the deploy form's fields: `serve.port` at `port`,
/// `queue_id`, `command` and `name` at theirs, any other (GPUs, memory, what the queue's
/// pools hold) at the queue, which decides them.
#[cfg_attr(not(feature = "ssr"), allow(dead_code))]
fn at_deploy_fields(e: AppError) -> AppError {
    match e {
        AppError::Validation(errors) => AppError::Validation(
            errors
                .into_iter()
                .map(|f| FieldError {
                    field: match f.field.as_str() {
                        "serve.port" => "port",
                        "queue_id" | "command" | "name" => f.field.as_str(),
                        _ => "queue_id",
                    }
                    .to_string(),
                    message: f.message,
                })
                .collect(),
        ),
        e => e,
    }
}

/// Registers an instance (`host:port`) of an endpoint.
#[server(prefix = "/_sf", endpoint = "endpoints/targets/add")]
pub async fn add_target_form(
    csrf: String,
    endpoint_id: String,
    address: String,
) -> Result<crate::model::EndpointTarget, AppError> {
    ctx::writing(&csrf, move |c| async move {
        c.backend
            .add_endpoint_target(
                &c.principal,
                &c.meta,
                &endpoint_id,
                CreateTarget { address },
            )
            .await
            .map_err(|e| at_field(e, &["address"]))
    })
    .await
}

/// Removes an instance; `id` is `<endpoint id>:<target id>`.
#[server(prefix = "/_sf", endpoint = "endpoints/targets/remove")]
pub async fn remove_target_form(csrf: String, id: String) -> Result<(), AppError> {
    ctx::writing(&csrf, move |c| async move {
        let (endpoint_id, target_id) = id.split_once(':').ok_or(AppError::NotFound)?;
        c.backend
            .remove_endpoint_target(&c.principal, &c.meta, endpoint_id, target_id)
            .await
    })
    .await
}

/// A gateway token for the caller: for every endpoint they may use, or (`endpoint_id`) only
/// that one; `expires_in_days` empty: 90. The secret is in this answer only.
#[server(prefix = "/_sf", endpoint = "gateway-tokens/issue")]
pub async fn issue_gateway_token_form(
    csrf: String,
    gateway_id: String,
    name: String,
    endpoint_id: String,
    expires_in_days: String,
) -> Result<IssuedGatewayToken, AppError> {
    ctx::writing(&csrf, move |c| async move {
        if gateway_id.is_empty() {
            return Err(AppError::field("gateway_id", "choose a gateway"));
        }
        let input = CreateGatewayToken {
            name,
            endpoint_ids: (!endpoint_id.is_empty()).then(|| vec![endpoint_id]),
            expires_in_days: form::int_in("expires_in_days", &expires_in_days, 1..=365)?,
        };
        c.backend
            .issue_gateway_token(&c.principal, &c.meta, &gateway_id, input)
            .await
            .map_err(|e| match e {
                // The gateway went away since the page was shown.
                AppError::NotFound => AppError::field("gateway_id", "no such gateway"),
                e => e,
            })
    })
    .await
}

/// Revokes one of the caller's gateway tokens: the gateway refuses it from its next request.
#[server(prefix = "/_sf", endpoint = "gateway-tokens/revoke")]
pub async fn revoke_gateway_token_form(csrf: String, id: String) -> Result<(), AppError> {
    ctx::writing(&csrf, move |c| async move {
        c.backend
            .revoke_gateway_token(&c.principal, &c.meta, &id)
            .await
    })
    .await
}

#[server(prefix = "/_sf", endpoint = "gateways/overview")]
pub async fn load_gateways() -> Result<GatewaysOverview, AppError> {
    ctx::reading(|c| async move { c.backend.gateways_overview(&c.principal).await }).await
}

#[server(prefix = "/_sf", endpoint = "gateways/create")]
pub async fn create_gateway_form(csrf: String, name: String) -> Result<Gateway, AppError> {
    ctx::writing(&csrf, move |c| async move {
        c.backend
            .create_gateway(&c.principal, &c.meta, CreateGateway { name })
            .await
            .map_err(|e| at_field(e, &["name"]))
    })
    .await
}

/// Deletes a gateway with its routes and tokens.
#[server(prefix = "/_sf", endpoint = "gateways/delete")]
pub async fn delete_gateway_form(csrf: String, id: String) -> Result<(), AppError> {
    ctx::writing(&csrf, move |c| async move {
        c.backend.delete_gateway(&c.principal, &c.meta, &id).await
    })
    .await
}

/// Publishes an endpoint on a gateway under a host (empty: any) and a path prefix.
#[server(prefix = "/_sf", endpoint = "routes/create")]
pub async fn create_route_form(
    csrf: String,
    gateway_id: String,
    host: String,
    path_prefix: String,
    endpoint_id: String,
) -> Result<GatewayRoute, AppError> {
    ctx::writing(&csrf, move |c| async move {
        let input = CreateGatewayRoute {
            gateway_id,
            host,
            path_prefix: path_prefix.trim().to_string(),
            endpoint_id,
        };
        c.backend
            .create_route(&c.principal, &c.meta, input)
            .await
            .map_err(|e| at_field(e, &["path_prefix"]))
    })
    .await
}

/// Points a route at another endpoint; its URL stays.
#[server(prefix = "/_sf", endpoint = "routes/update")]
pub async fn update_route_form(
    csrf: String,
    id: String,
    endpoint_id: String,
) -> Result<GatewayRoute, AppError> {
    ctx::writing(&csrf, move |c| async move {
        c.backend
            .update_route(
                &c.principal,
                &c.meta,
                &id,
                UpdateGatewayRoute { endpoint_id },
            )
            .await
    })
    .await
}

#[server(prefix = "/_sf", endpoint = "routes/delete")]
pub async fn delete_route_form(csrf: String, id: String) -> Result<(), AppError> {
    ctx::writing(&csrf, move |c| async move {
        c.backend.delete_route(&c.principal, &c.meta, &id).await
    })
    .await
}

/// Opens a TCP port for an endpoint on a gateway, open only to the networks typed (one per
/// line, or separated by commas or spaces) and, with TLS and certificate authorities pasted,
/// to clients with a certificate they issued.
#[server(prefix = "/_sf", endpoint = "tcp-routes/create")]
pub async fn create_tcp_route_form(
    csrf: String,
    gateway_id: String,
    endpoint_id: String,
    allowed_sources: String,
    tls: Option<String>,
    client_ca: String,
) -> Result<TcpRoute, AppError> {
    ctx::writing(&csrf, move |c| async move {
        let input = CreateTcpRoute {
            gateway_id,
            endpoint_id,
            tls: tls.is_some(),
            allowed_sources: networks(&allowed_sources),
            client_ca: Some(client_ca).filter(|s| !s.trim().is_empty()),
        };
        c.backend
            .create_tcp_route(&c.principal, &c.meta, input)
            .await
    })
    .await
}

/// Closes a TCP route's port.
#[server(prefix = "/_sf", endpoint = "tcp-routes/delete")]
pub async fn delete_tcp_route_form(csrf: String, id: String) -> Result<(), AppError> {
    ctx::writing(&csrf, move |c| async move {
        c.backend.delete_tcp_route(&c.principal, &c.meta, &id).await
    })
    .await
}

/// Networks typed one per line or separated by commas or spaces.
#[cfg_attr(not(feature = "ssr"), allow(dead_code))]
fn networks(text: &str) -> Vec<String> {
    text.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks_are_read_one_per_line_or_between_commas() {
        assert_eq!(
            networks("10.0.0.0/8\n 192.168.1.0/24, ::1/128\n\n127.0.0.1/32"),
            ["10.0.0.0/8", "192.168.1.0/24", "::1/128", "127.0.0.1/32"]
        );
        assert!(networks(" ,\n").is_empty());
    }

    #[test]
    fn a_named_conflict_is_said_at_its_field() {
        let e = at_field(
            AppError::Conflict("name: a gateway named prod already exists".into()),
            &["name"],
        );
        assert_eq!(
            e.message_for("name").as_deref(),
            Some("a gateway named prod already exists")
        );
        let other = AppError::Conflict("No free gateway port: all 10 ports…".into());
        assert_eq!(at_field(other.clone(), &["name"]), other);
        let refused = AppError::Validation(vec![
            FieldError {
                field: "serve.port".into(),
                message: "must be between 1024 and 65535".into(),
            },
            FieldError {
                field: "command".into(),
                message: "must be 1 to 10000 characters".into(),
            },
            FieldError {
                field: "gpu_milli".into(),
                message: "no node of the queue's pools is large enough".into(),
            },
        ]);
        let e = at_deploy_fields(refused);
        assert_eq!(
            e.message_for("port").as_deref(),
            Some("must be between 1024 and 65535")
        );
        assert!(e.message_for("command").is_some());
        assert!(e
            .message_for("queue_id")
            .is_some_and(|m| m.contains("large enough")));
        assert_eq!(at_deploy_fields(AppError::Forbidden), AppError::Forbidden);
        assert_eq!(
            lines(" a:1 \n\n b:2\r\n"),
            ["a:1".to_string(), "b:2".to_string()]
        );
    }
}
