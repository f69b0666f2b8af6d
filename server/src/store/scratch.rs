//! For unit tests that need PostgreSQL itself (its planner, its triggers): a store in a schema
//! of its own on the test database (SWITCHYARD_TEST_POSTGRES, as the integration suite).

use super::Store;

pub(crate) struct Scratch {
    admin: sqlx::AnyPool,
    schema: String,
    pub(crate) store: Store,
}

impl Scratch {
    /// A new schema named `prefix` and a random suffix, migrated.
    pub(crate) async fn new(prefix: &str) -> Scratch {
        sqlx::any::install_default_drivers();
        let base = std::env::var("SWITCHYARD_TEST_POSTGRES")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
        let admin = sqlx::AnyPool::connect(&base).await.unwrap_or_else(|e| {
            panic!(
                "PostgreSQL is required at {base}: {e}. Start it or set SWITCHYARD_TEST_POSTGRES."
            )
        });
        let schema = format!("{prefix}_{}", uuid::Uuid::new_v4().simple());
        sqlx::query(&format!("CREATE SCHEMA {schema}"))
            .execute(&admin)
            .await
            .unwrap();
        let sep = if base.contains('?') { '&' } else { '?' };
        let store = Store::connect(&format!("{base}{sep}options=-c%20search_path%3D{schema}"))
            .await
            .unwrap();
        Scratch {
            admin,
            schema,
            store,
        }
    }

    /// Closes the store and drops its schema.
    pub(crate) async fn finish(self) {
        self.store.pool.close().await;
        sqlx::query(&format!("DROP SCHEMA {} CASCADE", self.schema))
            .execute(&self.admin)
            .await
            .unwrap();
    }
}
