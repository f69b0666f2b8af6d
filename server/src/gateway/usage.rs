//! Token accounting of OpenAI-style responses as they stream past: the `usage` object
//! (`prompt_tokens`, `completion_tokens`) of a JSON completion, or of the server-sent event
//! that carries it (vLLM and SGLang send it in the last chunk when the request asks for
//! `stream_options.include_usage`). The bytes are looked at, never held back.

use std::sync::LazyLock;

use memchr::memmem::Finder;

/// JSON bodies larger than this are not parsed for usage.
const JSON_LIMIT: usize = 1 << 20;
/// An SSE event longer than this is skipped.
const EVENT_LIMIT: usize = 1 << 20;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt: u64,
    pub completion: u64,
}

/// Only the `usage` of a body is read (the rest is skipped, not built into a value).
#[derive(serde::Deserialize)]
struct WithUsage {
    usage: Option<Counts>,
}

#[derive(serde::Deserialize)]
struct Counts {
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

fn parse_usage(bytes: &[u8]) -> Option<Usage> {
    let u = serde_json::from_slice::<WithUsage>(bytes).ok()?.usage?;
    Some(Usage {
        prompt: u.prompt_tokens,
        completion: u.completion_tokens,
    })
}

/// Watches one response body.
pub struct Meter {
    sse: bool,
    buf: Vec<u8>,
    /// Past a limit: nothing more is looked at.
    gave_up: bool,
    found: Option<Usage>,
}

impl Meter {
    /// A meter for a response of this content type, if it can carry usage.
    pub fn for_content_type(content_type: &str) -> Option<Meter> {
        let ct = content_type.as_bytes();
        let sse = ct
            .get(..17)
            .is_some_and(|p| p.eq_ignore_ascii_case(b"text/event-stream"));
        let json = ct.windows(4).any(|w| w.eq_ignore_ascii_case(b"json"));
        (sse || json).then(|| Meter {
            sse,
            buf: Vec::new(),
            gave_up: false,
            found: None,
        })
    }

    /// Looks at the next piece of the body.
    pub fn feed(&mut self, data: &[u8]) {
        if self.gave_up {
            return;
        }
        self.buf.extend_from_slice(data);
        if !self.sse {
            if self.buf.len() > JSON_LIMIT {
                self.give_up();
            }
            return;
        }
        while let Some(end) = EVENT_END.find(&self.buf) {
            let event: Vec<u8> = self.buf.drain(..end + 2).collect();
            self.event(&event);
        }
        if self.buf.len() > EVENT_LIMIT {
            self.give_up();
        }
    }

    fn give_up(&mut self) {
        self.gave_up = true;
        self.buf = Vec::new();
    }

    fn event(&mut self, event: &[u8]) {
        let text = String::from_utf8_lossy(event);
        let data: String = text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim_start)
            .collect::<Vec<_>>()
            .join("\n");
        if data.contains("\"usage\"") {
            if let Some(u) = parse_usage(data.as_bytes()) {
                self.found = Some(u);
            }
        }
    }

    /// The usage the body reported, once it has ended.
    pub fn finish(&mut self) -> Option<Usage> {
        if !self.sse && !self.gave_up && USAGE_KEY.find(&self.buf).is_some() {
            self.found = parse_usage(&self.buf);
        } else if self.sse && !self.gave_up && !self.buf.is_empty() {
            let rest = std::mem::take(&mut self.buf);
            self.event(&rest);
        }
        self.buf = Vec::new();
        self.found.take()
    }
}

/// The searchers for the end of an event and for the `usage` key, each built once
/// (`memmem::find` builds its searcher on every call: work on every metered answer).
static EVENT_END: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\n\n"));
static USAGE_KEY: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"usage\""));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_completion_reports_its_usage_whatever_the_chunking() {
        let body = br#"{"id":"c","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":30,"total_tokens":42}}"#;
        for split in [1, 7, body.len()] {
            let mut m = Meter::for_content_type("application/json").unwrap();
            for piece in body.chunks(split) {
                m.feed(piece);
            }
            assert_eq!(
                m.finish(),
                Some(Usage {
                    prompt: 12,
                    completion: 30
                }),
                "split {split}"
            );
        }
    }

    #[test]
    fn a_stream_reports_the_usage_of_its_last_chunk() {
        let stream = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"usage\":null}\n\n\
                      data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}\n\n\
                      data: [DONE]\n\n";
        let mut m = Meter::for_content_type("text/event-stream; charset=utf-8").unwrap();
        for piece in stream.as_bytes().chunks(9) {
            m.feed(piece);
        }
        assert_eq!(
            m.finish(),
            Some(Usage {
                prompt: 5,
                completion: 2
            })
        );
    }

    #[test]
    fn other_bodies_report_nothing() {
        assert!(Meter::for_content_type("text/plain").is_none());
        let mut m = Meter::for_content_type("application/json").unwrap();
        m.feed(b"{\"no\":\"usage\"}");
        assert_eq!(m.finish(), None);
        let mut m = Meter::for_content_type("application/json").unwrap();
        m.feed(b"not json");
        assert_eq!(m.finish(), None);
    }
}
