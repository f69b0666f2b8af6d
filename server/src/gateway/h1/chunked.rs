//! Finds where a `Transfer-Encoding: chunked` body ends while its bytes pass through as they
//! are (the client gets the instance's chunks unchanged), and hands out each chunk's data to
//! be counted and metered.

/// Where the decoder is in the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Reading a chunk's size (hex digits so far, their count).
    Size {
        size: u64,
        digits: u8,
    },
    /// Past the size: an extension or whitespace, up to the line's end.
    Extension {
        size: u64,
    },
    /// The size line's `\r` was read.
    SizeLf {
        size: u64,
    },
    /// Inside a chunk's data, this many bytes left.
    Data(u64),
    /// The `\r\n` after a chunk's data.
    DataCr,
    DataLf,
    /// After the last (empty) chunk: a trailer line or the final `\r\n`.
    TrailerStart,
    TrailerLine,
    EndLf,
    Done,
}

/// The decoder; feed it the body's bytes in order.
#[derive(Debug)]
pub(super) struct Chunked {
    state: State,
}

/// The body is not valid chunked encoding.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Malformed;

impl Default for Chunked {
    fn default() -> Self {
        Chunked {
            state: State::Size { size: 0, digits: 0 },
        }
    }
}

impl Chunked {
    /// Reads `input`, calling `data` with each piece of chunk data in it. `Ok(Some(n))`: the
    /// body ended after the first `n` bytes of `input`; `Ok(None)`: it goes on.
    pub(super) fn feed(
        &mut self,
        input: &[u8],
        mut data: impl FnMut(&[u8]),
    ) -> Result<Option<usize>, Malformed> {
        let mut i = 0;
        while i < input.len() {
            let b = input[i];
            self.state = match self.state {
                State::Size { size, digits } => match b {
                    b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' => {
                        if digits >= 15 {
                            return Err(Malformed);
                        }
                        let v = (b as char).to_digit(16).unwrap_or(0) as u64;
                        State::Size {
                            size: size * 16 + v,
                            digits: digits + 1,
                        }
                    }
                    _ if digits == 0 => return Err(Malformed),
                    b'\r' => State::SizeLf { size },
                    b';' | b' ' | b'\t' => State::Extension { size },
                    _ => return Err(Malformed),
                },
                State::Extension { size } => match b {
                    b'\r' => State::SizeLf { size },
                    b'\n' => return Err(Malformed),
                    _ => State::Extension { size },
                },
                State::SizeLf { size } => match b {
                    b'\n' if size == 0 => State::TrailerStart,
                    b'\n' => State::Data(size),
                    _ => return Err(Malformed),
                },
                State::Data(left) => {
                    let n = (input.len() - i).min(usize::try_from(left).unwrap_or(usize::MAX));
                    data(&input[i..i + n]);
                    i += n;
                    let left = left - n as u64;
                    self.state = if left == 0 {
                        State::DataCr
                    } else {
                        State::Data(left)
                    };
                    continue;
                }
                State::DataCr => match b {
                    b'\r' => State::DataLf,
                    _ => return Err(Malformed),
                },
                State::DataLf => match b {
                    b'\n' => State::Size { size: 0, digits: 0 },
                    _ => return Err(Malformed),
                },
                State::TrailerStart => match b {
                    b'\r' => State::EndLf,
                    _ => State::TrailerLine,
                },
                State::TrailerLine => match b {
                    b'\n' => State::TrailerStart,
                    _ => State::TrailerLine,
                },
                State::EndLf => match b {
                    b'\n' => State::Done,
                    _ => return Err(Malformed),
                },
                State::Done => return Ok(Some(i)),
            };
            i += 1;
            if self.state == State::Done {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_in_pieces(body: &[u8], piece: usize) -> (Result<Option<usize>, Malformed>, Vec<u8>) {
        let mut c = Chunked::default();
        let mut out = Vec::new();
        let mut at = 0;
        for part in body.chunks(piece) {
            match c.feed(part, |d| out.extend_from_slice(d)) {
                Ok(Some(n)) => return (Ok(Some(at + n)), out),
                Ok(None) => at += part.len(),
                Err(e) => return (Err(e), out),
            }
        }
        (Ok(None), out)
    }

    #[test]
    fn the_end_and_the_data_are_found_however_the_bytes_arrive() {
        let body = b"5\r\nhello\r\n1a;name=value\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nx-trailer: 1\r\n\r\nNEXT";
        let end = body.len() - 4;
        for piece in [1, 2, 3, 7, 64, body.len()] {
            let (r, data) = decode_in_pieces(body, piece);
            assert_eq!(r, Ok(Some(end)), "pieces of {piece}");
            assert_eq!(
                data, b"helloabcdefghijklmnopqrstuvwxyz",
                "pieces of {piece}"
            );
        }
    }

    #[test]
    fn an_unfinished_body_goes_on_and_bad_framing_is_refused() {
        assert_eq!(decode_in_pieces(b"5\r\nhel", 2).0, Ok(None));
        assert_eq!(decode_in_pieces(b"0\r\n\r", 1).0, Ok(None));
        assert_eq!(decode_in_pieces(b"zz\r\n", 1).0, Err(Malformed));
        assert_eq!(decode_in_pieces(b"3\r\nabcX\r\n", 4).0, Err(Malformed));
        assert_eq!(
            decode_in_pieces(b"1000000000000000\r\n", 64).0,
            Err(Malformed),
            "a size past 15 hex digits"
        );
        assert_eq!(decode_in_pieces(b"\r\n", 64).0, Err(Malformed), "no size");
    }
}
