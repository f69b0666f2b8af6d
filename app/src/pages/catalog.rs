//! The catalog: projects as a tree, the models and datasets the user may see (register,
//! browse, delete) and, for tenant admins, which groups may use each.

use leptos::prelude::*;
use leptos_meta::Title;

use crate::access::{ResourceKind, Target};
use crate::api::{
    load_catalog, CreateDatasetForm, CreateModelForm, CreateProjectForm, DeleteAssetForm,
    DeleteProjectForm, UpdateProjectForm,
};
use crate::form::{done, done_for, echo, echo_or, echo_selected, kept};
use crate::model::{AccessRule, Asset, Catalog, Permission, Project};
use crate::pages::confirm::{confirm_delete, opened};
use crate::ui::*;

/// The projects in tree order (each after its parent, siblings by name) with their depth.
/// A project whose parent is missing is a root.
pub fn tree(projects: &[Project]) -> Vec<(usize, Project)> {
    let mut sorted = projects.to_vec();
    sorted.sort_by(|a, b| a.name.cmp(&b.name).then(a.id.cmp(&b.id)));
    let known = |id: &Option<String>| {
        id.as_ref()
            .is_some_and(|id| sorted.iter().any(|p| &p.id == id))
    };
    let mut out = Vec::with_capacity(sorted.len());
    let mut stack: Vec<(usize, Project)> = sorted
        .iter()
        .filter(|p| !known(&p.parent_id))
        .rev()
        .map(|p| (0, p.clone()))
        .collect();
    while let Some((depth, p)) = stack.pop() {
        // The server refuses a move that would make a cycle, but never loop on one.
        if out.iter().any(|(_, q): &(usize, Project)| q.id == p.id) {
            continue;
        }
        stack.extend(
            sorted
                .iter()
                .filter(|c| c.parent_id.as_deref() == Some(p.id.as_str()))
                .rev()
                .map(|c| (depth + 1, c.clone())),
        );
        out.push((depth, p));
    }
    out
}

/// Where project `id` may move: every project in tree order except itself and those inside
/// it (the server refuses those too).
fn move_targets(projects: &[Project], id: &str) -> Vec<(usize, Project)> {
    tree(projects)
        .into_iter()
        .filter(|(_, q)| !ancestors(projects, &q.id).iter().any(|a| a == id))
        .collect()
}

/// The project and every project above it.
fn ancestors(projects: &[Project], id: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut next = Some(id.to_string());
    while let Some(id) = next.take() {
        if out.contains(&id) {
            break;
        }
        next = projects
            .iter()
            .find(|p| p.id == id)
            .and_then(|p| p.parent_id.clone());
        out.push(id);
    }
    out
}

/// The groups whose rules reach `asset` (the access check's own coverage), with the
/// permission: "ml-research (use)".
pub fn who_may_use(rules: &[AccessRule], projects: &[Project], asset: &Asset) -> Vec<String> {
    let above = ancestors(projects, &asset.project_id);
    let target = Target {
        kind: asset.kind,
        id: &asset.id,
        projects: &above,
        owner: None,
    };
    let mut out: Vec<String> = rules
        .iter()
        .filter(|r| r.rule().covers(&target))
        .map(|r| format!("{} ({})", r.group_name, r.permission.as_str()))
        .collect();
    out.sort();
    out.dedup();
    out
}

#[derive(Clone, Copy)]
struct Actions {
    add_project: ServerAction<CreateProjectForm>,
    edit_project: ServerAction<UpdateProjectForm>,
    delete_project: ServerAction<DeleteProjectForm>,
    add_model: ServerAction<CreateModelForm>,
    add_dataset: ServerAction<CreateDatasetForm>,
    delete_asset: ServerAction<DeleteAssetForm>,
}

#[component]
pub fn CatalogPage() -> impl IntoView {
    let a = Actions {
        add_project: ServerAction::new(),
        edit_project: ServerAction::new(),
        delete_project: ServerAction::new(),
        add_model: ServerAction::new(),
        add_dataset: ServerAction::new(),
        delete_asset: ServerAction::new(),
    };
    let data = Resource::new(
        move || {
            a.add_project.version().get()
                + a.edit_project.version().get()
                + a.delete_project.version().get()
                + a.add_model.version().get()
                + a.add_dataset.version().get()
                + a.delete_asset.version().get()
        },
        |_| load_catalog(),
    );
    view! {
        <Title text="Catalog"/>
        <PageHeader title="Catalog" subtitle="Projects, the models and datasets registered in them, and who may use each."/>
        <Transition fallback=|| view! { <p class="text-sm text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Err(e) => view! { <ErrorBanner error=e/> }.into_any(),
                    Ok(c) => view! { <CatalogView c=c a=a/> }.into_any(),
                }
            })}
        </Transition>
    }
}

/// `register_form!(action, ServerFnType, word, projects)`: the form that registers a model or
/// a dataset (`word`) in one of `projects` (tree order), with its result.
macro_rules! register_form {
    ($action:expr, $ty:ty, $word:expr, $projects:expr) => {{
        let (action, word, projects): (ServerAction<$ty>, &'static str, Vec<(usize, Project)>) =
            ($action, $word, $projects);
        let value = move || action.value().get();
        let registered = done(action);
        if projects.is_empty() {
            view! { <p class="text-sm text-slate-600">{format!("A {word} belongs to a project: add a project first.")}</p> }.into_any()
        } else {
            view! {
                <ActionForm action=action>
                    <CsrfField/>
                    <div class="grid grid-cols-1 gap-3 sm:grid-cols-3">
                        <div>
                            <label class=LABEL for=format!("{word}-name")>"Name"</label>
                            <input id=format!("{word}-name") name="name" class=INPUT required value={echo::<$ty>("name")}/>
                            {field_error(value, "name")}
                        </div>
                        <div>
                            <label class=LABEL for=format!("{word}-project")>"Project"</label>
                            <select id=format!("{word}-project") name="project_id" class=INPUT>
                                {projects.iter().map(|(depth, p)| view! {
                                    <option value=p.id.clone() selected={echo_selected::<$ty>("project_id", &p.id)}>{format!("{}{}", "\u{a0}\u{a0}".repeat(*depth), p.name)}</option>
                                }).collect_view()}
                            </select>
                            {field_error(value, "project_id")}
                        </div>
                        <div>
                            <label class=LABEL for=format!("{word}-location")>"Location"</label>
                            <input id=format!("{word}-location") name="location_uri" class=INPUT placeholder="s3://bucket/path, hf://org/name" value={echo::<$ty>("location_uri")}/>
                            {field_error(value, "location_uri")}
                        </div>
                    </div>
                    <div class="mt-4 flex items-center gap-4">
                        <button type="submit" class=BUTTON>{format!("Register {word}")}</button>
                        {move || registered().then(|| view! { <span role="status" class="text-sm text-emerald-700">{format!("The {word} is registered.")}</span> })}
                    </div>
                    <div class="mt-3">{form_error(value)}</div>
                </ActionForm>
            }.into_any()
        }
    }};
}
#[component]
fn CatalogView(c: Catalog, a: Actions) -> impl IntoView {
    let projects = tree(&c.projects);
    let model_form = register_form!(a.add_model, CreateModelForm, "model", projects.clone());
    let dataset_form = register_form!(a.add_dataset, CreateDatasetForm, "dataset", projects);
    view! {
        <div class="grid grid-cols-1 gap-6 xl:grid-cols-3">
            <div class="min-w-0"><ProjectsCard c=c.clone() a=a/></div>
            <div class="flex min-w-0 flex-col gap-6 xl:col-span-2">
                <AssetsCard kind=ResourceKind::Model c=c.clone() a=a>{model_form}</AssetsCard>
                <AssetsCard kind=ResourceKind::Dataset c=c a=a>{dataset_form}</AssetsCard>
            </div>
        </div>
    }
}

#[component]
fn ProjectsCard(c: Catalog, a: Actions) -> impl IntoView {
    let rows = tree(&c.projects);
    let names: Vec<(String, String)> = c
        .projects
        .iter()
        .map(|p| (p.id.clone(), p.name.clone()))
        .collect();
    let open = opened("confirm", "project:");
    let editing = opened("edit", "project:");
    let edited = done(a.edit_project);
    let edit_value = move || a.edit_project.value().get();
    let projects = c.projects.clone();
    let value = move || a.add_project.value().get();
    let delete_value = move || a.delete_project.value().get();
    let added = done(a.add_project);
    let deleted = done(a.delete_project);
    // The project just deleted leaves the tree at once, not when the catalog is read again.
    let gone = done_for(a.delete_project, |s| s.id.clone());
    let admin = c.admin;
    view! {
        <Card title="Projects">
            {let tree = rows.clone(); move || {
                let rows = kept(&tree, gone(), |(_, p)| p.id.as_str());
                if rows.is_empty() {
                    view! { <p class="text-sm text-slate-600">"No projects yet."</p> }.into_any()
                } else {
                    view! {
                        <ul class="divide-y divide-slate-100 text-sm" data-testid="project-tree">
                            {rows.iter().map(|(depth, p)| view! {
                                <li class="flex items-center justify-between gap-3 py-2" style=format!("padding-left: {}rem", *depth as f32 * 1.25)>
                                    <div class="min-w-0">
                                        <span class="font-medium text-slate-900">{(*depth > 0).then_some("└ ")}{p.name.clone()}</span>
                                        <span class="block truncate text-xs text-slate-500">{p.description.clone()}</span>
                                    </div>
                                    {admin.then(|| view! {
                                        <div class="flex shrink-0 gap-1">
                                            <a class="rounded px-2 py-1 text-xs font-medium text-indigo-700 hover:bg-indigo-50" href=format!("?edit=project:{}#projects", p.id) aria-label=format!("Edit project {}", p.name)>"Edit"</a>
                                            <a class=BUTTON_SMALL_DANGER href=format!("?confirm=project:{}#projects", p.id) aria-label=format!("Delete project {}", p.name)>"Delete"</a>
                                        </div>
                                    })}
                                </li>
                            }).collect_view()}
                        </ul>
                    }.into_any()
                }
            }}
            <div id="projects">
                {move || editing().map(|id| match projects.iter().find(|p| p.id == id).cloned() {
                    Some(p) => { let targets = move_targets(&projects, &p.id); view! {
                        <ActionForm action=a.edit_project attr:class="mt-4 rounded-md border border-slate-200 p-3" attr:data-testid="edit-project">
                            <CsrfField/>
                            <input type="hidden" name="id" value=p.id.clone()/>
                            <label class=LABEL for="edit-project-name">"Name"</label>
                            <input id="edit-project-name" name="name" class=INPUT required value={echo_or::<UpdateProjectForm>("name", &p.name)}/>
                            {field_error(edit_value, "name")}
                            <label class=format!("{LABEL} mt-3") for="edit-project-description">"Description"</label>
                            <input id="edit-project-description" name="description" class=INPUT value={echo_or::<UpdateProjectForm>("description", &p.description)}/>
                            {field_error(edit_value, "description")}
                            <label class=format!("{LABEL} mt-3") for="edit-project-parent">"Inside"</label>
                            <select id="edit-project-parent" name="parent_id" class=INPUT>
                                <option value="" selected={echo_or::<UpdateProjectForm>("parent_id", p.parent_id.as_deref().unwrap_or_default()).is_empty()}>"— at the top —"</option>
                                {targets.into_iter().map(|(depth, q)| {
                                    let selected = echo_or::<UpdateProjectForm>("parent_id", p.parent_id.as_deref().unwrap_or_default()) == q.id;
                                    view! {
                                        <option value=q.id.clone() selected=selected>{format!("{}{}", "\u{a0}\u{a0}".repeat(depth), q.name)}</option>
                                    }
                                }).collect_view()}
                            </select>
                            {field_error(edit_value, "parent_id")}
                            <div class="mt-3 flex items-center gap-3">
                                <button type="submit" class=BUTTON>"Save project"</button>
                                <a class="text-sm text-slate-700 hover:underline" href="/catalog">"Close"</a>
                                {move || edited().then(|| view! { <span role="status" class="text-sm text-emerald-700">"Saved."</span> })}
                            </div>
                            <div class="mt-3">{form_error(edit_value)}</div>
                        </ActionForm>
                    }.into_any() }
                    None => view! { <p class="mt-4 text-sm text-slate-600" role="status">"No such project: it may have been deleted."</p> }.into_any(),
                })}
                {move || open().map(|id| match names.iter().find(|(pid, _)| *pid == id) {
                    Some(_) if gone().as_deref() == Some(id.as_str()) => ().into_any(),
                    Some((_, name)) => confirm_delete!(a.delete_project, id.clone(), format!("project {name}"), "/catalog".to_string(), delete_value),
                    None if deleted() => ().into_any(),
                    None => view! { <p class="mt-4 text-sm text-slate-600" role="status">"No such project: it may have been deleted."</p> }.into_any(),
                })}
                {move || deleted().then(|| view! { <p role="status" class="mt-3 text-sm text-emerald-700">"Project deleted."</p> })}
            </div>
            {admin.then(|| view! {
                <h3 class="mb-3 mt-6 text-sm font-semibold text-slate-700">"Add a project"</h3>
                <ActionForm action=a.add_project>
                    <CsrfField/>
                    <label class=LABEL for="project-name">"Name"</label>
                    <input id="project-name" name="name" class=INPUT required value={echo::<CreateProjectForm>("name")}/>
                    {field_error(value, "name")}
                    <label class=format!("{LABEL} mt-3") for="project-description">"Description"</label>
                    <input id="project-description" name="description" class=INPUT value={echo::<CreateProjectForm>("description")}/>
                    {field_error(value, "description")}
                    <label class=format!("{LABEL} mt-3") for="project-parent">"Inside"</label>
                    <select id="project-parent" name="parent_id" class=INPUT>
                        <option value="">"— at the top —"</option>
                        {rows.iter().map(|(depth, p)| view! {
                            <option value=p.id.clone() selected={echo_selected::<CreateProjectForm>("parent_id", &p.id)}>{format!("{}{}", "\u{a0}\u{a0}".repeat(*depth), p.name)}</option>
                        }).collect_view()}
                    </select>
                    {field_error(value, "parent_id")}
                    <div class="mt-4 flex items-center gap-4">
                        <button type="submit" class=BUTTON>"Add project"</button>
                        {move || added().then(|| view! { <span role="status" class="text-sm text-emerald-700">"Project added."</span> })}
                    </div>
                    <div class="mt-3">{form_error(value)}</div>
                </ActionForm>
            })}
        </Card>
    }
}

#[component]
fn AssetsCard(kind: ResourceKind, c: Catalog, a: Actions, children: Children) -> impl IntoView {
    let (title, word) = match kind {
        ResourceKind::Dataset => ("Datasets", "dataset"),
        _ => ("Models", "model"),
    };
    let assets = match kind {
        ResourceKind::Dataset => c.datasets.clone(),
        _ => c.models.clone(),
    };
    let project_name = |id: &str| {
        c.projects
            .iter()
            .find(|p| p.id == id)
            .map_or_else(|| id.to_string(), |p| p.name.clone())
    };
    let rows: Vec<(Asset, String, Vec<String>)> = assets
        .into_iter()
        .map(|x| {
            let who = who_may_use(&c.rules, &c.projects, &x);
            (x.clone(), project_name(&x.project_id), who)
        })
        .collect();
    let names: Vec<(String, String)> = rows
        .iter()
        .map(|(x, _, _)| (x.id.clone(), x.name.clone()))
        .collect();
    let prefix: &'static str = if word == "model" {
        "model:"
    } else {
        "dataset:"
    };
    let open = opened("confirm", prefix);
    let delete_value = move || a.delete_asset.value().get();
    let admin = c.admin;
    view! {
        <Card title=title>
            {if rows.is_empty() {
                view! { <p class="text-sm text-slate-600">{format!("No {word}s you may see.")}</p> }.into_any()
            } else {
                view! {
                    <div class="overflow-x-auto">
                        <table class=TABLE data-testid=format!("{word}s-table")>
                            <thead><tr>
                                <th class=TH>"Name"</th><th class=TH>"Project"</th><th class=TH>"Location"</th>
                                <th class=TH>"You may"</th>
                                {admin.then(|| view! { <th class=TH>"Groups that may use it"</th> })}
                                <th class=TH></th>
                            </tr></thead>
                            <tbody class="divide-y divide-slate-100">
                                {rows.into_iter().map(|(x, project, who)| view! {
                                    <tr>
                                        <td class=format!("{TD} font-medium")>{x.name.clone()}</td>
                                        <td class=TD>{project}</td>
                                        <td class=format!("{TD} font-mono text-xs")>{x.location_uri.clone()}</td>
                                        <td class=TD>{x.permission.as_str()}</td>
                                        {admin.then(|| view! {
                                            <td class=format!("{TD} text-slate-600")>{if who.is_empty() { "tenant admins only".to_string() } else { who.join(", ") }}</td>
                                        })}
                                        <td class=format!("{TD} text-right")>
                                            {(x.permission >= Permission::Manage).then(|| view! {
                                                <a class=BUTTON_SMALL_DANGER href=format!("?confirm={word}:{}#{word}s", x.id) aria-label=format!("Delete {word} {}", x.name)>"Delete"</a>
                                            })}
                                        </td>
                                    </tr>
                                }).collect_view()}
                            </tbody>
                        </table>
                    </div>
                }.into_any()
            }}
            <div id=format!("{word}s")>
                {move || open().map(|id| match names.iter().find(|(aid, _)| *aid == id) {
                    Some((_, name)) => confirm_delete!(a.delete_asset, format!("{word}:{id}"), format!("{word} {name}"), "/catalog".to_string(), delete_value),
                    None => view! { <p class="mt-4 text-sm text-slate-600" role="status">{format!("No such {word}: it may have been deleted.")}</p> }.into_any(),
                })}
            </div>
            <h3 class="mb-3 mt-6 text-sm font-semibold text-slate-700">{format!("Register a {word}")}</h3>
            {children()}
        </Card>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(id: &str, name: &str, parent: Option<&str>) -> Project {
        Project {
            id: id.into(),
            tenant_id: "t".into(),
            name: name.into(),
            description: String::new(),
            parent_id: parent.map(Into::into),
            created_at: 0,
        }
    }

    #[test]
    fn tree_puts_children_under_parents_by_name() {
        let ps = vec![
            project("3", "vision", Some("1")),
            project("1", "research", None),
            project("2", "audio", Some("1")),
            project("4", "prod", None),
            project("5", "detection", Some("3")),
            project("6", "orphan", Some("gone")),
        ];
        let got: Vec<(usize, String)> = tree(&ps).into_iter().map(|(d, p)| (d, p.name)).collect();
        let want: Vec<(usize, String)> = [
            (0, "orphan"),
            (0, "prod"),
            (0, "research"),
            (1, "audio"),
            (1, "vision"),
            (2, "detection"),
        ]
        .into_iter()
        .map(|(d, n)| (d, n.to_string()))
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_project_moves_anywhere_but_inside_itself() {
        let ps = vec![
            project("1", "research", None),
            project("3", "vision", Some("1")),
            project("5", "detection", Some("3")),
            project("4", "prod", None),
        ];
        let names = |id: &str| -> Vec<String> {
            move_targets(&ps, id)
                .into_iter()
                .map(|(_, p)| p.name)
                .collect()
        };
        assert_eq!(names("3"), ["prod", "research"]);
        assert_eq!(names("1"), ["prod"]);
        assert_eq!(names("5"), ["prod", "research", "vision"]);
    }

    #[test]
    fn who_may_use_follows_the_project_tree() {
        let ps = vec![
            project("root", "research", None),
            project("leaf", "vision", Some("root")),
            project("other", "prod", None),
        ];
        let rule = |g: &str,
                    perm: Permission,
                    kind: ResourceKind,
                    rid: Option<&str>,
                    pid: Option<&str>| AccessRule {
            id: format!("{g}-{}", perm.as_str()),
            group_id: g.into(),
            group_name: g.into(),
            permission: perm,
            resource_kind: kind,
            resource_id: rid.map(Into::into),
            project_id: pid.map(Into::into),
            created_at: 0,
        };
        let rules = vec![
            rule(
                "subtree",
                Permission::Use,
                ResourceKind::Model,
                None,
                Some("root"),
            ),
            rule(
                "elsewhere",
                Permission::Use,
                ResourceKind::Model,
                None,
                Some("other"),
            ),
            rule(
                "one",
                Permission::Manage,
                ResourceKind::Model,
                Some("m1"),
                None,
            ),
            rule(
                "datasets",
                Permission::View,
                ResourceKind::Dataset,
                None,
                None,
            ),
            rule("all", Permission::View, ResourceKind::Model, None, None),
        ];
        let asset = Asset {
            id: "m1".into(),
            kind: ResourceKind::Model,
            project_id: "leaf".into(),
            name: "llama".into(),
            location_uri: "hf://x".into(),
            metadata: Default::default(),
            owner_id: None,
            permission: Permission::Admin,
            created_at: 0,
        };
        assert_eq!(
            who_may_use(&rules, &ps, &asset),
            ["all (view)", "one (manage)", "subtree (use)"]
        );
    }
}
