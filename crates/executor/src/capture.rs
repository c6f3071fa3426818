//! Bounded capture of an output stream: keep the first bytes, count the rest.

use crate::Capture;

/// The bytes kept from one stream while it is being read.
#[derive(Debug)]
pub(crate) struct StreamCapture {
    kept: Vec<u8>,
    total: u64,
    cap: usize,
}

impl StreamCapture {
    pub(crate) fn new(cap: u64) -> StreamCapture {
        StreamCapture {
            kept: Vec::new(),
            total: 0,
            cap: usize::try_from(cap).unwrap_or(usize::MAX),
        }
    }

    /// Records a chunk read from the stream; only what fits under the cap is kept.
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        self.total += chunk.len() as u64;
        let room = self.cap.saturating_sub(self.kept.len());
        self.kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
    }

    /// The final capture. A truncated stream that is text up to a character
    /// cut in half by the cap loses that partial character, so the kept bytes
    /// stay valid UTF-8.
    pub(crate) fn finish(mut self) -> Capture {
        let truncated = self.total > self.kept.len() as u64;
        if truncated && let Err(error) = std::str::from_utf8(&self.kept) {
            let incomplete_tail = error.error_len().is_none();
            if incomplete_tail && self.kept.len() - error.valid_up_to() < 4 {
                self.kept.truncate(error.valid_up_to());
            }
        }
        Capture {
            bytes: self.kept,
            total: self.total,
            truncated,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(
        cap: u64,
        chunks: &[&[u8]],
        expect_kept: &[u8],
        expect_total: u64,
        expect_truncated: bool,
    ) {
        let mut capture = StreamCapture::new(cap);
        for chunk in chunks {
            capture.push(chunk);
        }
        let capture = capture.finish();
        assert_eq!(capture.bytes, expect_kept);
        assert_eq!(capture.total, expect_total);
        assert_eq!(capture.truncated, expect_truncated);
    }

    #[test]
    fn keeps_everything_under_the_cap() {
        check(10, &[b"abc", b"def"], b"abcdef", 6, false);
    }

    #[test]
    fn counts_what_it_drops() {
        check(4, &[b"abc", b"def", b"ghi"], b"abcd", 9, true);
    }

    #[test]
    fn cuts_back_to_a_character_boundary() {
        // "é" is two bytes; a cap of 2 after "a" keeps only half of it.
        check(2, &["aé".as_bytes()], b"a", 3, true);
    }

    #[test]
    fn leaves_binary_output_alone() {
        check(2, &[&[0xff, 0xfe, 0xfd]], &[0xff, 0xfe], 3, true);
    }

    #[test]
    fn zero_cap_keeps_nothing() {
        check(0, &[b"abc"], b"", 3, true);
    }
}
