//! Local passwords: argon2id (OWASP parameters: 19 MiB, 2 passes), PHC strings at rest.

use argon2::password_hash::{
    rand_core::OsRng, PasswordHash, PasswordHasher, PasswordVerifier, SaltString,
};
use argon2::Argon2;

pub const MIN_LENGTH: usize = 12;

pub fn hash(password: &str) -> anyhow::Result<String> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| anyhow::anyhow!("argon2: {e}"))
}

/// [`hash`] on the blocking pool, for request handlers (argon2 is tens of ms of CPU).
pub async fn hash_off_runtime(password: Option<String>) -> anyhow::Result<Option<String>> {
    match password {
        None => Ok(None),
        Some(pw) => tokio::task::spawn_blocking(move || hash(&pw))
            .await?
            .map(Some),
    }
}

pub fn verify(password: &str, phc: &str) -> bool {
    PasswordHash::new(phc)
        .map(|h| {
            Argon2::default()
                .verify_password(password.as_bytes(), &h)
                .is_ok()
        })
        .unwrap_or(false)
}

/// A hash of nothing in particular, verified when the user does not exist so that a wrong
/// username costs as long as a wrong password (no user enumeration by timing).
pub fn dummy_hash() -> &'static str {
    static DUMMY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DUMMY.get_or_init(|| hash("switchyard-timing-equaliser").unwrap_or_default())
}

#[cfg(test)]
mod tests {
    #[test]
    fn hashes_verify_and_differ() {
        let a = super::hash("correct horse battery").expect("hash");
        let b = super::hash("correct horse battery").expect("hash");
        assert!(a.starts_with("$argon2id$"));
        assert_ne!(a, b, "salted");
        assert!(super::verify("correct horse battery", &a));
        assert!(!super::verify("correct horse batterY", &a));
        assert!(!super::verify("x", "not a phc string"));
    }
}
