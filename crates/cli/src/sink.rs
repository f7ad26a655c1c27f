//! Writing packets to capture files: pcap or pcapng (chosen by extension or explicitly), to a
//! file or to standard output (`-`), with tcpdump's size (`-C`), time (`-G`) and count (`-W`)
//! rotation.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use anyhow::{Context, Result, bail};
use netsift::capture::{LinkType, PacketRef, PcapWriter, PcapngWriter, Precision};

/// The output file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// pcap (libpcap's classic format).
    Pcap,
    /// pcapng.
    Pcapng,
}

impl Format {
    /// The format `explicit` asks for, else the one the name's extension says (pcapng for
    /// `.pcapng`, pcap otherwise).
    pub fn for_path(name: &str, explicit: Option<Format>) -> Format {
        explicit.unwrap_or_else(|| {
            if Path::new(name)
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("pcapng"))
            {
                Format::Pcapng
            } else {
                Format::Pcap
            }
        })
    }
}

/// Counts the bytes that pass through (the size of the file being written).
struct Counting<W> {
    inner: W,
    n: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let k = self.inner.write(buf)?;
        self.n += k as u64;
        Ok(k)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

type Out = Counting<BufWriter<Box<dyn Write + Send>>>;

enum Inner {
    Pcap(PcapWriter<Out>, LinkType),
    Pcapng(PcapngWriter<Out>),
}

/// One open capture file.
pub struct Writer {
    inner: Inner,
    name: String,
}

impl Writer {
    /// Creates `name` (`-`: standard output) in `format`.
    pub fn create(
        name: &str,
        format: Format,
        link_type: LinkType,
        snaplen: u32,
        precision: Precision,
    ) -> Result<Writer> {
        let out: Box<dyn Write + Send> = if name == "-" {
            Box::new(io::stdout())
        } else {
            Box::new(File::create(name).with_context(|| format!("cannot create {name}"))?)
        };
        let out = Counting {
            inner: BufWriter::with_capacity(1 << 16, out),
            n: 0,
        };
        let inner = match format {
            Format::Pcapng => Inner::Pcapng(PcapngWriter::new(out)?),
            Format::Pcap => Inner::Pcap(
                PcapWriter::new(out, link_type, snaplen, precision)?,
                link_type,
            ),
        };
        Ok(Writer {
            inner,
            name: name.to_owned(),
        })
    }

    /// Appends a packet.
    pub fn write(&mut self, p: &PacketRef<'_>) -> Result<()> {
        match &mut self.inner {
            Inner::Pcap(w, lt) => {
                if p.link_type != *lt {
                    bail!(
                        "cannot write a packet of link type {} into a pcap file of link type {}; \
                         write a .pcapng file instead",
                        p.link_type,
                        lt
                    );
                }
                w.write_packet(p)?;
            }
            Inner::Pcapng(w) => w.write_packet(p)?,
        }
        Ok(())
    }

    /// Bytes written so far (headers included).
    pub fn bytes(&self) -> u64 {
        match &self.inner {
            Inner::Pcap(w, _) => w.get_ref().n,
            Inner::Pcapng(w) => w.get_ref().n,
        }
    }

    /// Flushes and closes the file.
    pub fn finish(self) -> Result<()> {
        let name = self.name;
        let r = match self.inner {
            Inner::Pcap(w, _) => w.into_inner().map(|mut o| o.flush()),
            Inner::Pcapng(w) => w.into_inner().map(|mut o| o.flush()),
        };
        r.with_context(|| format!("cannot finish {name}"))?
            .with_context(|| format!("cannot write {name}"))?;
        Ok(())
    }
}

/// tcpdump's rotation settings.
#[derive(Clone, Copy, Debug, Default)]
pub struct Rotation {
    /// `-C`: start a new file when the current one is larger than this many bytes.
    pub max_bytes: Option<u64>,
    /// `-G`: start a new file every this many seconds (the name is a strftime pattern).
    pub every_secs: Option<u64>,
    /// `-W`: with `-C`, reuse this many files in a ring; with `-G` alone, stop after this many.
    pub files: Option<u32>,
}

/// What [`Rotating::write`] says next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Keep going.
    More,
    /// `-G` with `-W`: the last file is complete; stop capturing.
    Done,
}

/// A sequence of capture files named and rotated as tcpdump's `-w`, `-C`, `-G`, `-W` do.
pub struct Rotating {
    pattern: String,
    format: Option<Format>,
    link_type: LinkType,
    snaplen: u32,
    precision: Precision,
    rot: Rotation,
    cur: Option<Writer>,
    /// `-C` file number (tcpdump's Cflag_count).
    c_count: u32,
    /// When the current `-G` period started (seconds since the epoch).
    g_time: i64,
    /// Files started by `-G`.
    g_count: u32,
    /// Every name opened, in order.
    pub opened: Vec<String>,
}

impl Rotating {
    /// Opens the first file. `now` is the current time in seconds since the epoch.
    pub fn new(
        pattern: &str,
        format: Option<Format>,
        link_type: LinkType,
        snaplen: u32,
        precision: Precision,
        rot: Rotation,
        now: i64,
    ) -> Result<Rotating> {
        if pattern == "-" && (rot.max_bytes.is_some() || rot.every_secs.is_some()) {
            bail!("-C and -G need a file name, not -w -");
        }
        if rot.files.is_some() && rot.max_bytes.is_none() && rot.every_secs.is_none() {
            bail!("-W needs -C or -G");
        }
        let mut r = Rotating {
            pattern: pattern.to_owned(),
            format,
            link_type,
            snaplen,
            precision,
            rot,
            cur: None,
            c_count: 0,
            g_time: now,
            g_count: 0,
            opened: Vec::new(),
        };
        let digits = if r.rot.max_bytes.is_some() {
            r.w_digits()
        } else {
            0
        };
        r.open(0, digits)?;
        Ok(r)
    }

    /// tcpdump's `WflagChars`: the digits needed for the numbers 0 to W-1.
    fn w_digits(&self) -> usize {
        let mut x = self.rot.files.unwrap_or(0).saturating_sub(1);
        let mut c = 0;
        while x > 0 {
            c += 1;
            x /= 10;
        }
        c
    }

    fn name(&self, count: u32, digits: usize) -> String {
        let base = if self.rot.every_secs.is_some() {
            strftime(&self.pattern, self.g_time)
        } else {
            self.pattern.clone()
        };
        if count == 0 && digits == 0 {
            base
        } else {
            format!("{base}{count:0digits$}")
        }
    }

    fn open(&mut self, count: u32, digits: usize) -> Result<()> {
        if let Some(w) = self.cur.take() {
            w.finish()?;
        }
        let name = self.name(count, digits);
        let format = Format::for_path(&name, self.format);
        self.cur = Some(Writer::create(
            &name,
            format,
            self.link_type,
            self.snaplen,
            self.precision,
        )?);
        self.opened.push(name);
        Ok(())
    }

    /// Writes a packet, first starting a new file if a limit was reached. `now` is the
    /// current time in seconds since the epoch.
    pub fn write(&mut self, p: &PacketRef<'_>, now: i64) -> Result<Next> {
        if let Some(g) = self.rot.every_secs
            && now - self.g_time >= g as i64
        {
            self.g_time = now;
            self.g_count += 1;
            if self.rot.max_bytes.is_none() && self.rot.files.is_some_and(|w| self.g_count >= w) {
                return Ok(Next::Done);
            }
            self.c_count = 0;
            self.open(0, 0)?;
        }
        if let (Some(max), Some(cur)) = (self.rot.max_bytes, &self.cur)
            && cur.bytes() > max
        {
            self.c_count += 1;
            if self.rot.files.is_some_and(|w| self.c_count >= w) {
                self.c_count = 0;
            }
            let digits = self.w_digits();
            self.open(self.c_count, digits)?;
        }
        if let Some(w) = self.cur.as_mut() {
            w.write(p)?;
        }
        Ok(Next::More)
    }

    /// Flushes and closes the current file.
    pub fn finish(mut self) -> Result<()> {
        if let Some(w) = self.cur.take() {
            w.finish()?;
        }
        Ok(())
    }
}

/// `strftime(pattern)` for local time `t` (tcpdump's `-G` file names).
fn strftime(pattern: &str, t: i64) -> String {
    let Ok(c) = std::ffi::CString::new(pattern) else {
        return pattern.to_owned();
    };
    // SAFETY: `tm` is plain old data filled by localtime_r from a valid time_t; strftime
    // writes at most `buf.len()` bytes including the NUL and returns how many it wrote.
    unsafe {
        let tt: libc::time_t = t as libc::time_t;
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&tt, &mut tm).is_null() {
            return pattern.to_owned();
        }
        let mut buf = vec![0u8; 4096];
        let n = libc::strftime(buf.as_mut_ptr().cast(), buf.len(), c.as_ptr(), &tm);
        if n == 0 && !pattern.is_empty() {
            return pattern.to_owned();
        }
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netsift::capture::Timestamp;

    fn pkt(data: &[u8]) -> PacketRef<'_> {
        PacketRef::new(data, Timestamp::new(1, 0), LinkType::ETHERNET)
    }

    #[test]
    fn format_follows_the_extension() {
        assert_eq!(Format::for_path("a.pcapng", None), Format::Pcapng);
        assert_eq!(Format::for_path("a.PCAPNG", None), Format::Pcapng);
        assert_eq!(Format::for_path("a.pcap", None), Format::Pcap);
        assert_eq!(Format::for_path("a", Some(Format::Pcapng)), Format::Pcapng);
    }

    #[test]
    fn size_rotation_names_files_like_tcpdump() {
        let dir = std::env::temp_dir().join(format!("nsift-rot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let base = dir.join("cap").to_string_lossy().into_owned();
        let data = vec![0u8; 100];
        // No -W: cap, cap1, cap2, ...
        let rot = Rotation {
            max_bytes: Some(300),
            ..Rotation::default()
        };
        let mut r = Rotating::new(
            &base,
            Some(Format::Pcap),
            LinkType::ETHERNET,
            65535,
            Precision::Micro,
            rot,
            0,
        )
        .unwrap();
        for _ in 0..10 {
            assert_eq!(r.write(&pkt(&data), 0).unwrap(), Next::More);
        }
        let names: Vec<String> = r
            .opened
            .iter()
            .map(|n| n.trim_start_matches(&base).to_owned())
            .collect();
        r.finish().unwrap();
        // 24-byte header + 116 per packet: a file passes 300 bytes after 3 packets.
        assert_eq!(names, ["", "1", "2", "3"]);
        // -W 3: cap0, cap1, cap2, cap0, ...
        let rot = Rotation {
            max_bytes: Some(300),
            files: Some(3),
            ..Rotation::default()
        };
        let mut r = Rotating::new(
            &base,
            Some(Format::Pcap),
            LinkType::ETHERNET,
            65535,
            Precision::Micro,
            rot,
            0,
        )
        .unwrap();
        for _ in 0..13 {
            r.write(&pkt(&data), 0).unwrap();
        }
        let names: Vec<String> = r
            .opened
            .iter()
            .map(|n| n.trim_start_matches(&base).to_owned())
            .collect();
        r.finish().unwrap();
        assert_eq!(names, ["0", "1", "2", "0", "1"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn time_rotation_stops_after_w_files() {
        let dir = std::env::temp_dir().join(format!("nsift-rotg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let base = dir.join("g-%s").to_string_lossy().into_owned();
        let rot = Rotation {
            every_secs: Some(10),
            files: Some(2),
            ..Rotation::default()
        };
        let data = [1u8; 60];
        let mut r = Rotating::new(
            &base,
            None,
            LinkType::ETHERNET,
            65535,
            Precision::Micro,
            rot,
            1000,
        )
        .unwrap();
        assert_eq!(r.write(&pkt(&data), 1005).unwrap(), Next::More);
        assert_eq!(r.write(&pkt(&data), 1010).unwrap(), Next::More);
        assert_eq!(r.write(&pkt(&data), 1020).unwrap(), Next::Done);
        let names = r.opened.clone();
        r.finish().unwrap();
        assert_eq!(names.len(), 2);
        assert!(
            names[0].ends_with("g-1000") && names[1].ends_with("g-1010"),
            "{names:?}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn rotation_flags_are_checked() {
        let rot = Rotation {
            files: Some(2),
            ..Rotation::default()
        };
        let e = Rotating::new(
            "/nonexistent/x",
            None,
            LinkType::ETHERNET,
            1,
            Precision::Micro,
            rot,
            0,
        )
        .err()
        .unwrap();
        assert!(e.to_string().contains("-W needs -C or -G"));
    }
}
