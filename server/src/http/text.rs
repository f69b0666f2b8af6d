//! Free text people type (names, descriptions) and IdPs send: no control characters (NUL,
//! escape sequences, newlines in a name) and no bidirectional-text controls, which make text
//! display in another order than it is stored ("Trojan Source": a name or description that
//! reads one way in a page or the audit log and is another).
//!
//! Refused: Unicode category Cc (U+0000–U+001F, U+007F–U+009F), the explicit bidi embeddings,
//! overrides and isolates (U+202A–U+202E, U+2066–U+2069), and the line and paragraph
//! separators (U+2028, U+2029). The bidi *marks* (U+200E, U+200F, U+061C) are allowed: they
//! cannot reorder letters, and right-to-left names need them.

/// The message for a field that fails [`clean_text`] or [`clean_multiline`].
pub const UNCLEAN: &str = "must not contain control characters or bidirectional-text controls";

fn bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}')
}

/// One line of text: no control characters at all, no bidi controls.
pub fn clean_text(s: &str) -> bool {
    !s.chars().any(|c| c.is_control() || bidi_control(c))
}

/// Text that may span lines (descriptions, commands): tabs and line breaks are allowed,
/// other control characters and bidi controls are not.
pub fn clean_multiline(s: &str) -> bool {
    !s.chars()
        .any(|c| (c.is_control() && !matches!(c, '\n' | '\r' | '\t')) || bidi_control(c))
}

/// Text from elsewhere (an IdP, SCIM) made fit to keep: what [`clean_text`] refuses is dropped,
/// and at most `max` characters are kept.
pub fn scrub(s: &str, max: usize) -> String {
    s.chars()
        .filter(|c| !c.is_control() && !bidi_control(*c))
        .take(max)
        .collect()
}

/// A name used in URLs and as a key (tenant, group and project slugs): lowercase letters,
/// digits, `-`, `_` and `.`, starting with a letter or digit, at most 63 bytes.
pub fn slug_ok(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_' || b == b'.'
        })
        && s.as_bytes()[0].is_ascii_alphanumeric()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_controls_and_bidi_overrides() {
        assert!(clean_text("Ada Lovelace"));
        assert!(clean_text("Zoë 東京 עברית\u{200F}"));
        for bad in [
            "a\0b",
            "a\nb",
            "a\tb",
            "\u{1b}[31mred",
            "a\u{7f}",
            "a\u{85}",
            "admin\u{202E}nimda",
            "x\u{2066}y\u{2069}",
            "a\u{2028}b",
        ] {
            assert!(!clean_text(bad), "{bad:?}");
        }
        assert!(clean_multiline("line one\nline two\r\n\tindented"));
        assert!(!clean_multiline("a\0b"));
        assert!(!clean_multiline("rm -rf /\u{202E}"));
    }

    #[test]
    fn scrub_drops_and_truncates() {
        assert_eq!(scrub("Eve\u{202E}\0 Smith\n", 100), "Eve Smith");
        assert_eq!(scrub("abcdef", 3), "abc");
    }
}
