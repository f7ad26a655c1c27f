//! `pcap_dumper_t`: pcap files written through netsift's [`PcapWriter`].
//!
//! In libpcap a dumper is a `FILE *`; here it is an opaque [`Dumper`] around one (see [`Out`]).

use std::io::{self, Write};

use netsift_capture::{LinkType, MAX_PACKET_LEN, PacketRef, PcapWriter, Precision, Timestamp};

use crate::ffi::{PCAP_TSTAMP_PRECISION_NANO, PcapPkthdr};

/// Where a dumper writes: a C stdio stream, as in libpcap.
///
/// NOTE: it has to be a `FILE *`. Programs such as tcpdump never close their dumper when
/// they finish reading a savefile; they rely on `exit` flushing every stdio stream.
pub(crate) struct Out(pub(crate) *mut libc::FILE);

/// The start of glibc's `struct _IO_FILE` (`<bits/types/struct_FILE.h>`, public): the put
/// area that glibc's own `putc_unlocked` macro writes into.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[repr(C)]
struct GlibcFile {
    flags: libc::c_int,
    read_ptr: *mut u8,
    read_end: *mut u8,
    read_base: *mut u8,
    write_base: *mut u8,
    write_ptr: *mut u8,
    write_end: *mut u8,
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
unsafe extern "C" {
    /// glibc (2.32+, `<sys/single_threaded.h>`): nonzero while the process has one thread.
    static __libc_single_threaded: libc::c_char;
    fn flockfile(stream: *mut libc::FILE);
    fn funlockfile(stream: *mut libc::FILE);
}

impl Out {
    /// Puts `head` and `data` into the stream's buffer when both fit in the room left there,
    /// as glibc's `putc_unlocked` puts a byte, under the stream's lock (taken only when the
    /// process has more than one thread, as glibc's `fwrite` does); `false` (nothing written)
    /// otherwise: the buffer is full, or the stream is unbuffered, line-buffered or reading
    /// (glibc leaves no room in its put area then), and the caller writes through `fwrite`.
    ///
    /// PERF: `tcpdump -w` spent more of its time per packet in `fwrite` than in anything else.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn put(&mut self, head: &[u8], data: &[u8]) -> bool {
        let n = head.len() + data.len();
        // SAFETY: the flag is a byte glibc keeps; reading it races with nothing in this
        // thread (only creating a thread clears it).
        let single = unsafe { std::ptr::read_volatile(&raw const __libc_single_threaded) } != 0;
        if !single {
            // SAFETY: `self.0` is the open stream the dumper owns.
            unsafe { flockfile(self.0) };
        }
        let f = self.0.cast::<GlibcFile>();
        // SAFETY: `self.0` is an open glibc stream (the layout above is glibc's public one);
        // its put area, when `write_ptr < write_end`, is writable buffer memory from
        // `write_ptr` to `write_end`; the lock (or the single thread) keeps it ours meanwhile.
        let done = unsafe {
            let (ptr, end) = ((*f).write_ptr, (*f).write_end);
            let room = (end as usize).wrapping_sub(ptr as usize);
            if !ptr.is_null() && ptr <= end && room >= n {
                std::ptr::copy_nonoverlapping(head.as_ptr(), ptr, head.len());
                std::ptr::copy_nonoverlapping(data.as_ptr(), ptr.add(head.len()), data.len());
                (*f).write_ptr = ptr.add(n);
                true
            } else {
                false
            }
        };
        if !single {
            // SAFETY: locked above.
            unsafe { funlockfile(self.0) };
        }
        done
    }

    /// Elsewhere than glibc: never (the caller writes through `fwrite`).
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    fn put(&mut self, _head: &[u8], _data: &[u8]) -> bool {
        false
    }
}

impl Write for Out {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // SAFETY: `self.0` is the open stream the dumper owns.
        let n = unsafe { libc::fwrite(buf.as_ptr().cast(), 1, buf.len(), self.0) };
        if n == 0 && !buf.is_empty() {
            Err(io::Error::last_os_error())
        } else {
            Ok(n)
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        // SAFETY: as above.
        if unsafe { libc::fflush(self.0) } != 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }
}

/// Counts the bytes written (for `pcap_dump_ftell64`).
pub(crate) struct Counting {
    pub(crate) out: Out,
    pub(crate) written: u64,
}

impl Counting {
    /// Writes one record, its header and its bytes: into the stream's buffer directly when
    /// they fit, else as libpcap's `pcap_dump` does, with two `fwrite`s (errors are dropped,
    /// as there).
    fn write_record(&mut self, head: &[u8], data: &[u8]) {
        if self.out.put(head, data) {
            self.written += (head.len() + data.len()) as u64;
        } else {
            let _ = self.write_all(head).and_then(|()| self.write_all(data));
        }
    }
}

impl Write for Counting {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.out.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Opens `name` for `pcap_dump_open_append` as libpcap does: created if missing, its header (if
/// any) checked against the handle's link type, snapshot length and precision; the stream is
/// positioned at the end. The stream, its position (for `pcap_dump_ftell`) and whether a header
/// must be written; or libpcap's message after the file name.
pub(crate) fn open_append(
    name: &[u8],
    linktype: u32,
    snapshot: i32,
    precision: i32,
) -> Result<(Out, u64, bool), String> {
    const MICRO: u32 = 0xa1b2_c3d4;
    const NANO: u32 = 0xa1b2_3c4d;
    const KUZNETZOV: u32 = 0xa1b2_cd34;
    const NAVTEL: u32 = 0xa12b_3c4d;
    const APPEND: &str = "cannot append to file";
    fn errno_text() -> String {
        let e = io::Error::last_os_error().to_string();
        e.split(" (os error").next().unwrap_or("").to_string()
    }
    let cname = std::ffi::CString::new(name).map_err(|_| "invalid file name".to_string())?;
    // SAFETY: a NUL-terminated name.
    let f = unsafe { libc::fopen(cname.as_ptr(), c"ab+".as_ptr()) };
    if f.is_null() {
        return Err(errno_text());
    }
    let fail = |msg: String| {
        // SAFETY: the stream opened above, not handed out.
        unsafe { libc::fclose(f) };
        Err(msg)
    };
    // SAFETY: an open stream.
    if unsafe { libc::fseek(f, 0, libc::SEEK_SET) } == -1 {
        let shown = String::from_utf8_lossy(name).into_owned();
        return fail(format!(
            "Can't seek to the beginning of {shown}: {}",
            errno_text()
        ));
    }
    let mut ph = [0u8; 24];
    // SAFETY: 24 writable bytes.
    let got = unsafe { libc::fread(ph.as_mut_ptr().cast(), 1, 24, f) };
    if got != 24 {
        // SAFETY: an open stream.
        if unsafe { libc::ferror(f) } != 0 {
            return fail(errno_text());
        }
        if got > 0 {
            return fail("truncated pcap file header".to_string());
        }
    }
    let header = got == 0;
    if !header {
        let word = |i: usize| u32::from_ne_bytes([ph[i], ph[i + 1], ph[i + 2], ph[i + 3]]);
        let half = |i: usize| u16::from_ne_bytes([ph[i], ph[i + 1]]);
        match word(0) {
            MICRO | NANO => {
                let nano = word(0) == NANO;
                if nano != (precision == PCAP_TSTAMP_PRECISION_NANO) {
                    return fail(format!("different time stamp precision, {APPEND}"));
                }
            }
            m if m == MICRO.swap_bytes() || m == NANO.swap_bytes() => {
                return fail(format!("different byte order, {APPEND}"));
            }
            m if [KUZNETZOV, NAVTEL]
                .iter()
                .any(|&k| m == k || m == k.swap_bytes()) =>
            {
                return fail("not a pcap file to which we can append".to_string());
            }
            _ => return fail("not a pcap file".to_string()),
        }
        let (major, minor) = (half(4), half(6));
        if (major, minor) != (2, 4) {
            return fail(format!("version is {major}.{minor}, {APPEND}"));
        }
        if word(20) != linktype {
            return fail(format!("different linktype, {APPEND}"));
        }
        if word(16) != snapshot as u32 {
            return fail(format!("different snaplen, {APPEND}"));
        }
    }
    // SAFETY: an open stream.
    if unsafe { libc::fseek(f, 0, libc::SEEK_END) } == -1 {
        let shown = String::from_utf8_lossy(name).into_owned();
        return fail(format!(
            "Can't seek to the end of {shown}: {}",
            errno_text()
        ));
    }
    // SAFETY: as above.
    let base = u64::try_from(unsafe { libc::ftello(f) }).unwrap_or(0);
    Ok((Out(f), base, header))
}

/// The state behind a `pcap_dumper_t *`.
pub struct Dumper {
    pub(crate) writer: PcapWriter<Counting>,
    /// The precision of the headers given to `pcap_dump` (the source handle's).
    pub(crate) precision: i32,
    /// The start position of a stream given to `pcap_dump_fopen` (for ftell).
    pub(crate) base: u64,
}

impl Dumper {
    /// Writes the file header.
    pub(crate) fn new(
        out: Out,
        linktype: u32,
        snaplen: u32,
        precision: i32,
        base: u64,
        header: bool,
    ) -> Result<Dumper, String> {
        let file_precision = if precision == PCAP_TSTAMP_PRECISION_NANO {
            Precision::Nano
        } else {
            Precision::Micro
        };
        let out = Counting { out, written: 0 };
        let writer = if header {
            PcapWriter::new(out, LinkType(linktype), snaplen, file_precision)
                .map_err(|e| e.to_string())?
        } else {
            PcapWriter::append(out, LinkType(linktype), snaplen, file_precision)
        };
        Ok(Dumper {
            writer,
            precision,
            base,
        })
    }

    /// Writes one packet (errors are dropped, as `pcap_dump` has no way to report them).
    pub(crate) fn dump(&mut self, hdr: &PcapPkthdr, data: &[u8]) {
        // PERF: the usual record — seconds within the format's unsigned 32 bits, the fraction
        // within a second in the handle's precision, which is the file's (so it is written as
        // given, as libpcap's pcap_dump does), at most the snapshot length of bytes — is
        // written here directly; anything else goes through the writer, which normalises
        // the timestamp or refuses the record. Through netsiftd this halved tcpdump -w's
        // instructions per packet spent in pcap_dump; putting the record straight into the
        // stdio buffer ([`Counting::write_record`]) then took tcpdump -w from 592 to 433.
        let limit = if self.precision == PCAP_TSTAMP_PRECISION_NANO {
            1_000_000_000
        } else {
            1_000_000
        };
        let snaplen = self.writer.snaplen();
        #[allow(clippy::useless_conversion)] // time_t and suseconds_t are not i64 everywhere
        let (secs, frac) = (i64::from(hdr.ts.tv_sec), i64::from(hdr.ts.tv_usec));
        if let (Ok(secs), true, true) = (
            u32::try_from(secs),
            (0..limit).contains(&frac),
            snaplen != 0 && data.len() <= snaplen as usize && snaplen <= MAX_PACKET_LEN,
        ) {
            let mut head = [0u8; 16];
            head[..4].copy_from_slice(&secs.to_le_bytes());
            head[4..8].copy_from_slice(&(frac as u32).to_le_bytes());
            head[8..12].copy_from_slice(&(data.len() as u32).to_le_bytes());
            head[12..].copy_from_slice(&hdr.len.to_le_bytes());
            self.writer.get_mut().write_record(&head, data);
            return;
        }
        let frac = hdr.ts.tv_usec.max(0) as i128;
        let nanos = if self.precision == PCAP_TSTAMP_PRECISION_NANO {
            frac
        } else {
            frac * 1000
        };
        // PERF: the usual in-range fraction needs no 128-bit division (it was 6% of a
        // capture's time through netsiftd).
        #[allow(clippy::useless_conversion)] // time_t is not i64 everywhere
        let secs = i64::from(hdr.ts.tv_sec);
        let ts = if (0..1_000_000_000).contains(&nanos) {
            Timestamp::new(secs, nanos as u32)
        } else {
            Timestamp::from_nanos(i128::from(hdr.ts.tv_sec) * 1_000_000_000 + nanos)
        };
        let lt = self.writer.link_type();
        let mut p = PacketRef::new(data, ts, lt);
        p.wire_len = hdr.len;
        let _ = self.writer.write_packet(&p);
    }

    /// Flushes buffered packets.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        self.writer.flush().map_err(io::Error::other)
    }

    /// The position in the output file.
    pub(crate) fn position(&self) -> u64 {
        self.base + self.writer.get_ref().written
    }

    /// Flushes and closes the output stream.
    pub(crate) fn close(self) {
        let stream = self.writer.get_ref().out.0;
        // Flushes the writer's own buffer (it has none today) into the stream.
        drop(self.writer.into_inner());
        // SAFETY: the stream belongs to the dumper; closed once.
        unsafe { libc::fclose(stream) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::{PCAP_TSTAMP_PRECISION_MICRO, Timeval};
    use std::io::{Read, Seek};
    use std::os::fd::FromRawFd;

    /// The bytes a dumper writes for `records`, through a temporary stdio stream.
    fn dumped(precision: i32, snaplen: u32, records: &[(PcapPkthdr, Vec<u8>)]) -> Vec<u8> {
        // SAFETY: tmpfile has no preconditions; the stream is closed by `close`.
        let fp = unsafe { libc::tmpfile() };
        assert!(!fp.is_null());
        // SAFETY: `fp` is open; dup gives an independent descriptor to read the file back.
        let fd = unsafe { libc::dup(libc::fileno(fp)) };
        let mut d = Dumper::new(Out(fp), 1, snaplen, precision, 0, true).unwrap();
        for (h, data) in records {
            d.dump(h, data);
        }
        d.close();
        // SAFETY: `fd` is ours.
        let mut f = unsafe { std::fs::File::from_raw_fd(fd) };
        f.rewind().unwrap();
        let mut out = Vec::new();
        f.read_to_end(&mut out).unwrap();
        out
    }

    /// A record goes into the buffer while it fits; not into an unbuffered stream, one with no
    /// buffer yet, or past the buffer's end.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn records_go_into_the_buffer_only_when_they_fit() {
        let head = [7u8; 16];
        // SAFETY: tmpfile/fwrite/setvbuf/fclose on streams opened here.
        unsafe {
            let fp = libc::tmpfile();
            assert!(!fp.is_null());
            let mut out = Out(fp);
            assert!(
                !out.put(&head, &[1; 100]),
                "no buffer before the first write"
            );
            assert_eq!(libc::fwrite(head.as_ptr().cast(), 1, 16, fp), 16);
            assert!(out.put(&head, &[1; 100]));
            assert!(
                !out.put(&head, &vec![1u8; 1 << 20]),
                "longer than the buffer"
            );
            libc::fclose(fp);
            let fp = libc::tmpfile();
            assert_eq!(libc::setvbuf(fp, std::ptr::null_mut(), libc::_IONBF, 0), 0);
            let mut out = Out(fp);
            assert_eq!(libc::fwrite(head.as_ptr().cast(), 1, 16, fp), 16);
            assert!(!out.put(&head, &[1; 10]), "unbuffered");
            libc::fclose(fp);
        }
    }

    /// The direct path writes what the general writer writes, for every record it takes:
    /// records put straight into the stream's buffer (small ones, while they fit) and those
    /// given to `fwrite` (the buffer full, records longer than the buffer) in one file.
    #[test]
    fn direct_records_are_the_writers() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for (precision, unit, file) in [
            (PCAP_TSTAMP_PRECISION_MICRO, 1_000_000u64, Precision::Micro),
            (PCAP_TSTAMP_PRECISION_NANO, 1_000_000_000, Precision::Nano),
        ] {
            for snaplen in [96, 9000] {
                let records: Vec<(PcapPkthdr, Vec<u8>)> = (0..500)
                    .map(|_| {
                        let n = (next() % (snaplen as u64 + 1)) as usize;
                        let data: Vec<u8> = (0..n).map(|_| next() as u8).collect();
                        let h = PcapPkthdr {
                            ts: Timeval {
                                tv_sec: (next() % (1 << 32)) as libc::time_t,
                                tv_usec: (next() % unit) as libc::suseconds_t,
                            },
                            caplen: n as u32,
                            len: n as u32 + (next() % 2000) as u32,
                        };
                        (h, data)
                    })
                    .collect();
                let mut want = PcapWriter::new(Vec::new(), LinkType(1), snaplen, file).unwrap();
                for (h, data) in &records {
                    let frac = h.ts.tv_usec as u64 * (1_000_000_000 / unit);
                    #[allow(clippy::useless_conversion)] // time_t is not i64 everywhere
                    let secs = i64::from(h.ts.tv_sec);
                    let mut p =
                        PacketRef::new(data, Timestamp::new(secs, frac as u32), LinkType(1));
                    p.wire_len = h.len;
                    want.write_packet(&p).unwrap();
                }
                assert_eq!(
                    dumped(precision, snaplen, &records),
                    want.into_inner().unwrap(),
                    "precision {precision}, snaplen {snaplen}"
                );
            }
        }
    }
}
