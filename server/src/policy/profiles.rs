//! Resource profiles: what one job of a queue receives. Owns `profiles`.

use super::*;

const PROFILE_COLUMNS: &str = "id, name, gpu_milli, min_gpu_milli, max_gpu_milli, gpu_memory_mb, cpu_milli, memory_mb, created_at";

fn profile_from_row(r: &AnyRow) -> Result<Profile, sqlx::Error> {
    Ok(Profile {
        id: r.try_get("id")?,
        name: r.try_get("name")?,
        gpu_milli: r.try_get("gpu_milli")?,
        min_gpu_milli: r.try_get("min_gpu_milli")?,
        max_gpu_milli: r.try_get("max_gpu_milli")?,
        gpu_memory_mb: r.try_get("gpu_memory_mb")?,
        cpu_milli: r.try_get("cpu_milli")?,
        memory_mb: r.try_get("memory_mb")?,
        created_at: r.try_get("created_at")?,
    })
}

pub async fn list_profiles(store: &Store, p: &Principal) -> ApiResult<Vec<Profile>> {
    require(p, Action::SubmitJobs)?;
    let rows = sqlx::query(&format!(
        "SELECT {PROFILE_COLUMNS} FROM profiles WHERE tenant_id = $1 ORDER BY name"
    ))
    .bind(p.tenant_id())
    .fetch_all(&store.pool)
    .await?;
    Ok(rows
        .iter()
        .map(profile_from_row)
        .collect::<Result<_, _>>()?)
}

pub async fn get_profile(store: &Store, p: &Principal, id: &str) -> ApiResult<Profile> {
    require(p, Action::SubmitJobs)?;
    let row = sqlx::query(&format!(
        "SELECT {PROFILE_COLUMNS} FROM profiles WHERE tenant_id = $1 AND id = $2"
    ))
    .bind(p.tenant_id())
    .bind(id)
    .fetch_optional(&store.pool)
    .await?
    .ok_or(AppError::NotFound)?;
    Ok(profile_from_row(&row)?)
}

/// The profile's fields, each error at its own field: its name, and the `[min, max]` of a
/// dynamic profile (both the fixed amount for a fixed one).
fn check_profile(input: &CreateProfile) -> Result<(String, i64, i64), AppError> {
    let name = input.name.trim().to_lowercase();
    let fixed = input.gpu_milli;
    let (min, max) = if fixed > 0 {
        (fixed, fixed)
    } else {
        (
            input.min_gpu_milli.unwrap_or(125),
            input.max_gpu_milli.unwrap_or(WHOLE),
        )
    };
    let mut v = Validator::default();
    v.check(
        slug_ok(&name),
        "name",
        "use 1 to 63 lower-case letters, digits, '-', '_' or '.'",
    );
    v.check(
        fixed == 0 || valid_amount(fixed),
        "gpu_milli",
        "use 1 to 999 milli-GPUs (a fraction) or whole GPUs (multiples of 1000, at most 16000)",
    );
    v.check(fixed >= 0, "gpu_milli", "must not be negative");
    if fixed == 0 {
        v.check(
            valid_amount(min),
            "min_gpu_milli",
            "must be a valid amount (1 to 999, or whole GPUs)",
        );
        v.check(
            valid_amount(max),
            "max_gpu_milli",
            "must be a valid amount (1 to 999, or whole GPUs)",
        );
        v.check(
            min <= max,
            "max_gpu_milli",
            "must be at least min_gpu_milli",
        );
    } else {
        // A fixed profile does not use them, but what is sent must still be an amount.
        for (field, value) in [
            ("min_gpu_milli", input.min_gpu_milli),
            ("max_gpu_milli", input.max_gpu_milli),
        ] {
            v.check(
                value.is_none_or(|m| (1..=16_000).contains(&m)),
                field,
                "must be between 1 and 16000",
            );
        }
    }
    v.check(
        (0..=1_048_576).contains(&input.gpu_memory_mb),
        "gpu_memory_mb",
        "must be between 0 and 1048576",
    );
    v.check(
        (0..=1_024_000).contains(&input.cpu_milli),
        "cpu_milli",
        "must be between 0 and 1024000",
    );
    v.check(
        (0..=16_777_216).contains(&input.memory_mb),
        "memory_mb",
        "must be between 0 and 16777216",
    );
    v.finish()?;
    Ok((name, min, max))
}

pub async fn create_profile(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    input: CreateProfile,
) -> ApiResult<Profile> {
    require(p, Action::ManagePolicy)?;
    let (name, min, max) = check_profile(&input)?;
    let fixed = input.gpu_milli;
    let profile = Profile {
        id: new_id(),
        name,
        gpu_milli: fixed,
        min_gpu_milli: min,
        max_gpu_milli: max,
        gpu_memory_mb: input.gpu_memory_mb,
        cpu_milli: input.cpu_milli,
        memory_mb: input.memory_mb,
        created_at: store.now(),
    };
    let mut tx = store.begin_write().await?;
    tx.config_changed();
    sqlx::query("INSERT INTO profiles (id, tenant_id, name, gpu_milli, min_gpu_milli, max_gpu_milli, gpu_memory_mb, cpu_milli, memory_mb, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)")
        .bind(&profile.id)
        .bind(p.tenant_id())
        .bind(&profile.name)
        .bind(profile.gpu_milli)
        .bind(profile.min_gpu_milli)
        .bind(profile.max_gpu_milli)
        .bind(profile.gpu_memory_mb)
        .bind(profile.cpu_milli)
        .bind(profile.memory_mb)
        .bind(profile.created_at)
        .execute(&mut *tx.tx)
        .await
        .map_err(|e| unique_violation_as(e, AppError::field("name", "a profile with this name exists")))?;
    audit::record(
        &mut tx,
        profile.created_at,
        p,
        meta,
        "profile.create",
        "profile",
        &profile.id,
        json!({"name": profile.name, "gpu_milli": fixed, "min_gpu_milli": min, "max_gpu_milli": max}),
    )
    .await?;
    tx.commit().await?;
    Ok(profile)
}

/// Changes a profile. What its queues' jobs already asked for stays; new submits get the new
/// profile.
pub async fn update_profile(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    id: &str,
    input: UpdateProfile,
) -> ApiResult<Profile> {
    require(p, Action::ManagePolicy)?;
    let current = get_profile(store, p, id).await?;
    let fixed = input.gpu_milli.unwrap_or(current.gpu_milli);
    // A fixed profile keeps min = max = its amount; turned dynamic, it starts from those.
    let merged = CreateProfile {
        name: input.name.clone().unwrap_or_else(|| current.name.clone()),
        gpu_milli: fixed,
        min_gpu_milli: input
            .min_gpu_milli
            .or((fixed == 0).then_some(current.min_gpu_milli)),
        max_gpu_milli: input
            .max_gpu_milli
            .or((fixed == 0).then_some(current.max_gpu_milli)),
        gpu_memory_mb: input.gpu_memory_mb.unwrap_or(current.gpu_memory_mb),
        cpu_milli: input.cpu_milli.unwrap_or(current.cpu_milli),
        memory_mb: input.memory_mb.unwrap_or(current.memory_mb),
    };
    let (name, min, max) = check_profile(&merged)?;
    let profile = Profile {
        name,
        gpu_milli: fixed,
        min_gpu_milli: min,
        max_gpu_milli: max,
        gpu_memory_mb: merged.gpu_memory_mb,
        cpu_milli: merged.cpu_milli,
        memory_mb: merged.memory_mb,
        ..current.clone()
    };
    let now = store.now();
    let mut tx = store.begin_write().await?;
    tx.config_changed();
    sqlx::query("UPDATE profiles SET name = $1, gpu_milli = $2, min_gpu_milli = $3, max_gpu_milli = $4, gpu_memory_mb = $5, cpu_milli = $6, memory_mb = $7 WHERE tenant_id = $8 AND id = $9")
        .bind(&profile.name)
        .bind(profile.gpu_milli)
        .bind(profile.min_gpu_milli)
        .bind(profile.max_gpu_milli)
        .bind(profile.gpu_memory_mb)
        .bind(profile.cpu_milli)
        .bind(profile.memory_mb)
        .bind(p.tenant_id())
        .bind(id)
        .execute(&mut *tx.tx)
        .await
        .map_err(|e| unique_violation_as(e, AppError::field("name", "a profile with this name exists")))?;
    let summary = |x: &Profile| json!({"name": x.name, "gpu_milli": x.gpu_milli, "min_gpu_milli": x.min_gpu_milli, "max_gpu_milli": x.max_gpu_milli, "gpu_memory_mb": x.gpu_memory_mb, "cpu_milli": x.cpu_milli, "memory_mb": x.memory_mb});
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "profile.update",
        "profile",
        id,
        json!({"from": summary(&current), "to": summary(&profile)}),
    )
    .await?;
    // No scheduler wake: a profile is read when a job is submitted, not when it is placed.
    tx.commit().await?;
    Ok(profile)
}

/// Deletes a profile no queue gives (409 otherwise).
pub async fn delete_profile(
    store: &Store,
    p: &Principal,
    meta: &RequestMeta,
    id: &str,
) -> ApiResult<()> {
    require(p, Action::ManagePolicy)?;
    let profile = get_profile(store, p, id).await?;
    let now = store.now();
    let mut tx = store.begin_write().await?;
    tx.config_changed();
    if let Some(why) = crate::store::in_use::profile(&mut tx, p.tenant_id(), id).await? {
        return Err(AppError::Conflict(why).into());
    }
    sqlx::query("DELETE FROM profiles WHERE tenant_id = $1 AND id = $2")
        .bind(p.tenant_id())
        .bind(id)
        .execute(&mut *tx.tx)
        .await?;
    audit::record(
        &mut tx,
        now,
        p,
        meta,
        "profile.delete",
        "profile",
        id,
        json!({"name": profile.name}),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}
