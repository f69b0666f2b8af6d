//! Comparing secrets (CSRF tokens, token digests) in time that does not depend on where they
//! differ. The one implementation: the server's `identity::secret` uses it too.

/// Whether `a` and `b` are equal, looking at every byte whatever the first difference.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn equal_only_when_every_byte_is() {
        assert!(constant_time_eq(b"csrf-token", b"csrf-token"));
        assert!(!constant_time_eq(b"csrf-token", b"csrf-tokeN"));
        assert!(!constant_time_eq(b"csrf", b"csrf-token"));
        assert!(constant_time_eq(b"", b""));
    }
}
