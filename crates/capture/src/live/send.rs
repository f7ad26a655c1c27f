//! Sending test traffic: whole frames onto an interface through an `AF_PACKET` socket, at a
//! set rate, bounded in count and time.
//!
//! Test traffic uses only the address ranges set aside for it: 198.18.0.0/15 (RFC 2544,
//! benchmarking) and 2001:db8::/32 (RFC 3849, documentation). A sender made with
//! [`Sender::restrict_to_test_ranges`] refuses any frame that carries another address
//! ([`foreign_address`]), so that a generator's mistake never reaches a network.

use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use netsift_wire::flow::{self, Options};
use netsift_wire::{ArpPacket, LinkType};

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

/// Whether `a` lies in the test ranges: 198.18.0.0/15 or 2001:db8::/32.
pub fn is_test_address(a: IpAddr) -> bool {
    match a {
        IpAddr::V4(v) => {
            let o = v.octets();
            o[0] == 198 && o[1] & 0xfe == 18
        }
        IpAddr::V6(v) => v.segments()[..2] == [0x2001, 0x0db8],
    }
}

/// Why a frame may not be sent by a sender restricted to the test ranges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Foreign {
    /// It carries this address, outside 198.18.0.0/15 and 2001:db8::/32.
    Address(IpAddr),
    /// It says it carries IP, ARP or RARP (or is tagged, labelled or encapsulated towards
    /// them) but its headers cannot be read far enough to check the addresses.
    Unreadable,
}

impl std::fmt::Display for Foreign {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Foreign::Address(a) => write!(f, "it carries {a}"),
            Foreign::Unreadable => f.write_str("its addresses cannot be read (a truncated header)"),
        }
    }
}

/// Whether the Ethernet frame `frame` may be sent by a sender restricted to the test ranges
/// ([`is_test_address`]): `Some` names the first address outside them, or says that the frame
/// announces IP, ARP or RARP but is cut before its addresses. Checked: the source and
/// destination of the IP header after any VLAN tags, MPLS labels or PPPoE header (as
/// `netsift-wire`'s flow-key parser walks them) and the protocol addresses of IPv4 ARP and
/// RARP. Not inspected: addresses inside the IP packet (tunnels' inner headers, the packet an
/// ICMP error quotes, IPv4 source routes and IPv6 routing headers). A frame of another protocol
/// carries no address.
pub fn foreign_address(frame: &[u8]) -> Option<Foreign> {
    let check = |a: IpAddr| (!is_test_address(a)).then_some(Foreign::Address(a));
    let Some(net) = flow::network_layer(LinkType::ETHERNET, frame, &Options::SOFTWARE) else {
        // No network layer: a frame too short for an Ethernet type, or one cut inside its VLAN
        // tags, MPLS labels or PPPoE header.
        let tagged = frame.len() >= 14
            && matches!(
                u16::from_be_bytes([frame[12], frame[13]]),
                0x8100 | 0x88a8 | 0x9100 | 0x8847 | 0x8848 | 0x8864
            );
        return tagged.then_some(Foreign::Unreadable);
    };
    match net.ethertype {
        0x0800 | 0x86dd => match flow::parse(LinkType::ETHERNET, frame) {
            Some(f) => check(f.key.src).or_else(|| check(f.key.dst)),
            None => Some(Foreign::Unreadable),
        },
        0x0806 | 0x8035 => {
            let Ok(arp) = ArpPacket::new_checked(frame.get(net.offset..).unwrap_or(&[])) else {
                return Some(Foreign::Unreadable);
            };
            if !arp.is_ethernet_ipv4() {
                // Not IPv4 over Ethernet: no IP addresses.
                return None;
            }
            [arp.source_ipv4_addr(), arp.target_ipv4_addr()]
                .into_iter()
                .flatten()
                .find_map(|a| check(IpAddr::V4(a.0.into())))
        }
        _ => None,
    }
}

/// Sends frames onto one interface (they leave it as if a host behind it had sent them: the
/// peer of a veth pair receives them).
pub struct Sender {
    fd: OwnedFd,
    iface: String,
    stats: SenderStats,
    test_ranges_only: bool,
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
            test_ranges_only: false,
        })
    }

    /// From now on, refuse to send a frame that carries an address outside the test ranges
    /// ([`foreign_address`]): [`Sender::send_all`] fails naming the address, before sending
    /// anything of that call.
    pub fn restrict_to_test_ranges(mut self) -> Sender {
        self.test_ranges_only = true;
        self
    }

    /// The counters so far.
    pub fn stats(&self) -> SenderStats {
        self.stats
    }

    /// Sends `frames` (each a whole link-layer frame) with as few system calls as possible,
    /// waiting while the device queue is full. Returns when all were sent.
    pub fn send_all(&mut self, frames: &[&[u8]]) -> Result<(), LiveError> {
        if self.test_ranges_only
            && let Some((n, why)) = frames
                .iter()
                .enumerate()
                .find_map(|(n, f)| foreign_address(f).map(|w| (n, w)))
        {
            return Err(LiveError::new(
                LiveErrorKind::InvalidInput,
                format!(
                    "refusing to send frame {} on {} (sent so far: {}): {why}, and this sender \
                     sends only the test ranges 198.18.0.0/15 and 2001:db8::/32",
                    n + 1,
                    self.iface,
                    self.stats.sent
                ),
            ));
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{FrameBuilder, mixed_traffic};

    #[test]
    fn test_ranges() {
        for (a, ok) in [
            ("198.18.0.1", true),
            ("198.19.255.255", true),
            ("198.20.0.1", false),
            ("10.0.0.1", false),
            ("2001:db8::1", true),
            ("2001:db9::1", false),
            ("fe80::1", false),
        ] {
            assert_eq!(is_test_address(a.parse().unwrap()), ok, "{a}");
        }
    }

    #[test]
    fn addresses_of_frames() {
        let ok = FrameBuilder::new()
            .vlan(5)
            .ipv4([198, 18, 0, 1], [198, 19, 0, 1])
            .udp(1, 2)
            .build();
        assert_eq!(foreign_address(&ok), None);
        let bad = FrameBuilder::new()
            .vlan(5)
            .vlan(6)
            .ipv4([198, 18, 0, 1], [10, 0, 0, 1])
            .udp(1, 2)
            .build();
        assert_eq!(
            foreign_address(&bad),
            Some(Foreign::Address("10.0.0.1".parse().unwrap()))
        );
        let arp = FrameBuilder::new()
            .arp_request([198, 18, 0, 1], [192, 0, 2, 1])
            .build();
        assert_eq!(
            foreign_address(&arp),
            Some(Foreign::Address("192.0.2.1".parse().unwrap()))
        );
        // Cut before the destination address (a capture's snap length), or inside a tag.
        assert_eq!(foreign_address(&ok[..32]), Some(Foreign::Unreadable));
        assert_eq!(foreign_address(&ok[..15]), Some(Foreign::Unreadable));
        assert_eq!(foreign_address(&arp[..30]), Some(Foreign::Unreadable));
        // Other protocols carry no address; neither does a runt.
        let lldp = FrameBuilder::new()
            .ethertype(0x88cc)
            .payload(&[0; 40])
            .build();
        assert_eq!(foreign_address(&lldp), None);
        assert_eq!(foreign_address(&[0; 10]), None);
        assert!(
            mixed_traffic(9, 5000)
                .iter()
                .all(|p| foreign_address(&p.data).is_none())
        );
    }
}
