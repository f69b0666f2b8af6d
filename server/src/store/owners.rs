//! Which module owns (is the only one to write) each table. A test reads every SQL statement
//! in `server/src` that writes a table and fails on a writer outside the table's owner, so a
//! second writer cannot creep in.

/// (table, the module path under `server/src` that alone writes it).
pub const OWNERS: &[(&str, &str)] = &[
    ("tenants", "tenancy/"),
    ("users", "identity/directory/"),
    ("groups", "identity/directory/"),
    ("memberships", "identity/directory/"),
    ("projects", "identity/directory/"),
    ("sessions", "identity/tokens.rs"),
    ("api_tokens", "identity/tokens.rs"),
    ("identity_providers", "identity/sso/providers.rs"),
    ("external_identities", "identity/sso/link.rs"),
    ("sso_requests", "identity/sso/requests.rs"),
    ("saml_assertions", "identity/sso/saml/"),
    ("scim_tokens", "identity/scim/"),
    ("access_rules", "access/"),
    ("models", "catalog/"),
    ("endpoints", "gateway/"),
    ("endpoint_targets", "gateway/"),
    ("gateways", "gateway/"),
    ("gateway_routes", "gateway/"),
    ("gateway_tcp_routes", "gateway/"),
    ("gateway_tokens", "gateway/"),
    ("datasets", "catalog/"),
    ("pools", "policy/pools.rs"),
    ("profiles", "policy/profiles.rs"),
    ("policies", "policy/policies.rs"),
    ("queues", "policy/queues.rs"),
    ("pool_grants", "policy/grants.rs"),
    ("jobs", "scheduler/"),
    ("job_events", "scheduler/"),
    ("preemptions", "scheduler/"),
    ("scheduling_samples", "scheduler/history/"),
    ("audit_log", "audit/"),
    ("audit_heads", "audit/"),
];

#[cfg(test)]
mod tests {
    use super::OWNERS;
    use std::path::{Path, PathBuf};

    fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                sources(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }

    /// The tables a piece of source text writes, by the statement that writes them.
    fn written(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let upper = text.to_uppercase();
        for verb in ["INSERT INTO ", "UPDATE ", "DELETE FROM "] {
            let mut from = 0;
            while let Some(i) = upper[from..].find(verb) {
                let start = from + i + verb.len();
                let name: String = text[start..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect::<String>()
                    .to_lowercase();
                // Only statements in string literals: the verb follows a quote or a space.
                let before = text[..from + i].chars().last().unwrap_or(' ');
                if !name.is_empty() && (before == '"' || before.is_whitespace()) {
                    out.push(name);
                }
                from = start;
            }
        }
        out
    }

    #[test]
    fn each_table_has_one_writing_module() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        sources(&root, &mut files);
        let mut wrong = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for f in &files {
            let rel = f
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            // Tests set up their own rows; this file names every table.
            if rel.ends_with("tests.rs") || rel.contains("/tests/") || rel == "store/owners.rs" {
                continue;
            }
            let text = std::fs::read_to_string(f).unwrap();
            // Unit-test modules at the end of a file are not writers either.
            let text = text.split("#[cfg(test)]").next().unwrap_or("");
            for table in written(text) {
                let Some((_, owner)) = OWNERS.iter().find(|(t, _)| *t == table) else {
                    continue;
                };
                seen.insert(table.clone());
                if !rel.starts_with(owner) {
                    wrong.push(format!("{rel} writes {table}, owned by {owner}"));
                }
            }
        }
        assert!(
            wrong.is_empty(),
            "tables written outside their owner:\n{}",
            wrong.join("\n")
        );
        // The scan finds the writers it claims to check.
        for t in ["users", "memberships", "jobs", "tenants", "sso_requests"] {
            assert!(
                seen.contains(t),
                "no writer of {t} found: the scan is broken"
            );
        }
    }

    #[test]
    fn the_scan_sees_a_second_writer() {
        let text = r#"sqlx::query("UPDATE users SET x = 1"); sqlx::query("INSERT INTO memberships (a) VALUES (1)")"#;
        let mut found = written(text);
        found.sort();
        assert_eq!(found, ["memberships", "users"]);
    }
}
