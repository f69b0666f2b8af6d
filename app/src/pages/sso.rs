use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::{
    load_idps, CreateLdapIdp, CreateOidcIdp, CreateSamlIdp, DeleteIdp, SetPasswordLogin, TestIdp,
};
use crate::form::{done, echo, echo_checked, echo_selected, echo_text};
use crate::model::IdentityProvider;
use crate::time::format_ms;
use crate::ui::*;

/// Single sign-on settings of the tenant: its identity providers with "test connection", a
/// form per protocol, and whether local passwords still work.
#[component]
pub fn SsoSettingsPage() -> impl IntoView {
    let oidc = ServerAction::<CreateOidcIdp>::new();
    let ldap = ServerAction::<CreateLdapIdp>::new();
    let saml = ServerAction::<CreateSamlIdp>::new();
    let passwords = ServerAction::<SetPasswordLogin>::new();
    let remove = ServerAction::<DeleteIdp>::new();
    let passwords_saved = done(passwords);
    let data = Resource::new(
        move || {
            (
                oidc.version().get(),
                ldap.version().get(),
                saml.version().get(),
                passwords.version().get(),
                remove.version().get(),
            )
        },
        |_| load_idps(),
    );
    view! {
        <Title text="Single sign-on"/>
        <PageHeader title="Single sign-on" subtitle="Users who sign in through your identity provider are created on first sign-in, and their IdP groups become their Switchyard groups at every sign-in."/>
        <div class="space-y-6">
            <Card title="Identity providers">
                <Transition fallback=|| view! { <p class="text-sm text-slate-500">"Loading…"</p> }>
                    {move || Suspend::new(async move {
                        match data.await {
                            Ok((list, options)) => view! {
                                <p class="mb-4 text-sm text-slate-600">
                                    "Your organization's sign-in page: "
                                    <a class="font-mono text-indigo-700 hover:underline" href=format!("/t/{}/login", options.tenant_slug)>{format!("/t/{}/login", options.tenant_slug)}</a>
                                    {if options.password_login { " (local passwords are on)" } else { " (local passwords are off; platform admins keep theirs)" }}
                                </p>
                                <ProvidersTable list=list remove=remove/>
                                {move || remove.value().get().and_then(|r| r.err()).map(|e| view! { <ErrorBanner error=e/> })}
                                <ActionForm action=passwords attr:class="mt-4 flex items-center gap-3">
                                    <CsrfField/>
                                    <label class="flex items-center gap-2 text-sm">
                                        <input type="checkbox" name="password_login" value="on" checked=options.password_login/>
                                        "Allow local passwords"
                                    </label>
                                    <button type="submit" class=BUTTON>"Save"</button>
                                    {move || passwords_saved().then(|| view! { <span role="status" class="text-sm text-emerald-700">"Saved."</span> })}
                                </ActionForm>
                            }.into_any(),
                            Err(e) => view! { <ErrorBanner error=e/> }.into_any(),
                        }
                    })}
                </Transition>
            </Card>
            <div class="grid grid-cols-1 gap-6 lg:grid-cols-2">
                <OidcForm action=oidc/>
                <SamlForm action=saml/>
                <LdapForm action=ldap/>
            </div>
        </div>
    }
}

#[component]
fn ProvidersTable(list: Vec<IdentityProvider>, remove: ServerAction<DeleteIdp>) -> impl IntoView {
    if list.is_empty() {
        return view! { <p class="text-sm text-slate-600">"No identity providers yet: add one below."</p> }.into_any();
    }
    view! {
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
                                <ActionForm action=remove attr:class="mt-2">
                                    <CsrfField/>
                                    <input type="hidden" name="id" value=p.id.clone()/>
                                    <button type="submit" class="rounded border border-red-200 px-2 py-1 text-xs font-medium text-red-700 hover:bg-red-50" aria-label=format!("Remove {}", p.display_name)>"Remove"</button>
                                </ActionForm>
                            </td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }.into_any()
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

#[component]
fn OidcForm(action: ServerAction<CreateOidcIdp>) -> impl IntoView {
    let value = move || action.value().get();
    let added = done(action);
    view! {
        <Card title="Add an OpenID Connect provider">
            <ActionForm action=action>
                <CsrfField/>
                <div class="grid grid-cols-2 gap-3">
                    <Field value=value id="oidc-name" name="name" label="Name (in URLs)" error="name" placeholder="okta" required=true initial={echo::<CreateOidcIdp>("name")}/>
                    <Field value=value id="oidc-display" name="display_name" label="Button label" error="display_name" placeholder="Acme Okta" required=true initial={echo::<CreateOidcIdp>("display_name")}/>
                    <Field value=value id="oidc-issuer" name="issuer" label="Issuer URL" error="oidc.issuer" placeholder="https://acme.okta.com" required=true initial={echo::<CreateOidcIdp>("issuer")}/>
                    <Field value=value id="oidc-client-id" name="client_id" label="Client ID" error="oidc.client_id" required=true initial={echo::<CreateOidcIdp>("client_id")}/>
                    <Field value=value id="oidc-secret" name="client_secret" label="Client secret" error="client_secret" kind="password"/>
                    <Field value=value id="oidc-groups-claim" name="groups_claim" label="Groups claim" error="oidc.groups_claim" placeholder="groups" initial={echo::<CreateOidcIdp>("groups_claim")}/>
                </div>
                <div class="mt-3">
                    <Field value=value id="oidc-required" name="required_groups" label="Only these IdP groups may sign in (comma-separated; empty: anyone)" error="sync.required_groups" initial={echo::<CreateOidcIdp>("required_groups")}/>
                </div>
                <div class="mt-4 flex items-center gap-4">
                    <button type="submit" class=BUTTON>"Add provider"</button>
                    {move || added().then(|| view! { <span role="status" class="text-sm text-emerald-700">"Provider added."</span> })}
                </div>
                <div class="mt-3">{form_error(value)}</div>
            </ActionForm>
        </Card>
    }
}

#[component]
fn SamlForm(action: ServerAction<CreateSamlIdp>) -> impl IntoView {
    let value = move || action.value().get();
    let added = done(action);
    view! {
        <Card title="Add a SAML 2.0 provider">
            <ActionForm action=action>
                <CsrfField/>
                <div class="grid grid-cols-2 gap-3">
                    <Field value=value id="saml-name" name="name" label="Name (in URLs)" error="name" placeholder="adfs" required=true initial={echo::<CreateSamlIdp>("name")}/>
                    <Field value=value id="saml-display" name="display_name" label="Button label" error="display_name" placeholder="Acme ADFS" required=true initial={echo::<CreateSamlIdp>("display_name")}/>
                </div>
                <div class="mt-3">
                    <Field value=value id="saml-metadata-url" name="metadata_url" label="IdP metadata URL" error="saml.idp_metadata_url" placeholder="https://idp.acme.com/saml/metadata" initial={echo::<CreateSamlIdp>("metadata_url")}/>
                </div>
                <div class="mt-3">
                    <label class=LABEL for="saml-metadata-xml">"…or paste the IdP metadata XML"</label>
                    <textarea id="saml-metadata-xml" name="metadata_xml" rows="3" class=format!("{INPUT} font-mono text-xs") placeholder="<EntityDescriptor …>" inner_html={echo_text::<CreateSamlIdp>("metadata_xml")}></textarea>
                    {field_error(value, "saml.idp_metadata_xml")}
                    {field_error(value, "saml.idp_entity_id")}
                    {field_error(value, "saml.idp_sso_url")}
                    {field_error(value, "saml.idp_certificates")}
                </div>
                <div class="mt-3 grid grid-cols-2 gap-3">
                    <Field value=value id="saml-groups-attr" name="groups_attribute" label="Groups attribute" error="saml.groups_attribute" placeholder="groups" initial={echo::<CreateSamlIdp>("groups_attribute")}/>
                    <Field value=value id="saml-required" name="required_groups" label="Only these IdP groups may sign in" error="sync.required_groups" initial={echo::<CreateSamlIdp>("required_groups")}/>
                </div>
                <p class="mt-2 text-xs text-slate-500">"Responses are taken only when signed by a certificate from the metadata. After adding, register the ACS URL and SP entity ID shown in the table at your IdP."</p>
                <div class="mt-4 flex items-center gap-4">
                    <button type="submit" class=BUTTON>"Add SAML provider"</button>
                    {move || added().then(|| view! { <span role="status" class="text-sm text-emerald-700">"Provider added."</span> })}
                </div>
                <div class="mt-3">{form_error(value)}</div>
            </ActionForm>
        </Card>
    }
}

#[component]
fn LdapForm(action: ServerAction<CreateLdapIdp>) -> impl IntoView {
    let value = move || action.value().get();
    let added = done(action);
    view! {
        <Card title="Add an LDAP directory">
            <ActionForm action=action>
                <CsrfField/>
                <div class="grid grid-cols-2 gap-3">
                    <Field value=value id="ldap-name" name="name" label="Name (in URLs)" error="name" placeholder="corp-ad" required=true initial={echo::<CreateLdapIdp>("name")}/>
                    <Field value=value id="ldap-display" name="display_name" label="Form title" error="display_name" placeholder="Corporate directory" required=true initial={echo::<CreateLdapIdp>("display_name")}/>
                    <Field value=value id="ldap-url" name="url" label="URL" error="ldap.url" placeholder="ldaps://ldap.acme.com" required=true initial={echo::<CreateLdapIdp>("url")}/>
                    <Field value=value id="ldap-template" name="user_dn_template" label="User DN template (direct bind)" error="ldap.user_dn_template" placeholder="uid={username},ou=people,dc=acme,dc=com" initial={echo::<CreateLdapIdp>("user_dn_template")}/>
                    <Field value=value id="ldap-base" name="base_dn" label="Base DN (search-then-bind)" error="ldap.base_dn" initial={echo::<CreateLdapIdp>("base_dn")}/>
                    <Field value=value id="ldap-bind-dn" name="bind_dn" label="Service account DN" error="ldap.bind_dn" initial={echo::<CreateLdapIdp>("bind_dn")}/>
                    <Field value=value id="ldap-bind-pw" name="bind_password" label="Service account password" error="client_secret" kind="password"/>
                    <div>
                        <label class=LABEL for="ldap-lookup">"Groups from"</label>
                        <select id="ldap-lookup" name="group_lookup" class=INPUT>
                            <option value="member_of">"the user's memberOf"</option>
                            <option value="search" selected={echo_selected::<CreateLdapIdp>("group_lookup", "search")}>"a group search"</option>
                        </select>
                        {field_error(value, "ldap.group_lookup")}
                    </div>
                    <Field value=value id="ldap-group-base" name="group_base_dn" label="Group base DN (group search)" error="ldap.group_base_dn" initial={echo::<CreateLdapIdp>("group_base_dn")}/>
                </div>
                <label class="mt-3 flex items-center gap-2 text-sm">
                    <input type="checkbox" name="start_tls" value="on" checked={echo_checked::<CreateLdapIdp>("start_tls", false)}/>
                    "StartTLS"
                </label>
                {field_error(value, "ldap.start_tls")}
                <div class="mt-4 flex items-center gap-4">
                    <button type="submit" class=BUTTON>"Add directory"</button>
                    {move || added().then(|| view! { <span role="status" class="text-sm text-emerald-700">"Directory added."</span> })}
                </div>
                <div class="mt-3">{form_error(value)}</div>
            </ActionForm>
        </Card>
    }
}
