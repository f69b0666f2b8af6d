//! The two migration folders are kept by hand, one per dialect. This test reads both and fails
//! on any difference but the listed dialect lines, so they cannot drift apart.

/// (SQLite line, PostgreSQL line): the only lines allowed to differ, trimmed.
const DIALECT_LINES: &[(&str, &str)] = &[
    (
        "id           INTEGER PRIMARY KEY AUTOINCREMENT,",
        "id           BIGSERIAL PRIMARY KEY,",
    ),
    (
        "fit_gpus = COALESCE((SELECT MAX(CAST(json_extract(n.value, '$.gpus') AS INTEGER)) FROM json_each(pools.nodes) n), 0),",
        "fit_gpus = COALESCE((SELECT MAX((n->>'gpus')::BIGINT) FROM jsonb_array_elements(pools.nodes::jsonb) n), 0),",
    ),
    (
        "fit_gpu_memory_mb = COALESCE((SELECT MAX(CAST(json_extract(n.value, '$.gpu_memory_mb') AS INTEGER)) FROM json_each(pools.nodes) n",
        "fit_gpu_memory_mb = COALESCE((SELECT MAX((n->>'gpu_memory_mb')::BIGINT) FROM jsonb_array_elements(pools.nodes::jsonb) n",
    ),
    (
        "WHERE CAST(json_extract(n.value, '$.gpus') AS INTEGER) > 0), 0);",
        "WHERE (n->>'gpus')::BIGINT > 0), 0);",
    ),
];

/// Files that make the same change in each dialect's own words (triggers; tables SQLite must
/// rebuild to change a unique key, a primary key or a foreign key, which PostgreSQL alters in
/// place): both must exist, their lines may differ.
pub const DIALECT_FILES: &[&str] = &[
    "0015_jobs_change_seq.sql",
    "0022_audit_chain_per_writer.sql",
    "0023_job_events_unchecked.sql",
];

/// The differences between two migration files that are not listed dialect lines.
pub fn drift(sqlite: &str, postgres: &str) -> Vec<String> {
    let (a, b): (Vec<&str>, Vec<&str>) = (sqlite.lines().collect(), postgres.lines().collect());
    if a.len() != b.len() {
        return vec![format!(
            "{} lines on SQLite, {} on PostgreSQL",
            a.len(),
            b.len()
        )];
    }
    a.iter()
        .zip(&b)
        .enumerate()
        .filter(|(_, (x, y))| x != y && !DIALECT_LINES.contains(&(x.trim(), y.trim())))
        .map(|(i, (x, y))| format!("line {}: `{}` vs `{}`", i + 1, x.trim(), y.trim()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &str) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn the_two_migration_folders_differ_only_in_dialect_lines() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../migrations");
        let (sqlite, postgres) = (format!("{root}/sqlite"), format!("{root}/postgres"));
        assert_eq!(
            names(&sqlite),
            names(&postgres),
            "the same migrations on both"
        );
        let mut problems = Vec::new();
        for name in names(&sqlite) {
            if DIALECT_FILES.contains(&name.as_str()) {
                continue;
            }
            let a = std::fs::read_to_string(format!("{sqlite}/{name}")).unwrap();
            let b = std::fs::read_to_string(format!("{postgres}/{name}")).unwrap();
            problems.extend(drift(&a, &b).into_iter().map(|d| format!("{name}: {d}")));
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }

    #[test]
    fn a_column_added_on_one_side_only_is_drift() {
        let a = "CREATE TABLE t (\n    id TEXT,\n    n INTEGER\n);";
        let b = "CREATE TABLE t (\n    id TEXT,\n    n BIGINT\n);";
        assert_eq!(drift(a, a), Vec::<String>::new());
        assert_eq!(drift(a, b).len(), 1, "{:?}", drift(a, b));
        assert_eq!(drift(a, "CREATE TABLE t (id TEXT);").len(), 1);
    }
}
