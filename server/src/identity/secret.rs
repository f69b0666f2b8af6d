//! Random secrets (API tokens, session ids, CSRF tokens) and their at-rest form.
//!
//! Secrets have 256 bits of entropy, so a plain SHA-256 is the right at-rest hash: it makes a
//! stolen database useless without slowing every request down like a password hash would.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use rand::RngCore;
use sha2::{Digest, Sha256};

/// The prefix that marks a Switchyard API token (so secret scanners can find leaked ones).
pub const TOKEN_PREFIX: &str = "syt_";

pub fn random() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

pub fn new_api_token() -> String {
    format!("{TOKEN_PREFIX}{}", random())
}

pub fn digest(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// [`digest`] written into `out` (no allocation, for lookups on a hot path).
pub fn digest_into<'a>(secret: &str, out: &'a mut [u8; 64]) -> &'a str {
    let _ = hex::encode_to_slice(Sha256::digest(secret.as_bytes()), out);
    std::str::from_utf8(out).unwrap_or_default()
}

pub use app::secret::constant_time_eq;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_without_allocation_is_the_digest() {
        let mut out = [0u8; 64];
        for secret in ["", "syt_abc", "a secret of some length, with spaces"] {
            assert_eq!(digest_into(secret, &mut out), digest(secret));
        }
        assert_eq!(
            digest_into("abc", &mut out),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            "SHA-256 of abc (FIPS 180-2)"
        );
    }

    #[test]
    fn tokens_are_unique_prefixed_and_hash_stably() {
        let a = new_api_token();
        let b = new_api_token();
        assert!(a.starts_with(TOKEN_PREFIX) && a.len() > 40);
        assert_ne!(a, b);
        assert_eq!(digest(&a), digest(&a));
        assert_ne!(digest(&a), digest(&b));
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
