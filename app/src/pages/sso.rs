use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::api::{
    load_idps, load_scim_token, CreateLdapIdp, CreateOidcIdp, CreateSamlIdp, DeleteIdp,
    IssueScimTokenForm, RevokeScimTokenForm, SetPasswordLogin, TestIdp,
};
use crate::form::{done, echo, echo_checked, echo_selected, echo_text};
use crate::model::{IdentityProvider, ProviderKind};
use crate::pages::confirm::{confirm_delete, opened};
use crate::time::format_ms;
use crate::ui::*;

/// The forms' actions: each protocol's form adds a provider, or saves the one being edited.
#[derive(Clone, Copy)]
struct Forms {
    oidc: ServerAction<CreateOidcIdp>,
    ldap: ServerAction<CreateLdapIdp>,
    saml: ServerAction<CreateSamlIdp>,
}

/// Single sign-on settings of the tenant: its identity providers with "test connection", Edit
/// (`?edit=idp:<id>`, the protocol's form filled with the provider's values) and Remove (after
/// a confirmation, `?confirm=idp:<id>`), a form per protocol, whether local passwords still
/// work, and the SCIM token.
#[component]
pub fn SsoSettingsPage() -> impl IntoView {
    let forms = Forms {
        oidc: ServerAction::new(),
        ldap: ServerAction::new(),
        saml: ServerAction::new(),
    };
    let passwords = ServerAction::<SetPasswordLogin>::new();
    let remove = ServerAction::<DeleteIdp>::new();
    let passwords_saved = done(passwords);
    let (edit_id, confirm_id) = (opened("edit", "idp:"), opened("confirm", "idp:"));
    let data = Resource::new(
        move || {
            (
                forms.oidc.version().get(),
                forms.ldap.version().get(),
                forms.saml.version().get(),
                passwords.version().get(),
                remove.version().get(),
            )
        },
        |_| load_idps(),
    );
    let removed = done(remove);
    let remove_value = move || remove.value().get();
    let issue = ServerAction::<IssueScimTokenForm>::new();
    let revoke = ServerAction::<RevokeScimTokenForm>::new();
    let scim = Resource::new(
        move || (issue.version().get(), revoke.version().get()),
        |_| load_scim_token(),
    );
    view! {
        <Title text="Single sign-on"/>
        <PageHeader title="Single sign-on" subtitle="Users who sign in through your identity provider are created on first sign-in, and their IdP groups become their Switchyard groups at every sign-in."/>
        <Transition fallback=|| view! { <p class="text-sm text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                // Read before the awaits, so that a new query (Edit, Remove) renders again.
                let (edit, confirm) = (edit_id(), confirm_id());
                let (list, options) = match data.await {
                    Ok(d) => d,
                    Err(e) => return view! { <ErrorBanner error=e/> }.into_any(),
                };
                let issued_at = scim.await.ok().flatten();
                let editing = edit.map(|id| list.iter().find(|p| p.id == id).cloned());
                let confirming = confirm.map(|id| list.iter().find(|p| p.id == id).cloned());
                view! {
                    <div class="space-y-6">
                        <Card title="Identity providers">
                            <p class="mb-4 text-sm text-slate-600">
                                "Your organization's sign-in page: "
                                <a class="font-mono text-indigo-700 hover:underline" href=format!("/t/{}/login", options.tenant_slug)>{format!("/t/{}/login", options.tenant_slug)}</a>
                                {if options.password_login { " (local passwords are on)" } else { " (local passwords are off; platform admins keep theirs)" }}
                            </p>
                            <ProvidersTable list=list/>
                            <div id="idp-confirm">
                                {match confirming {
                                    Some(Some(p)) => confirm_delete!(remove, p.id.clone(), format!("provider {}", p.display_name), "/settings/sso".to_string(), remove_value),
                                    Some(None) if removed() => view! { <p role="status" class="mt-4 text-sm text-emerald-700">"The provider was removed."</p> }.into_any(),
                                    Some(None) => view! { <p role="status" class="mt-4 text-sm text-slate-600">"No such provider: it may have been removed."</p> }.into_any(),
                                    None => ().into_any(),
                                }}
                            </div>
                            <ActionForm action=passwords attr:class="mt-4 flex items-center gap-3">
                                <CsrfField/>
                                <label class="flex items-center gap-2 text-sm">
                                    <input type="checkbox" name="password_login" value="on" checked=options.password_login/>
                                    "Allow local passwords"
                                </label>
                                <button type="submit" class=BUTTON>"Save"</button>
                                {move || passwords_saved().then(|| view! { <span role="status" class="text-sm text-emerald-700">"Saved."</span> })}
                            </ActionForm>
                        </Card>
                        {match editing {
                            Some(Some(p)) => view! {
                                <div id="idp-edit" class="max-w-3xl">
                                    {match p.kind {
                                        ProviderKind::Oidc => view! { <OidcForm action=forms.oidc current=Some(p)/> }.into_any(),
                                        ProviderKind::Saml => view! { <SamlForm action=forms.saml current=Some(p)/> }.into_any(),
                                        ProviderKind::Ldap => view! { <LdapForm action=forms.ldap current=Some(p)/> }.into_any(),
                                    }}
                                    <a class="mt-3 inline-block text-sm text-slate-700 hover:underline" href="/settings/sso">"Close"</a>
                                </div>
                            }.into_any(),
                            Some(None) => view! { <p role="status" class="text-sm text-slate-600">"No such provider: it may have been removed. " <a class="text-indigo-700 hover:underline" href="/settings/sso">"Close"</a></p> }.into_any(),
                            None => view! {
                                <div class="grid grid-cols-1 gap-6 lg:grid-cols-2">
                                    <OidcForm action=forms.oidc current=None/>
                                    <SamlForm action=forms.saml current=None/>
                                    <LdapForm action=forms.ldap current=None/>
                                    <ScimCard issue revoke issued_at/>
                                </div>
                            }.into_any(),
                        }}
                    </div>
                }
                .into_any()
            })}
        </Transition>
    }
}

#[component]
fn ProvidersTable(list: Vec<IdentityProvider>) -> impl IntoView {
    if list.is_empty() {
        return view! { <p class="text-sm text-slate-600">"No identity providers yet: add one below."</p> }.into_any();
    }
    view! {
        <div class="overflow-x-auto">
        <table class=TABLE data-testid="idp-table">
            <thead><tr>
                <th class=TH>"Name"</th><th class=TH>"Protocol"</th><th class=TH>"Where"</th>
                <th class=TH>"Redirect URI / ACS to register"</th><th class=TH>"Secret or keys"</th><th class=TH>"Added"</th><th class=TH>"Connection"</th>
            </tr></thead>
            <tbody class="divide-y divide-slate-100">
                {list.into_iter().map(|p| {
                    let target = p.oidc.as_ref().map(|o| o.issuer.clone())
                        .or_else(|| p.saml.as_ref().map(|s| s.idp_entity_id.clone()))
                        .or_else(|| p.ldap.as_ref().map(|l| l.url.clone()))
                        .unwrap_or_default();
                    let redirect = if p.redirect_uri.is_empty() { "—".into() } else { p.redirect_uri.clone() };
                    let sp_entity = p.sp_entity_id.clone();
                    let secret = match p.kind.as_str() {
                        "saml" => format!("{} signing cert(s)", p.saml.as_ref().map(|s| s.idp_certificates.len()).unwrap_or(0)),
                        _ if p.has_client_secret => "stored".into(),
                        _ => "none".into(),
                    };
                    view! {
                        <tr data-idp=p.name.clone()>
                            <td class=TD><div class="font-medium">{p.display_name.clone()}</div><div class="font-mono text-xs text-slate-500">{p.name.clone()}</div></td>
                            <td class=TD>{p.kind.as_str().to_uppercase()}{(!p.enabled).then_some(" (off)")}</td>
                            <td class=format!("{TD} font-mono text-xs")>{target}</td>
                            <td class=format!("{TD} font-mono text-xs")>
                                <div>{redirect}</div>
                                {sp_entity.map(|e| view! {
                                    <div class="mt-1 text-slate-500">"SP entity ID and metadata: "<a class="text-indigo-700 hover:underline" href=e.clone() rel="external">{e.clone()}</a></div>
                                })}
                            </td>
                            <td class=TD>{secret}</td>
                            <td class=format!("{TD} text-slate-500")>{format_ms(p.created_at)}</td>
                            <td class=TD>
                                <TestButton id=p.id.clone()/>
                                <div class="mt-2 flex gap-2 whitespace-nowrap">
                                    <a class="rounded px-2 py-1 text-xs font-medium text-indigo-700 hover:bg-indigo-50" href=format!("?edit=idp:{}#idp-edit", p.id) aria-label=format!("Edit {}", p.display_name)>"Edit"</a>
                                    <a class=BUTTON_SMALL_DANGER href=format!("?confirm=idp:{}#idp-confirm", p.id) aria-label=format!("Remove {}", p.display_name)>"Remove"</a>
                                </div>
                            </td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
        </div>
    }.into_any()
}

/// The tenant's SCIM token: when it was issued; a new one (shown once, replacing the old one)
/// and revoking it (confirmed).
#[component]
fn ScimCard(
    issue: ServerAction<IssueScimTokenForm>,
    revoke: ServerAction<RevokeScimTokenForm>,
    issued_at: Option<i64>,
) -> impl IntoView {
    let query = use_query_map();
    let confirming = move || query.with(|q| q.get_str("confirm") == Some("scim"));
    let revoke_value = move || revoke.value().get();
    let issue_value = move || issue.value().get();
    let revoked = done(revoke);
    view! {
        <Card title="Provisioning (SCIM 2.0)">
            <p class="text-sm text-slate-600">"Your IdP creates, updates and removes users and groups through "<span class="font-mono">"/scim/v2"</span>" with this token (a bearer token)."</p>
            <p class="mt-3 text-sm font-medium text-slate-800" data-testid="scim-status">
                {match issued_at {
                    Some(at) => format!("A token was issued {}.", format_ms(at)),
                    None => "No token: SCIM provisioning is off.".to_string(),
                }}
            </p>
            {move || issue.value().get().and_then(|r| r.ok()).map(|token| view! {
                <div class="mt-3 rounded-md border border-amber-200 bg-amber-50 p-3 text-sm" role="status">
                    <p class="font-medium text-amber-900">"Copy it now: it is shown once, and the token before it no longer works."</p>
                    <code class="mt-2 block break-all rounded bg-white px-2 py-1 font-mono text-xs" data-testid="scim-token">{token}</code>
                </div>
            })}
            <ActionForm action=issue attr:class="mt-4">
                <CsrfField/>
                <button type="submit" class=BUTTON_SECONDARY>"Issue a new token"</button>
                <p class="mt-1 text-xs text-slate-500">"Shown on this page once, with JavaScript; without it use POST /api/v1/scim/token."</p>
                <div class="mt-3">{form_error(issue_value)}</div>
            </ActionForm>
            <div id="scim-revoke" class="mt-4">
                {move || if confirming() {
                    confirm_delete!(revoke, "scim".to_string(), "the SCIM token".to_string(), "/settings/sso".to_string(), revoke_value)
                } else {
                    view! { <a class=BUTTON_SMALL_DANGER href="?confirm=scim#scim-revoke">"Revoke the token…"</a> }.into_any()
                }}
                {move || revoked().then(|| view! { <p role="status" class="mt-3 text-sm text-emerald-700">"Revoked: SCIM requests are refused from now on."</p> })}
            </div>
        </Card>
    }
}

/// "Test connection": runs the checks and lists each step with what failed.
#[component]
fn TestButton(id: String) -> impl IntoView {
    let test = ServerAction::<TestIdp>::new();
    view! {
        <ActionForm action=test>
            <CsrfField/>
            <input type="hidden" name="id" value=id/>
            <button type="submit" class="rounded border border-slate-300 px-2 py-1 text-xs font-medium text-slate-700 hover:bg-slate-50">"Test connection"</button>
        </ActionForm>
        {move || test.value().get().map(|r| match r {
            Ok(checks) => view! {
                <ul class="mt-2 space-y-1 text-xs" data-testid="idp-checks">
                    {checks.into_iter().map(|c| view! {
                        <li data-ok=c.ok.to_string() class=if c.ok { "text-emerald-700" } else { "text-red-700" }>
                            {if c.ok { "✓ " } else { "✗ " }}<span class="font-medium">{c.step}</span>": "{c.detail}
                        </li>
                    }).collect_view()}
                </ul>
            }.into_any(),
            Err(e) => view! { <ErrorBanner error=e/> }.into_any(),
        })}
    }
}

/// What an edit form starts with: the echo of a rejected post, else the provider's value.
fn or_current<S: server_fn::ServerFn>(field: &str, current: Option<String>) -> Option<String> {
    echo::<S>(field).or(current)
}

/// The first lines of a provider form: its id (empty for a new one), name, label, and whether
/// it is on.
macro_rules! identity_fields {
    ($ty:ty, $value:expr, $current:expr, $prefix:literal, $label:literal, $placeholder:literal, $display:literal) => {{
        let cur: &Option<IdentityProvider> = $current;
        view! {
            <input type="hidden" name="id" value=cur.as_ref().map(|p| p.id.clone()).unwrap_or_default()/>
            <Field value=$value id=concat!($prefix, "-name") name="name" label="Name (in URLs)" error="name" placeholder=$placeholder required=true initial={or_current::<$ty>("name", cur.as_ref().map(|p| p.name.clone()))}/>
            <Field value=$value id=concat!($prefix, "-display") name="display_name" label=$label error="display_name" placeholder=$display required=true initial={or_current::<$ty>("display_name", cur.as_ref().map(|p| p.display_name.clone()))}/>
            <label class="col-span-2 flex items-center gap-2 text-sm">
                <input type="checkbox" name="enabled" value="on" checked={echo_checked::<$ty>("enabled", cur.as_ref().is_none_or(|p| p.enabled))}/>
                "On (offered at sign-in)"
            </label>
        }
    }};
}

/// The form's title, button and result: adding, or saving the provider being edited.
fn words(
    current: &Option<IdentityProvider>,
    add_title: &'static str,
    add_button: &'static str,
) -> (String, &'static str, &'static str) {
    match current {
        Some(p) => (
            format!("Edit {}", p.display_name),
            "Save provider",
            "Saved.",
        ),
        None => (add_title.to_string(), add_button, "Provider added."),
    }
}

#[component]
fn OidcForm(
    action: ServerAction<CreateOidcIdp>,
    current: Option<IdentityProvider>,
) -> impl IntoView {
    let value = move || action.value().get();
    let added = done(action);
    let (title, button, result) = words(&current, "Add an OpenID Connect provider", "Add provider");
    let oidc = current.as_ref().and_then(|p| p.oidc.clone());
    let secret_hint = if current.as_ref().is_some_and(|p| p.has_client_secret) {
        "stored: leave empty to keep it"
    } else {
        ""
    };
    let required = current.as_ref().map(|p| p.sync.required_groups.join(", "));
    view! {
        <Card title=title>
            <ActionForm action=action>
                <CsrfField/>
                <div class="grid grid-cols-2 gap-3">
                    {identity_fields!(CreateOidcIdp, value, &current, "oidc", "Button label", "okta", "Acme Okta")}
                    <Field value=value id="oidc-issuer" name="issuer" label="Issuer URL" error="oidc.issuer" placeholder="https://acme.okta.com" required=true initial={or_current::<CreateOidcIdp>("issuer", oidc.as_ref().map(|o| o.issuer.clone()))}/>
                    <Field value=value id="oidc-client-id" name="client_id" label="Client ID" error="oidc.client_id" required=true initial={or_current::<CreateOidcIdp>("client_id", oidc.as_ref().map(|o| o.client_id.clone()))}/>
                    <Field value=value id="oidc-secret" name="client_secret" label="Client secret" error="client_secret" kind="password" placeholder=secret_hint/>
                    <Field value=value id="oidc-groups-claim" name="groups_claim" label="Groups claim" error="oidc.groups_claim" placeholder="groups" initial={or_current::<CreateOidcIdp>("groups_claim", oidc.as_ref().and_then(|o| o.groups_claim.clone()))}/>
                </div>
                <div class="mt-3">
                    <Field value=value id="oidc-required" name="required_groups" label="Only these IdP groups may sign in (comma-separated; empty: anyone)" error="sync.required_groups" initial={or_current::<CreateOidcIdp>("required_groups", required)}/>
                </div>
                <div class="mt-4 flex items-center gap-4">
                    <button type="submit" class=BUTTON>{button}</button>
                    {move || added().then(|| view! { <span role="status" class="text-sm text-emerald-700">{result}</span> })}
                </div>
                <div class="mt-3">{form_error(value)}</div>
            </ActionForm>
        </Card>
    }
}

#[component]
fn SamlForm(
    action: ServerAction<CreateSamlIdp>,
    current: Option<IdentityProvider>,
) -> impl IntoView {
    let value = move || action.value().get();
    let added = done(action);
    let (title, button, result) = words(&current, "Add a SAML 2.0 provider", "Add SAML provider");
    let saml = current.as_ref().and_then(|p| p.saml.clone());
    let required = current.as_ref().map(|p| p.sync.required_groups.join(", "));
    view! {
        <Card title=title>
            <ActionForm action=action>
                <CsrfField/>
                <div class="grid grid-cols-2 gap-3">
                    {identity_fields!(CreateSamlIdp, value, &current, "saml", "Button label", "adfs", "Acme ADFS")}
                </div>
                <div class="mt-3">
                    <Field value=value id="saml-metadata-url" name="metadata_url" label="IdP metadata URL" error="saml.idp_metadata_url" placeholder="https://idp.acme.com/saml/metadata" initial={or_current::<CreateSamlIdp>("metadata_url", saml.as_ref().and_then(|s| s.idp_metadata_url.clone()))}/>
                </div>
                <div class="mt-3">
                    <label class=LABEL for="saml-metadata-xml">"…or paste the IdP metadata XML"</label>
                    <textarea id="saml-metadata-xml" name="metadata_xml" rows="3" class=format!("{INPUT} font-mono text-xs") placeholder=if saml.is_some() { "leave empty to keep the metadata it has" } else { "<EntityDescriptor …>" } inner_html={echo_text::<CreateSamlIdp>("metadata_xml")}></textarea>
                    {field_error(value, "saml.idp_metadata_xml")}
                    {field_error(value, "saml.idp_entity_id")}
                    {field_error(value, "saml.idp_sso_url")}
                    {field_error(value, "saml.idp_certificates")}
                </div>
                <div class="mt-3 grid grid-cols-2 gap-3">
                    <Field value=value id="saml-groups-attr" name="groups_attribute" label="Groups attribute" error="saml.groups_attribute" placeholder="groups" initial={or_current::<CreateSamlIdp>("groups_attribute", saml.as_ref().and_then(|s| s.groups_attribute.clone()))}/>
                    <Field value=value id="saml-required" name="required_groups" label="Only these IdP groups may sign in" error="sync.required_groups" initial={or_current::<CreateSamlIdp>("required_groups", required)}/>
                </div>
                <p class="mt-2 text-xs text-slate-500">"Responses are taken only when signed by a certificate from the metadata. After adding, register the ACS URL and SP entity ID shown in the table at your IdP."</p>
                <div class="mt-4 flex items-center gap-4">
                    <button type="submit" class=BUTTON>{button}</button>
                    {move || added().then(|| view! { <span role="status" class="text-sm text-emerald-700">{result}</span> })}
                </div>
                <div class="mt-3">{form_error(value)}</div>
            </ActionForm>
        </Card>
    }
}

#[component]
fn LdapForm(
    action: ServerAction<CreateLdapIdp>,
    current: Option<IdentityProvider>,
) -> impl IntoView {
    let value = move || action.value().get();
    let added = done(action);
    let (title, button, result) = words(&current, "Add an LDAP directory", "Add directory");
    let (button, result) = if current.is_some() {
        (button, result)
    } else {
        (button, "Directory added.")
    };
    let l = current.as_ref().and_then(|p| p.ldap.clone());
    let secret_hint = if current.as_ref().is_some_and(|p| p.has_client_secret) {
        "stored: leave empty to keep it"
    } else {
        ""
    };
    let search = echo_selected::<CreateLdapIdp>("group_lookup", "search")
        || (echo::<CreateLdapIdp>("group_lookup").is_none()
            && l.as_ref().and_then(|l| l.group_lookup.as_deref()) == Some("search"));
    view! {
        <Card title=title>
            <ActionForm action=action>
                <CsrfField/>
                <div class="grid grid-cols-2 gap-3">
                    {identity_fields!(CreateLdapIdp, value, &current, "ldap", "Form title", "corp-ad", "Corporate directory")}
                    <Field value=value id="ldap-url" name="url" label="URL" error="ldap.url" placeholder="ldaps://ldap.acme.com" required=true initial={or_current::<CreateLdapIdp>("url", l.as_ref().map(|l| l.url.clone()))}/>
                    <Field value=value id="ldap-template" name="user_dn_template" label="User DN template (direct bind)" error="ldap.user_dn_template" placeholder="uid={username},ou=people,dc=acme,dc=com" initial={or_current::<CreateLdapIdp>("user_dn_template", l.as_ref().and_then(|l| l.user_dn_template.clone()))}/>
                    <Field value=value id="ldap-base" name="base_dn" label="Base DN (search-then-bind)" error="ldap.base_dn" initial={or_current::<CreateLdapIdp>("base_dn", l.as_ref().map(|l| l.base_dn.clone()))}/>
                    <Field value=value id="ldap-bind-dn" name="bind_dn" label="Service account DN" error="ldap.bind_dn" initial={or_current::<CreateLdapIdp>("bind_dn", l.as_ref().and_then(|l| l.bind_dn.clone()))}/>
                    <Field value=value id="ldap-bind-pw" name="bind_password" label="Service account password" error="client_secret" kind="password" placeholder=secret_hint/>
                    <div>
                        <label class=LABEL for="ldap-lookup">"Groups from"</label>
                        <select id="ldap-lookup" name="group_lookup" class=INPUT>
                            <option value="member_of">"the user's memberOf"</option>
                            <option value="search" selected=search>"a group search"</option>
                        </select>
                        {field_error(value, "ldap.group_lookup")}
                    </div>
                    <Field value=value id="ldap-group-base" name="group_base_dn" label="Group base DN (group search)" error="ldap.group_base_dn" initial={or_current::<CreateLdapIdp>("group_base_dn", l.as_ref().and_then(|l| l.group_base_dn.clone()))}/>
                </div>
                <label class="mt-3 flex items-center gap-2 text-sm">
                    <input type="checkbox" name="start_tls" value="on" checked={echo_checked::<CreateLdapIdp>("start_tls", l.as_ref().is_some_and(|l| l.start_tls))}/>
                    "StartTLS"
                </label>
                {field_error(value, "ldap.start_tls")}
                <div class="mt-4 flex items-center gap-4">
                    <button type="submit" class=BUTTON>{button}</button>
                    {move || added().then(|| view! { <span role="status" class="text-sm text-emerald-700">{result}</span> })}
                </div>
                <div class="mt-3">{form_error(value)}</div>
            </ActionForm>
        </Card>
    }
}
