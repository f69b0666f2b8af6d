//! Pools, profiles, policies and queues: the resource policy a tenant's admins configure.
//! Every query is scoped by the caller's tenant; shared pools (no owner) are visible to all
//! tenants and created by platform admins only.

mod api;
pub mod grants;
mod policies;
mod pools;
mod profiles;
mod queues;

pub use policies::*;
pub use pools::*;
pub use profiles::*;
pub use queues::*;

use serde_json::json;
use sqlx::any::AnyRow;
use sqlx::Row;

use app::access::Action;
use app::model::*;

use crate::audit;
use crate::http::error::{unique_violation_as, ApiResult, AppError, Validator};
use crate::http::require;
use crate::identity::directory::slug_ok;
use crate::store::{flag, new_id, Store};
use app::model::WHOLE_GPU_MILLI as WHOLE;

/// The most nodes one pool may declare (the benchmark's 1,250 x 8 fits).
pub const MAX_NODES: usize = 5000;
pub const MAX_GPUS_PER_NODE: u32 = 16;

/// Whether an amount of milli-GPUs can be requested: a fraction of one GPU, or whole GPUs.
pub fn valid_amount(m: i64) -> bool {
    (1..WHOLE).contains(&m)
        || (m >= WHOLE && m % WHOLE == 0 && m <= MAX_GPUS_PER_NODE as i64 * WHOLE)
}

pub fn default_classes() -> Vec<PriorityClass> {
    vec![
        PriorityClass {
            name: "high".into(),
            priority: 100,
            preemptible: false,
        },
        PriorityClass {
            name: "normal".into(),
            priority: 50,
            preemptible: true,
        },
        PriorityClass {
            name: "low".into(),
            priority: 10,
            preemptible: true,
        },
    ]
}

/// `Ok(None)` for a missing row, so a caller can turn it into a field error while a database
/// failure still answers 500.
fn found<T>(r: ApiResult<T>) -> ApiResult<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(crate::http::error::ApiError(AppError::NotFound)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// A JSON column; a corrupt stored value is an error (logged and answered 500), never a
/// silent default.
fn parse_json<T: serde::de::DeserializeOwned>(s: &str) -> Result<T, sqlx::Error> {
    serde_json::from_str(s).map_err(|e| sqlx::Error::Decode(Box::new(e)))
}
