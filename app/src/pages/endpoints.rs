//! The endpoints page: the endpoints the user may see with the URLs clients call them at and
//! how many instances serve; a new endpoint, deployed with a serving job or not
//! ([`super::endpoint_new`]); a gateway token issued (its secret shown once,
//! with a `curl` command and an OpenAI client ready to copy) and the user's tokens, revoked
//! after a confirmation.

use leptos::prelude::*;
use leptos_meta::Title;

use super::endpoint_new::NewEndpointCard;
use crate::access::Permission;
use crate::api::{
    load_endpoints, CreateEndpointForm, IssueGatewayTokenForm, RevokeGatewayTokenForm,
};
use crate::form::{done, echo, echo_or, echo_selected};
use crate::model::{
    CertificateSource, EndpointSummary, EndpointsOverview, GatewayToken, GatewayTokenKind,
    IssuedGatewayToken,
};
use crate::pages::confirm::{opened, BUTTON_DANGER};
use crate::time::format_ms;
use crate::ui::*;

#[derive(Clone, Copy)]
struct Actions {
    create: ServerAction<CreateEndpointForm>,
    issue: ServerAction<IssueGatewayTokenForm>,
    revoke: ServerAction<RevokeGatewayTokenForm>,
}

#[component]
pub fn EndpointsPage() -> impl IntoView {
    let a = Actions {
        create: ServerAction::new(),
        issue: ServerAction::new(),
        revoke: ServerAction::new(),
    };
    let data = Resource::new(
        move || a.create.version().get() + a.issue.version().get() + a.revoke.version().get(),
        |_| load_endpoints(),
    );
    view! {
        <Title text="Endpoints"/>
        <PageHeader title="Endpoints" subtitle="Your model endpoints, the URLs clients call them at, and the tokens they call with."/>
        <Transition fallback=|| view! { <p class="text-sm text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Err(e) => view! { <ErrorBanner error=e/> }.into_any(),
                    Ok(d) => view! { <EndpointsView d=d a=a/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn EndpointsView(d: EndpointsOverview, a: Actions) -> impl IntoView {
    let shown = d.clone();
    // The token just issued is shown under the tokens, as wide as the tables (its commands are
    // long), and scrolled to: on a phone that is above the form.
    let panel = NodeRef::<leptos::html::Div>::new();
    Effect::new(move |seen: Option<usize>| {
        let version = a.issue.version().get();
        let issued = a.issue.value().with_untracked(|v| matches!(v, Some(Ok(_))));
        if seen.is_some_and(|v| v != version) && issued {
            request_animation_frame(move || {
                if let Some(el) = panel.get_untracked() {
                    el.scroll_into_view();
                }
            });
        }
        version
    });
    view! {
        <div class="grid grid-cols-1 gap-6 xl:grid-cols-3">
            <div class="flex min-w-0 flex-col gap-6 xl:col-span-2">
                <EndpointsCard endpoints=d.endpoints.clone()/>
                <TokensCard d=d.clone() a=a/>
                <div node_ref=panel class=move || if a.issue.value().with(|v| matches!(v, Some(Ok(_)))) { "min-w-0 scroll-mt-4" } else { "hidden" }>
                    {move || a.issue.value().get().and_then(|r| r.ok()).map(|t| view! { <IssuedToken t=t d=shown.clone()/> })}
                </div>
            </div>
            <div class="flex min-w-0 flex-col gap-6">
                <NewEndpointCard d=d.clone() create=a.create/>
                <IssueTokenCard d=d a=a/>
            </div>
        </div>
    }
}

/// "2 of 3 up", or that none is registered.
pub fn instances_text(up: usize, total: usize) -> String {
    if total == 0 {
        "none registered".into()
    } else {
        format!("{up} of {total} up")
    }
}

#[component]
fn EndpointsCard(endpoints: Vec<EndpointSummary>) -> impl IntoView {
    view! {
        <Card title="Endpoints">
            {if endpoints.is_empty() {
                view! { <p class="text-sm text-slate-600">"No endpoints you may see. Create one with the form."</p> }.into_any()
            } else {
                view! {
                    <table class=TABLE data-testid="endpoints-table">
                        <thead><tr>
                            <th class=TH>"Endpoint"</th><th class=TH>"Project"</th><th class=TH>"URLs"</th>
                            <th class=TH>"Instances"</th><th class=TH>"You may"</th>
                        </tr></thead>
                        <tbody class="divide-y divide-slate-100">
                            {endpoints.into_iter().map(|e| {
                                let total = e.endpoint.targets.len();
                                view! {
                                    <tr data-endpoint=e.endpoint.name.clone()>
                                        <td class=format!("{TD} whitespace-nowrap font-medium")>
                                            <a class="text-indigo-700 hover:underline" href=format!("/endpoints/{}", e.endpoint.id)>{e.endpoint.name.clone()}</a>
                                        </td>
                                        <td class=format!("{TD} whitespace-nowrap")>{e.project_name.clone()}</td>
                                        <td class=format!("{TD} font-mono text-xs") data-testid="endpoint-urls">
                                            {if e.routes.is_empty() {
                                                view! { <span class="font-sans text-slate-500">"not published yet"</span> }.into_any()
                                            } else {
                                                e.routes.iter().map(|r| view! {
                                                    <span class="block whitespace-nowrap" title=format!("gateway {}", r.gateway_name)>{r.url.clone()}</span>
                                                }).collect_view().into_any()
                                            }}
                                        </td>
                                        <td class=format!("{TD} whitespace-nowrap tabular-nums") data-testid="endpoint-instances">{instances_text(e.instances_up, total)}</td>
                                        <td class=TD>{e.permission.as_str()}</td>
                                    </tr>
                                }
                            }).collect_view()}
                        </tbody>
                    </table>
                }.into_any()
            }}
        </Card>
    }
}

/// Where a token just issued is used: the first URL on its gateway of an endpoint it may
/// call, and that endpoint's name.
pub fn example_target(d: &EndpointsOverview, t: &GatewayToken) -> Option<(String, String)> {
    d.endpoints
        .iter()
        .filter(|e| match t.kind {
            GatewayTokenKind::Endpoint => t.endpoint_ids.contains(&e.endpoint.id),
            GatewayTokenKind::User => e.permission >= Permission::Use,
        })
        .find_map(|e| {
            e.routes
                .iter()
                .find(|r| r.route.gateway_id == t.gateway_id)
                .map(|r| (r.url.clone(), e.endpoint.name.clone()))
        })
}

/// A chat completion with `curl` at the endpoint's URL (trusting `cacert`, the gateway's
/// self-signed certificate, when given).
pub fn curl_example(url: &str, token: &str, model: &str, cacert: Option<&str>) -> String {
    let trust = cacert.map_or_else(String::new, |f| format!(" --cacert {f}"));
    format!(
        "curl{trust} {}/chat/completions \\\n  -H \"Authorization: Bearer {token}\" \\\n  -H \"Content-Type: application/json\" \\\n  -d '{{\"model\": \"{model}\", \"messages\": [{{\"role\": \"user\", \"content\": \"Hello\"}}]}}'",
        url.trim_end_matches('/')
    )
}

/// The same with the OpenAI Python client: its `base_url` is the endpoint's URL.
pub fn python_example(url: &str, token: &str, model: &str, cacert: Option<&str>) -> String {
    let (import, client) = match cacert {
        Some(f) => (
            "import httpx\n",
            format!(", http_client=httpx.Client(verify=\"{f}\")"),
        ),
        None => ("", String::new()),
    };
    format!(
        "{import}from openai import OpenAI\n\nclient = OpenAI(base_url=\"{url}\", api_key=\"{token}\"{client})\nreply = client.chat.completions.create(\n    model=\"{model}\",\n    messages=[{{\"role\": \"user\", \"content\": \"Hello\"}}],\n)\nprint(reply.choices[0].message.content)"
    )
}

const CODE: &str = "mt-1 whitespace-pre-wrap break-words rounded bg-white px-2 py-1.5 font-mono text-xs text-slate-800";

/// The secret of a token just issued, once, with what to paste to call the endpoint.
#[component]
fn IssuedToken(t: IssuedGatewayToken, d: EndpointsOverview) -> impl IntoView {
    let target = example_target(&d, &t.info);
    let (url, model, note) = match target {
        Some((url, model)) => (url, model, None),
        None => {
            let base = d
                .gateways
                .iter()
                .find(|g| g.id == t.info.gateway_id)
                .map_or_else(String::new, |g| g.url.clone());
            (
                format!("{base}/PREFIX"),
                "ENDPOINT".to_string(),
                Some("No route of this gateway leads to an endpoint the token may call yet: a tenant admin adds one on the Gateways page."),
            )
        }
    };
    // A self-signed certificate must be trusted explicitly: its PEM, named after the gateway.
    let self_signed = d
        .gateways
        .iter()
        .find(|g| g.id == t.info.gateway_id && g.certificate == CertificateSource::SelfSigned)
        .map(|g| {
            (
                format!("{}.pem", g.name),
                format!("/api/v1/gateways/{}/certificate", g.id),
            )
        });
    let cacert = self_signed.as_ref().map(|(file, _)| file.as_str());
    let curl = curl_example(&url, &t.token, &model, cacert);
    let python = python_example(&url, &t.token, &model, cacert);
    view! {
        <div class="rounded-lg border border-amber-200 bg-amber-50 p-4 text-sm shadow-sm sm:p-5" role="status" data-testid="issued-token">
            <p class="font-medium text-amber-900">{format!("Token {} for gateway {}. Copy it now: it is shown once.", t.info.name, t.info.gateway_name)}</p>
            <code class=format!("{CODE} block break-all") data-testid="token-secret">{t.token.clone()}</code>
            {note.map(|n| view! { <p class="mt-2 text-amber-900">{n}</p> })}
            <p class="mt-3 font-medium text-slate-700">"With curl"</p>
            {self_signed.clone().map(|(file, href)| view! {
                <p class="mt-2 text-slate-700" data-testid="token-cacert">
                    "This gateway's certificate is self-signed: save "
                    <a class="text-indigo-700 underline" href=href download=file.clone()>{file.clone()}</a>
                    " beside you and trust it as below."
                </p>
            })}
            <pre class=CODE data-testid="token-curl">{curl}</pre>
            <p class="mt-3 font-medium text-slate-700">"With the OpenAI Python client"</p>
            <pre class=CODE data-testid="token-python">{python}</pre>
        </div>
    }
}

#[component]
fn IssueTokenCard(d: EndpointsOverview, a: Actions) -> impl IntoView {
    let value = move || a.issue.value().get();
    let form = crate::form::emptied_on_save(a.issue);
    let usable: Vec<(String, String)> = d
        .endpoints
        .iter()
        .filter(|e| e.permission >= Permission::Use)
        .map(|e| (e.endpoint.id.clone(), e.endpoint.name.clone()))
        .collect();
    view! {
        <Card title="Issue a token">
            {if d.gateways.is_empty() {
                view! { <p class="text-sm text-slate-600">"No gateway yet: a tenant admin creates one on the Gateways page."</p> }.into_any()
            } else {
                view! {
                    <ActionForm action=a.issue node_ref=form>
                        <CsrfField/>
                        <div class="space-y-3">
                            <div>
                                <label class=LABEL for="token-gateway">"Gateway"</label>
                                <select id="token-gateway" name="gateway_id" class=INPUT>
                                    {d.gateways.iter().map(|g| view! {
                                        <option value=g.id.clone() selected={echo_selected::<IssueGatewayTokenForm>("gateway_id", &g.id)}>{format!("{} ({})", g.name, g.url)}</option>
                                    }).collect_view()}
                                </select>
                                {field_error(value, "gateway_id")}
                            </div>
                            <div>
                                <label class=LABEL for="token-name">"Name"</label>
                                <input id="token-name" name="name" class=INPUT required placeholder="laptop" value={echo::<IssueGatewayTokenForm>("name")}/>
                                {field_error(value, "name")}
                            </div>
                            <div>
                                <label class=LABEL for="token-endpoint">"Only for"</label>
                                <select id="token-endpoint" name="endpoint_id" class=INPUT>
                                    <option value="">"— every endpoint I may use —"</option>
                                    {usable.iter().map(|(id, name)| view! {
                                        <option value=id.clone() selected={echo_selected::<IssueGatewayTokenForm>("endpoint_id", id)}>{name.clone()}</option>
                                    }).collect_view()}
                                </select>
                                {field_error(value, "endpoint_ids")}
                            </div>
                            <div>
                                <label class=LABEL for="token-days">"Expires after (days, 1 to 365)"</label>
                                <input id="token-days" name="expires_in_days" class=INPUT inputmode="numeric" value={echo_or::<IssueGatewayTokenForm>("expires_in_days", "90")}/>
                                {field_error(value, "expires_in_days")}
                            </div>
                        </div>
                        <button type="submit" class=format!("{BUTTON} mt-4")>"Issue token"</button>
                        <p class="mt-1 text-xs text-slate-500">"The secret is shown on this page once, with JavaScript; without it use POST /api/v1/gateways/{id}/tokens."</p>
                        <div class="mt-3">{form_error(value)}</div>
                    </ActionForm>
                }.into_any()
            }}
        </Card>
    }
}

/// Where a token stands: active, expired or revoked.
fn token_state(t: &GatewayToken, now: i64) -> (&'static str, &'static str) {
    if t.revoked_at.is_some() {
        ("revoked", "bg-slate-100 text-slate-700")
    } else if t.expires_at.is_some_and(|at| at <= now) {
        ("expired", "bg-amber-100 text-amber-800")
    } else {
        ("active", "bg-green-100 text-green-800")
    }
}

#[component]
fn TokensCard(d: EndpointsOverview, a: Actions) -> impl IntoView {
    let open = opened("confirm", "token:");
    let revoked = done(a.revoke);
    let revoke_value = move || a.revoke.value().get();
    let endpoint_name = {
        let names: Vec<(String, String)> = d
            .endpoints
            .iter()
            .map(|e| (e.endpoint.id.clone(), e.endpoint.name.clone()))
            .collect();
        move |id: &String| {
            names
                .iter()
                .find(|(eid, _)| eid == id)
                .map_or_else(|| id.clone(), |(_, n)| n.clone())
        }
    };
    let tokens = d.tokens.clone();
    let now = d.now;
    view! {
        <Card title="My gateway tokens">
            {if d.tokens.is_empty() {
                view! { <p class="text-sm text-slate-600">"No gateway tokens yet."</p> }.into_any()
            } else {
                view! {
                    <table class=TABLE data-testid="tokens-table">
                        <thead><tr>
                            <th class=TH>"Name"</th><th class=TH>"Gateway"</th><th class=TH>"Kind"</th><th class=TH>"Prefix"</th>
                            <th class=TH>"Expires"</th><th class=TH>"State"</th><th class=TH></th>
                        </tr></thead>
                        <tbody class="divide-y divide-slate-100">
                            {d.tokens.iter().map(|t| {
                                let (state, class) = token_state(t, now);
                                let kind = match t.kind {
                                    GatewayTokenKind::User => "user: every endpoint I may use".to_string(),
                                    GatewayTokenKind::Endpoint => format!("endpoint: {}", t.endpoint_ids.iter().map(&endpoint_name).collect::<Vec<_>>().join(", ")),
                                };
                                view! {
                                    <tr data-token=t.name.clone()>
                                        <td class=format!("{TD} font-medium")>{t.name.clone()}</td>
                                        <td class=TD>{t.gateway_name.clone()}</td>
                                        <td class=format!("{TD} whitespace-nowrap text-slate-600")>{kind}</td>
                                        <td class=format!("{TD} font-mono text-xs")>{format!("{}…", t.prefix)}</td>
                                        <td class=format!("{TD} whitespace-nowrap text-slate-500")>{t.expires_at.map(format_ms).unwrap_or_else(|| "never".into())}</td>
                                        <td class=TD><span class=format!("rounded px-2 py-0.5 text-xs font-medium {class}") data-testid="token-state">{state}</span></td>
                                        <td class=format!("{TD} text-right")>
                                            {t.revoked_at.is_none().then(|| view! {
                                                <a class=BUTTON_SMALL_DANGER href=format!("?confirm=token:{}#tokens", t.id) aria-label=format!("Revoke token {}", t.name)>"Revoke"</a>
                                            })}
                                        </td>
                                    </tr>
                                }
                            }).collect_view()}
                        </tbody>
                    </table>
                }.into_any()
            }}
            <div id="tokens">
                {move || open().and_then(|id| tokens.iter().find(|t| t.id == id && t.revoked_at.is_none()).cloned()).map(|t| view! {
                    <div class="mt-4 rounded-md border border-red-200 bg-red-50 p-4" data-testid="confirm-revoke">
                        <p class="text-sm font-medium text-red-900">{format!("Revoke token {}? The gateway refuses it from its next request. This cannot be undone.", t.name)}</p>
                        <ActionForm action=a.revoke>
                            <CsrfField/>
                            <input type="hidden" name="id" value=t.id.clone()/>
                            <div class="mt-3 flex flex-wrap items-center gap-3">
                                <button type="submit" class=BUTTON_DANGER>{format!("Revoke token {}", t.name)}</button>
                                <a class="text-sm text-slate-700 hover:underline" href="/endpoints">"Cancel"</a>
                            </div>
                            <div class="mt-3">{form_error(revoke_value)}</div>
                        </ActionForm>
                    </div>
                })}
                {move || revoked().then(|| view! { <p role="status" class="mt-3 text-sm text-emerald-700">"Revoked: the gateway refuses the token from its next request."</p> })}
            </div>
        </Card>
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Endpoint, GatewayRoute, PublishedRoute};

    fn summary(id: &str, permission: Permission, routes: &[(&str, &str)]) -> EndpointSummary {
        EndpointSummary {
            endpoint: Endpoint {
                id: id.into(),
                project_id: "p".into(),
                name: format!("{id}-name"),
                public: false,
                owner_id: None,
                targets: vec![],
                urls: vec![],
                created_at: 0,
            },
            project_name: "p".into(),
            permission,
            routes: routes
                .iter()
                .map(|(gateway, url)| PublishedRoute {
                    route: GatewayRoute {
                        id: format!("{id}-{gateway}"),
                        gateway_id: gateway.to_string(),
                        host: String::new(),
                        path_prefix: "/v1".into(),
                        endpoint_id: id.into(),
                        created_at: 0,
                    },
                    gateway_name: gateway.to_string(),
                    url: url.to_string(),
                })
                .collect(),
            instances_up: 0,
        }
    }

    fn token(kind: GatewayTokenKind, gateway: &str, endpoints: &[&str]) -> GatewayToken {
        GatewayToken {
            id: "t".into(),
            user_id: "u".into(),
            gateway_id: gateway.into(),
            gateway_name: gateway.into(),
            name: "laptop".into(),
            kind,
            endpoint_ids: endpoints.iter().map(|e| e.to_string()).collect(),
            prefix: "syg_abcdefgh".into(),
            expires_at: Some(100),
            revoked_at: None,
            created_at: 0,
        }
    }

    #[test]
    fn the_example_uses_a_url_of_the_tokens_gateway_it_may_call() {
        let d = EndpointsOverview {
            endpoints: vec![
                summary("seen", Permission::View, &[("prod", "http://h:1/seen")]),
                summary("dev-only", Permission::Use, &[("dev", "http://h:2/v1")]),
                summary(
                    "llama",
                    Permission::Use,
                    &[("dev", "http://h:2/llama"), ("prod", "http://h:1/v1")],
                ),
            ],
            ..Default::default()
        };
        let user = token(GatewayTokenKind::User, "prod", &[]);
        assert_eq!(
            example_target(&d, &user),
            Some(("http://h:1/v1".into(), "llama-name".into()))
        );
        let one = token(GatewayTokenKind::Endpoint, "dev", &["llama"]);
        assert_eq!(
            example_target(&d, &one),
            Some(("http://h:2/llama".into(), "llama-name".into()))
        );
        let none = token(GatewayTokenKind::Endpoint, "prod", &["dev-only"]);
        assert_eq!(example_target(&d, &none), None);
    }

    #[test]
    fn the_examples_call_the_url_as_given() {
        let curl = curl_example("http://127.0.0.1:18700/v1/", "syg_x", "llama", None);
        assert!(curl.starts_with("curl http://127.0.0.1:18700/v1/chat/completions \\\n"));
        let trusting = curl_example(
            "https://127.0.0.1:18700/v1",
            "syg_x",
            "llama",
            Some("prod.pem"),
        );
        assert!(trusting
            .starts_with("curl --cacert prod.pem https://127.0.0.1:18700/v1/chat/completions"));
        let py = python_example("https://h/v1", "syg_x", "llama", Some("prod.pem"));
        assert!(
            py.starts_with("import httpx\n")
                && py.contains("http_client=httpx.Client(verify=\"prod.pem\")"),
            "{py}"
        );
        assert!(curl.contains("Bearer syg_x") && curl.contains("\"model\": \"llama\""));
        let py = python_example("http://127.0.0.1:18700/v1", "syg_x", "llama", None);
        assert!(py.contains(
            "client = OpenAI(base_url=\"http://127.0.0.1:18700/v1\", api_key=\"syg_x\")"
        ));
        assert_eq!(
            token_state(&token(GatewayTokenKind::User, "g", &[]), 99).0,
            "active"
        );
        assert_eq!(
            token_state(&token(GatewayTokenKind::User, "g", &[]), 100).0,
            "expired"
        );
        assert_eq!(instances_text(0, 0), "none registered");
        assert_eq!(instances_text(1, 2), "1 of 2 up");
    }
}
