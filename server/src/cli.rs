//! `switchyard serve` and `switchyard admin …`.

use std::io::BufRead;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use serde_json::json;

use app::model::{CreateTenant, RequestMeta};

use crate::audit::{self, Actor, Record};
use crate::config::{Config, ServeArgs, StoreArgs};
use crate::identity::{directory, password};
use crate::store::Store;

#[derive(Parser, Debug)]
#[command(
    name = "switchyard",
    version,
    about = "Switchyard: self-service AI infrastructure control plane"
)]
struct Cli {
    #[command(flatten)]
    store: StoreArgs,
    #[command(subcommand)]
    command: Command,
}

// Parsed once at start-up: the size of the `serve` settings does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Command {
    /// Run the control plane: API, pages, metrics.
    Serve(ServeArgs),
    /// Administer the installation directly on its database.
    #[command(subcommand)]
    Admin(AdminCommand),
}

#[derive(Subcommand, Debug)]
enum AdminCommand {
    /// Create a platform administrator (and its tenant if it does not exist).
    CreateAdmin {
        /// Tenant slug the admin signs in with.
        #[arg(long, default_value = "platform")]
        tenant: String,
        #[arg(long)]
        username: String,
        /// The password; read from SWITCHYARD_ADMIN_PASSWORD or the first line of stdin when omitted.
        #[arg(long, env = "SWITCHYARD_ADMIN_PASSWORD", hide_env_values = true)]
        password: Option<String>,
    },
    /// Set a new password for a local account (ends its sessions, revokes its API tokens).
    ResetPassword {
        #[arg(long)]
        tenant: String,
        #[arg(long)]
        username: String,
        #[arg(long, env = "SWITCHYARD_ADMIN_PASSWORD", hide_env_values = true)]
        password: Option<String>,
    },
    /// Recompute every tenant's audit hash chain; exits 1 if any entry was changed or deleted.
    AuditVerify,
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Serve(serve) => {
            let config = Config::resolve(&cli.store, &serve)?;
            crate::routes::serve::serve(config).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Admin(admin) => {
            let config = Config::resolve(&cli.store, &ServeArgs::default())?;
            let store = Store::connect(&config.database_url).await?;
            admin_command(&store, admin).await
        }
    }
}

fn read_password(given: Option<String>) -> anyhow::Result<String> {
    let pw = match given {
        Some(p) => p,
        None => {
            eprintln!("password (one line on stdin):");
            let mut line = String::new();
            std::io::stdin().lock().read_line(&mut line)?;
            line.trim_end_matches(['\r', '\n']).to_string()
        }
    };
    if pw.chars().count() < password::MIN_LENGTH {
        anyhow::bail!(
            "the password must be at least {} characters",
            password::MIN_LENGTH
        );
    }
    Ok(pw)
}

async fn admin_command(store: &Store, admin: AdminCommand) -> anyhow::Result<ExitCode> {
    let meta = RequestMeta {
        source_ip: "cli".into(),
        request_id: uuid::Uuid::new_v4().to_string(),
    };
    let actor = Actor::system("switchyard-admin");
    match admin {
        AdminCommand::CreateAdmin {
            tenant,
            username,
            password: pw,
        } => {
            let pw = read_password(pw)?;
            let tenant_id = ensure_tenant(store, &actor, &meta, &tenant).await?;
            let hash = password::hash(&pw)?;
            let user = directory::insert_user(
                store,
                &tenant_id,
                &actor,
                &meta,
                &username.to_lowercase(),
                &username,
                None,
                Some(hash),
                true,
                true,
            )
            .await
            .map_err(|e| anyhow::anyhow!("{}", describe(e.0)))?;
            println!(
                "created platform admin {} in tenant {tenant} (id {})",
                user.username, user.id
            );
            Ok(ExitCode::SUCCESS)
        }
        AdminCommand::ResetPassword {
            tenant,
            username,
            password: pw,
        } => {
            let pw = read_password(pw)?;
            let row: Option<(String, String)> = sqlx::query_as(
                "SELECT u.id, u.tenant_id FROM users u JOIN tenants t ON t.id = u.tenant_id WHERE t.slug = $1 AND u.username = $2",
            )
            .bind(tenant.to_lowercase())
            .bind(username.to_lowercase())
            .fetch_optional(&store.pool)
            .await?;
            let Some((user_id, tenant_id)) = row else {
                anyhow::bail!("no user {username} in tenant {tenant}");
            };
            let hash = password::hash(&pw)?;
            let now = store.now();
            let mut tx = store.begin_write().await?;
            directory::set_password_hash(&mut tx, &tenant_id, &user_id, Some(&hash)).await?;
            let revoked = directory::end_access(&mut tx, &tenant_id, &user_id, now, true).await?;
            audit::append(
                &mut tx,
                now,
                Record {
                    tenant_id: &tenant_id,
                    actor: &actor,
                    action: "user.password_reset",
                    target_kind: "user",
                    target_id: &user_id,
                    summary: json!({"username": username, "sessions_ended": true, "api_tokens_revoked": revoked}),
                    meta: &meta,
                },
            )
            .await?;
            tx.commit().await?;
            println!(
                "password of {username} in {tenant} reset; their sessions were ended and {revoked} API token(s) revoked"
            );
            Ok(ExitCode::SUCCESS)
        }
        AdminCommand::AuditVerify => {
            let reports = audit::verify(store).await?;
            let mut bad = 0;
            for r in &reports {
                if r.problems.is_empty() {
                    println!(
                        "ok      tenant {} {} chain: {} entries",
                        r.tenant_id, r.chain, r.entries
                    );
                } else {
                    bad += 1;
                    println!(
                        "BROKEN  tenant {} {} chain: {} entries",
                        r.tenant_id, r.chain, r.entries
                    );
                    for p in &r.problems {
                        println!("        - {p}");
                    }
                }
            }
            println!("{} chains checked, {} broken", reports.len(), bad);
            Ok(if bad == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}

async fn ensure_tenant(
    store: &Store,
    actor: &Actor,
    meta: &RequestMeta,
    slug: &str,
) -> anyhow::Result<String> {
    let existing: Option<String> = sqlx::query_scalar("SELECT id FROM tenants WHERE slug = $1")
        .bind(slug.to_lowercase())
        .fetch_optional(&store.pool)
        .await?;
    if let Some(id) = existing {
        return Ok(id);
    }
    let name = if slug == "platform" {
        "Platform operations".to_string()
    } else {
        slug.to_string()
    };
    let t = crate::tenancy::insert_tenant(
        store,
        actor,
        meta,
        CreateTenant {
            slug: slug.to_string(),
            name,
        },
    )
    .await
    .map_err(|e| anyhow::anyhow!("{}", describe(e.0)))?;
    Ok(t.id)
}

fn describe(e: app::error::AppError) -> String {
    match e {
        app::error::AppError::Validation(list) => list
            .iter()
            .map(|f| format!("{}: {}", f.field, f.message))
            .collect::<Vec<_>>()
            .join("; "),
        other => other.to_string(),
    }
}
