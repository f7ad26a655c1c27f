//! Sending test traffic: whole frames onto an interface through an `AF_PACKET` socket, at a
//! set rate, bounded in count and time.

use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use super::sys;
use super::{LiveError, LiveErrorKind};

/// Counters of a [`Sender`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SenderStats {
    /// Frames the kernel accepted for transmission.
    pub sent: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Times the device queue was full and the sender waited (`ENOBUFS`/`EAGAIN`).
    pub waits: u64,
}

/// Sends frames onto one interface (they leave it as if a host behind it had sent them: the
/// peer of a veth pair receives them).
pub struct Sender {
    fd: OwnedFd,
    iface: String,
    stats: SenderStats,
}

impl Sender {
    /// Opens a sending socket on `iface`.
    pub fn open(iface: &str) -> Result<Sender, LiveError> {
        let ifindex = sys::if_index(iface)?;
        // Protocol 0: this socket receives nothing.
        let fd = sys::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW,
            0,
            "socket(AF_PACKET) for sending",
        )?;
        // SAFETY: sockaddr_ll is plain old data; zero is valid.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_ifindex = ifindex as i32;
        sys::bind(
            fd.as_raw_fd(),
            &sll,
            &format!("bind to {iface} for sending"),
        )?;
        Ok(Sender {
            fd,
            iface: iface.to_owned(),
            stats: SenderStats::default(),
        })
    }

    /// The counters so far.
    pub fn stats(&self) -> SenderStats {
        self.stats
    }

    /// Sends `frames` (each a whole link-layer frame) with as few system calls as possible,
    /// waiting while the device queue is full. Returns when all were sent.
    pub fn send_all(&mut self, frames: &[&[u8]]) -> Result<(), LiveError> {
        let mut i = 0;
        while i < frames.len() {
            let chunk = &frames[i..frames.len().min(i + 64)];
            let mut iovs: Vec<libc::iovec> = chunk
                .iter()
                .map(|f| libc::iovec {
                    iov_base: f.as_ptr() as *mut libc::c_void,
                    iov_len: f.len(),
                })
                .collect();
            let mut msgs: Vec<libc::mmsghdr> = iovs
                .iter_mut()
                .map(|iov| {
                    // SAFETY: mmsghdr is plain old data; zero is valid.
                    let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
                    m.msg_hdr.msg_iov = iov;
                    m.msg_hdr.msg_iovlen = 1;
                    m
                })
                .collect();
            // SAFETY: `msgs` and the iovecs and frames they point to are alive for the call;
            // the kernel only reads the frames.
            let r = unsafe {
                libc::sendmmsg(
                    self.fd.as_raw_fd(),
                    msgs.as_mut_ptr(),
                    msgs.len() as libc::c_uint,
                    0,
                )
            };
            if r < 0 {
                let e = std::io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::ENOBUFS | libc::EAGAIN | libc::EINTR) => {
                        self.stats.waits += 1;
                        std::thread::sleep(Duration::from_micros(50));
                        continue;
                    }
                    Some(libc::EMSGSIZE) => {
                        return Err(LiveError::new(
                            LiveErrorKind::InvalidInput,
                            format!(
                                "a frame of {} bytes is larger than the MTU of {}",
                                chunk[0].len(),
                                self.iface
                            ),
                        ));
                    }
                    _ => return Err(LiveError::from_io(format!("sending on {}", self.iface), e)),
                }
            }
            let n = r as usize;
            for f in &chunk[..n] {
                self.stats.sent += 1;
                self.stats.bytes += f.len() as u64;
            }
            i += n;
        }
        Ok(())
    }

    /// Sends frames from `frames` in order, at most `rate` per second (`None`: as fast as
    /// possible), stopping after `count` frames or when `max_time` has passed, whichever comes
    /// first. Frames are sent in bursts of up to 64 spaced to keep the average rate.
    pub fn send_paced(
        &mut self,
        frames: &mut dyn Iterator<Item = &[u8]>,
        rate: Option<u64>,
        count: u64,
        max_time: Duration,
    ) -> Result<SenderStats, LiveError> {
        let start = Instant::now();
        let mut sent = 0u64;
        let burst = match rate {
            Some(r) => (r / 1000).clamp(1, 64),
            None => 64,
        };
        let mut batch: Vec<&[u8]> = Vec::with_capacity(burst as usize);
        while sent < count && start.elapsed() < max_time {
            batch.clear();
            while (batch.len() as u64) < burst.min(count - sent) {
                match frames.next() {
                    Some(f) => batch.push(f),
                    None => break,
                }
            }
            if batch.is_empty() {
                break;
            }
            if let Some(r) = rate.filter(|&r| r > 0) {
                // When should the first frame of this burst leave?
                let due = Duration::from_secs_f64(sent as f64 / r as f64);
                let now = start.elapsed();
                if due > now {
                    std::thread::sleep(due - now);
                }
            }
            self.send_all(&batch)?;
            sent += batch.len() as u64;
        }
        Ok(self.stats)
    }
}
