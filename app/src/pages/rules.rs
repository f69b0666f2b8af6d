//! A group's access rules: the table (each with Delete, confirmed) and the form that adds one.
//! Rules name projects, models and datasets by id; the catalog gives their names.

use leptos::prelude::*;

use crate::access::{Permission, ResourceKind};
use crate::api::{CreateRuleForm, DeleteRuleForm};
use crate::form::{done, done_for, echo_or, echo_selected, kept};
use crate::model::{AccessRule, Catalog};
use crate::pages::confirm::{confirm_delete, opened};
use crate::time::format_ms;
use crate::ui::*;

const PERMISSIONS: [Permission; 4] = [
    Permission::View,
    Permission::Use,
    Permission::Manage,
    Permission::Admin,
];
const KINDS: [ResourceKind; 6] = [
    ResourceKind::Project,
    ResourceKind::Job,
    ResourceKind::Model,
    ResourceKind::Dataset,
    ResourceKind::Queue,
    ResourceKind::Endpoint,
];

/// What a rule covers, in words: "all models", "project vision and below", "model llama-3".
pub fn scope_text(rule: &AccessRule, catalog: &Catalog) -> String {
    let project = |id: &str| {
        catalog
            .projects
            .iter()
            .find(|p| p.id == id)
            .map_or_else(|| id.to_string(), |p| p.name.clone())
    };
    let kind = rule.resource_kind.as_str();
    match (&rule.resource_id, &rule.project_id) {
        (Some(id), _) => {
            let name = match rule.resource_kind {
                ResourceKind::Project => Some(project(id)),
                ResourceKind::Model => catalog
                    .models
                    .iter()
                    .find(|a| &a.id == id)
                    .map(|a| a.name.clone()),
                ResourceKind::Dataset => catalog
                    .datasets
                    .iter()
                    .find(|a| &a.id == id)
                    .map(|a| a.name.clone()),
                _ => None,
            };
            format!("{kind} {}", name.unwrap_or_else(|| id.clone()))
        }
        (None, Some(p)) => format!("{kind}s in project {} and below", project(p)),
        (None, None) => format!("all {kind}s"),
    }
}

/// The rules card of a group page.
#[component]
pub fn RulesCard(
    group_id: String,
    rules: Vec<AccessRule>,
    catalog: Catalog,
    add: ServerAction<CreateRuleForm>,
    delete: ServerAction<DeleteRuleForm>,
) -> impl IntoView {
    let confirming = opened("confirm", "rule:");
    let add_value = move || add.value().get();
    let delete_value = move || delete.value().get();
    let added = done(add);
    let removed = done(delete);
    // The rule just deleted leaves the table at once, not when the group is read again.
    let gone = done_for(delete, |s| s.id.clone());
    let here = format!("/settings/groups/{group_id}");
    let rows = rules
        .iter()
        .map(|r| (r.clone(), scope_text(r, &catalog)))
        .collect::<Vec<_>>();
    let labels = rows
        .iter()
        .map(|(r, s)| {
            (
                r.id.clone(),
                format!("the rule {} on {s}", r.permission.as_str()),
            )
        })
        .collect::<Vec<_>>();
    view! {
        <Card title="Access rules">
            {move || {
                let rows = kept(&rows, gone(), |(r, _)| r.id.as_str());
                if rows.is_empty() {
                    view! { <p class="text-sm text-slate-600">"No access rules: members use the group's queues only."</p> }.into_any()
                } else {
                    view! {
                        <div class="overflow-x-auto">
                            <table class=TABLE data-testid="rules-table">
                                <thead><tr><th class=TH>"Permission"</th><th class=TH>"On"</th><th class=TH>"Since"</th><th class=TH></th></tr></thead>
                                <tbody class="divide-y divide-slate-100">
                                    {rows.into_iter().map(|(r, scope)| view! {
                                        <tr>
                                            <td class=format!("{TD} font-medium")>{r.permission.as_str()}</td>
                                            <td class=TD>{scope.clone()}</td>
                                            <td class=format!("{TD} whitespace-nowrap text-slate-500")>{format_ms(r.created_at)}</td>
                                            <td class=format!("{TD} text-right")>
                                                <a class=BUTTON_SMALL_DANGER href=format!("?confirm=rule:{}#rules", r.id) aria-label=format!("Delete the rule {} on {scope}", r.permission.as_str())>"Delete"</a>
                                            </td>
                                        </tr>
                                    }).collect_view()}
                                </tbody>
                            </table>
                        </div>
                    }.into_any()
                }
            }}
            <div id="rules">
                {move || confirming().map(|id| match labels.iter().find(|(rid, _)| *rid == id) {
                    Some(_) if gone().as_deref() == Some(id.as_str()) => ().into_any(),
                    Some((_, label)) => confirm_delete!(delete, id.clone(), label.clone(), here.clone(), delete_value),
                    None if removed() => ().into_any(),
                    None => view! { <p class="mt-4 text-sm text-slate-600" role="status">"No such rule: it may have been deleted."</p> }.into_any(),
                })}
                {move || removed().then(|| view! { <p role="status" class="mt-3 text-sm text-emerald-700">"Rule deleted."</p> })}
            </div>
            <h3 class="mb-3 mt-6 text-sm font-semibold text-slate-700">"Add a rule"</h3>
            <ActionForm action=add>
                <CsrfField/>
                <input type="hidden" name="group_id" value=group_id/>
                <div class="grid grid-cols-1 gap-3 sm:grid-cols-3">
                    <div>
                        <label class=LABEL for="rule-permission">"Permission"</label>
                        <select id="rule-permission" name="permission" class=INPUT>
                            {PERMISSIONS.iter().map(|p| view! {
                                <option value=p.as_str() selected={echo_or::<CreateRuleForm>("permission", "use") == p.as_str()}>{p.as_str()}</option>
                            }).collect_view()}
                        </select>
                        {field_error(add_value, "permission")}
                    </div>
                    <div>
                        <label class=LABEL for="rule-kind">"On"</label>
                        <select id="rule-kind" name="resource_kind" class=INPUT>
                            {KINDS.iter().map(|k| view! {
                                <option value=k.as_str() selected={echo_selected::<CreateRuleForm>("resource_kind", k.as_str())}>{format!("{}s", k.as_str())}</option>
                            }).collect_view()}
                        </select>
                        {field_error(add_value, "resource_kind")}
                    </div>
                    <div>
                        <label class=LABEL for="rule-scope">"Which"</label>
                        <select id="rule-scope" name="scope" class=INPUT>
                            <option value="all" selected={echo_selected::<CreateRuleForm>("scope", "all")}>"All of them"</option>
                            <optgroup label="In a project and below">
                                {catalog.projects.iter().map(|p| {
                                    let v = format!("project:{}", p.id);
                                    view! { <option selected={echo_selected::<CreateRuleForm>("scope", &v)} value=v>{format!("in {}", p.name)}</option> }
                                }).collect_view()}
                            </optgroup>
                            <optgroup label="One project">
                                {catalog.projects.iter().map(|p| {
                                    let v = format!("one:{}", p.id);
                                    view! { <option selected={echo_selected::<CreateRuleForm>("scope", &v)} value=v>{format!("project {}", p.name)}</option> }
                                }).collect_view()}
                            </optgroup>
                            <optgroup label="One model">
                                {catalog.models.iter().map(|a| {
                                    let v = format!("one:{}", a.id);
                                    view! { <option selected={echo_selected::<CreateRuleForm>("scope", &v)} value=v>{format!("model {}", a.name)}</option> }
                                }).collect_view()}
                            </optgroup>
                            <optgroup label="One dataset">
                                {catalog.datasets.iter().map(|a| {
                                    let v = format!("one:{}", a.id);
                                    view! { <option selected={echo_selected::<CreateRuleForm>("scope", &v)} value=v>{format!("dataset {}", a.name)}</option> }
                                }).collect_view()}
                            </optgroup>
                        </select>
                        {field_error(add_value, "scope")}
                        {field_error(add_value, "resource_id")}
                        {field_error(add_value, "project_id")}
                    </div>
                </div>
                <div class="mt-4 flex items-center gap-4">
                    <button type="submit" class=BUTTON>"Add rule"</button>
                    {move || added().then(|| view! { <span role="status" class="text-sm text-emerald-700">"Rule added."</span> })}
                </div>
                <div class="mt-3">{form_error(add_value)}</div>
            </ActionForm>
        </Card>
    }
}
