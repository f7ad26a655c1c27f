//! Byte-level input helpers: a buffered reader that counts its position, reads "as much as is
//! there" instead of failing at end of file, and never trusts a length to size an allocation.

use std::io::{self, BufRead, BufReader, Read};

/// The size of the read-ahead buffer.
const READ_BUFFER: usize = 64 * 1024;

/// Buffers are grown in steps of at most this much beyond what was already read, so a length
/// field larger than the file costs at most about twice what the file holds.
const GROW_STEP: usize = 64 * 1024;

/// A buffered input that knows its byte offset.
pub(crate) struct Source<R> {
    inner: BufReader<R>,
    pos: u64,
}

impl<R: Read> Source<R> {
    pub(crate) fn new(reader: R) -> Source<R> {
        Source {
            inner: BufReader::with_capacity(READ_BUFFER, reader),
            pos: 0,
        }
    }
}

impl<R> Source<R> {
    /// The number of bytes consumed so far, i.e. the file offset of the next byte.
    pub(crate) fn pos(&self) -> u64 {
        self.pos
    }

    pub(crate) fn get_ref(&self) -> &R {
        self.inner.get_ref()
    }

    pub(crate) fn into_inner(self) -> R {
        self.inner.into_inner()
    }
}

impl<R: Read> Source<R> {
    /// Fills `buf` as far as the input allows; returns how many bytes were read, which is less
    /// than `buf.len()` only at end of input.
    #[inline]
    pub(crate) fn read_full(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // PERF: the usual case, a record header inside the read-ahead buffer.
        let avail = self.inner.buffer();
        if avail.len() >= buf.len() {
            buf.copy_from_slice(&avail[..buf.len()]);
            self.inner.consume(buf.len());
            self.pos += buf.len() as u64;
            return Ok(buf.len());
        }
        let mut filled = 0;
        while filled < buf.len() {
            match self.inner.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => {
                    filled += n;
                    self.pos += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(filled)
    }

    /// Appends up to `n` bytes to `vec`; returns how many were appended (less than `n` only at
    /// end of input). The vector grows with the data actually read, not with `n`.
    pub(crate) fn append(&mut self, vec: &mut Vec<u8>, n: usize) -> io::Result<usize> {
        // PERF: copied straight from the read-ahead buffer (no zero-filled room first: that
        // memset cost as much as the copy).
        let mut done = 0;
        while done < n {
            let avail = match self.inner.fill_buf() {
                Ok(a) => a,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if avail.is_empty() {
                break;
            }
            // Grown with the data, in steps, whatever `n` says.
            let take = avail.len().min(n - done);
            if vec.capacity() - vec.len() < take {
                vec.reserve(take.max(vec.len().min(GROW_STEP)));
            }
            vec.extend_from_slice(&avail[..take]);
            self.inner.consume(take);
            self.pos += take as u64;
            done += take;
        }
        Ok(done)
    }

    /// Skips up to `n` bytes without storing them; returns how many were skipped (less than `n`
    /// only at end of input).
    pub(crate) fn skip(&mut self, n: u64) -> io::Result<u64> {
        let mut left = n;
        while left > 0 {
            let available = match self.inner.fill_buf() {
                Ok(buf) => buf.len(),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if available == 0 {
                break;
            }
            let take = available.min(usize::try_from(left).unwrap_or(usize::MAX));
            self.inner.consume(take);
            self.pos += take as u64;
            left -= take as u64;
        }
        Ok(n - left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that returns at most 3 bytes per call and sometimes `Interrupted`.
    struct Trickle<'a> {
        data: &'a [u8],
        calls: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.calls += 1;
            if self.calls % 4 == 0 {
                return Err(io::Error::new(io::ErrorKind::Interrupted, "again"));
            }
            let n = buf.len().min(3).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    #[test]
    fn reads_counts_and_skips() {
        let data: Vec<u8> = (0..=255).collect();
        let mut src = Source::new(Trickle {
            data: &data,
            calls: 0,
        });
        let mut four = [0u8; 4];
        assert_eq!(src.read_full(&mut four).unwrap(), 4);
        assert_eq!(four, [0, 1, 2, 3]);
        assert_eq!(src.skip(6).unwrap(), 6);
        assert_eq!(src.pos(), 10);
        let mut v = vec![99];
        assert_eq!(src.append(&mut v, 5).unwrap(), 5);
        assert_eq!(v, [99, 10, 11, 12, 13, 14]);
        assert_eq!(src.skip(1000).unwrap(), 256 - 15);
        assert_eq!(src.pos(), 256);
        assert_eq!(src.read_full(&mut four).unwrap(), 0);
    }

    #[test]
    fn append_does_not_trust_the_length() {
        let data = [7u8; 10];
        let mut src = Source::new(&data[..]);
        let mut v = Vec::new();
        assert_eq!(src.append(&mut v, usize::MAX).unwrap(), 10);
        assert_eq!(v.len(), 10);
        assert!(v.capacity() <= 2 * GROW_STEP);
    }
}
