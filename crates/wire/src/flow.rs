//! The flow key of a packet: the one parser every engine and filter class uses.
//!
//! [`parse`] walks a captured frame from its link-layer header to its transport header and
//! returns the [`Flow`]: the 5-tuple ([`FlowKey`]), where the IP and transport headers and the
//! payload start, where the datagram ends, the outermost VLAN ID, the TCP flags and whether the
//! packet is a fragment. The offload emulation, the graph's flow classes, FPL's external
//! functions and Swift's FTP tracker all call it, so that a packet has the same key everywhere.
//!
//! # What is walked
//!
//! - **Link layers**: Ethernet (`LinkType::ETHERNET`), Linux cooked capture v1 and v2, BSD and
//!   OpenBSD loopback (the address family in either byte order: 2 for IPv4, 24, 28 or 30 for
//!   IPv6), raw IP (the version nibble decides) and raw IPv4 / IPv6. Other link types have no
//!   key.
//! - **After Ethernet**: any number of VLAN tags (TPID `0x8100`, `0x88a8` or `0x9100`; the key
//!   keeps the ID of the outermost), an MPLS label stack (IPv4 or IPv6 after the bottom label,
//!   told apart by the version nibble) and a PPPoE session header (PPP protocol `0x0021` or
//!   `0x0057`). [`Options`] bounds the walk: [`Options::NIC`] is what a NIC's parser takes.
//! - **IPv4** with its options (an IPv4 header of 20 bytes is enough for a key; the options
//!   may be cut), **IPv6** with its extension headers (hop-by-hop, routing, fragment,
//!   destination options, AH, mobility, HIP and shim6; each must be captured whole to be
//!   skipped).
//! - **Transport**: TCP, UDP and SCTP ports, when their four bytes were captured.
//!
//! # Fragments
//!
//! The first fragment of a datagram carries the transport header: it is keyed like an
//! unfragmented packet. Later fragments do not: their key has the address pair and the
//! protocol, and no ports (a datagram's later fragments are a flow of their own; nothing is
//! reassembled).
//!
//! # Contract
//!
//! [`parse`] never panics and reads nothing outside `data`. `None` means the packet has no IP
//! header the walk could reach (another protocol, a link type it does not know, bytes cut
//! before the end of the addresses). A transport header that was cut gives a key without ports.
//! For every `Some(flow)`: `flow.network <= flow.transport`, `flow.payload <= flow.end` and
//! `flow.end <= data.len()`.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::ip::IpProtocol;
use crate::linktype::LinkType;
use crate::tcp::TcpFlags;

/// A packet's 5-tuple, in the direction the packet travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    /// The source address.
    pub src: IpAddr,
    /// The destination address (of the same family as `src`).
    pub dst: IpAddr,
    /// The IP protocol: for IPv6, the first header after the extension headers that were
    /// skipped (the header the walk stopped at when the chain was cut or too long).
    pub proto: IpProtocol,
    /// `(source port, destination port)` of TCP, UDP and SCTP; `None` when the packet does not
    /// carry them (another protocol, a later fragment, a transport header cut before its fourth
    /// byte).
    pub ports: Option<(u16, u16)>,
}

impl FlowKey {
    /// The key of the other direction of the flow (addresses and ports swapped).
    pub fn reversed(&self) -> FlowKey {
        FlowKey {
            src: self.dst,
            dst: self.src,
            proto: self.proto,
            ports: self.ports.map(|(s, d)| (d, s)),
        }
    }

    /// A 64-bit hash of the key that is the same for both directions of a flow (the key and
    /// [`FlowKey::reversed`] hash alike): for sharding a capture by flow so that a flow's two
    /// directions stay together. Deterministic (not keyed): the same key hashes the same in
    /// every process.
    pub fn symmetric_hash(&self) -> u64 {
        let a = addr_word(self.src);
        let b = addr_word(self.dst);
        let (pa, pb) = self.ports.unwrap_or((0, 0));
        let (lo, hi) = if (a, pa) <= (b, pb) {
            ((a, pa), (b, pb))
        } else {
            ((b, pb), (a, pa))
        };
        let mut h = 0x243f_6a88_85a3_08d3u64;
        for x in [
            lo.0 as u64,
            (lo.0 >> 64) as u64,
            hi.0 as u64,
            (hi.0 >> 64) as u64,
            u64::from(lo.1) << 32 | u64::from(hi.1) << 16 | u64::from(self.proto.0),
        ] {
            h = (h ^ x).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            h ^= h >> 29;
        }
        h ^= h >> 32;
        h.wrapping_mul(0xbf58_476d_1ce4_e5b9) ^ (h >> 31)
    }
}

/// An address as 128 bits (IPv4 mapped into IPv6, so the families never collide).
fn addr_word(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(v) => u128::from(v.to_ipv6_mapped()),
        IpAddr::V6(v) => u128::from(v),
    }
}

/// Whether a packet is a fragment of a larger datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fragment {
    /// A whole datagram.
    No,
    /// The first fragment (offset 0, more to come): it carries the transport header.
    First,
    /// A later fragment: no transport header.
    Later,
}

/// What [`parse`] found in a packet: the key, and where each layer starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flow {
    /// The 5-tuple.
    pub key: FlowKey,
    /// The VLAN ID of the outermost tag; `None` for an untagged frame.
    pub vlan: Option<u16>,
    /// VLAN tags walked.
    pub vlan_tags: u8,
    /// MPLS labels walked.
    pub mpls_labels: u8,
    /// Whether the packet is a fragment.
    pub fragment: Fragment,
    /// Offset of the IP header.
    pub network: usize,
    /// Offset of the transport header (after IPv4 options and IPv6 extension headers); may lie
    /// beyond the captured bytes when the header before it was cut.
    pub transport: usize,
    /// Offset of the first byte after the transport header (TCP with its options, UDP, SCTP's
    /// common header); `transport` for other protocols and later fragments; `end` when the
    /// transport header is cut.
    pub payload: usize,
    /// Offset of the end of the IP datagram (from its length field, so that Ethernet padding is
    /// not payload), clipped to the captured bytes; never below `payload`.
    pub end: usize,
    /// The TCP flags, when the packet is a TCP segment (not a later fragment) whose flags byte
    /// was captured.
    pub tcp_flags: Option<TcpFlags>,
}

impl Flow {
    /// The payload after the transport header (empty when it was cut), without link-layer
    /// padding. `data` must be the packet `self` was parsed from.
    pub fn payload<'a>(&self, data: &'a [u8]) -> &'a [u8] {
        data.get(self.payload..self.end).unwrap_or(&[])
    }
}

/// How far [`parse_with`] walks: the parsers of real NICs stop earlier than software does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// VLAN tags walked after the Ethernet header; a frame with more has no key (its network
    /// layer is another tag).
    pub max_vlan_tags: usize,
    /// Walk MPLS label stacks.
    pub mpls: bool,
    /// Walk PPPoE session headers.
    pub pppoe: bool,
    /// The IPv6 extension headers skipped on the way to the transport header.
    pub ipv6_skip: &'static [u8],
    /// At most this many IPv6 extension headers are skipped: a packet with that many has the
    /// header after them as its protocol and no ports.
    pub max_ext_headers: usize,
}

impl Options {
    /// Software's walk ([`parse`]): any number of VLAN tags, MPLS, PPPoE, every IPv6 extension
    /// header of RFC 7045's list that has the common length format, up to 16 of them.
    pub const SOFTWARE: Options = Options {
        max_vlan_tags: usize::MAX,
        mpls: true,
        pppoe: true,
        ipv6_skip: &[0, 43, 44, 51, 60, 135, 139, 140],
        max_ext_headers: 16,
    };

    /// What a NIC's parser takes (the emulated NIC of `netsift-offload` and its XDP twin): at
    /// most two VLAN tags (a third makes the frame not IP), no MPLS or PPPoE, the hop-by-hop,
    /// routing, fragment, destination-options and AH headers, at most 8 of them (a chain of 8
    /// or more has no ports).
    pub const NIC: Options = Options {
        max_vlan_tags: 2,
        mpls: false,
        pppoe: false,
        ipv6_skip: &[0, 43, 44, 51, 60],
        max_ext_headers: 8,
    };
}

/// The network layer of a frame, as the link-layer walk found it ([`network_layer`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Network {
    /// What the network layer is (an Ethernet type: `0x0800` IPv4, `0x86dd` IPv6, `0x0806`
    /// ARP, …).
    pub ethertype: u16,
    /// Its offset.
    pub offset: usize,
    /// The VLAN ID of the outermost tag.
    pub vlan: Option<u16>,
    /// VLAN tags walked.
    pub vlan_tags: u8,
    /// MPLS labels walked.
    pub mpls_labels: u8,
}

/// The Ethernet types of VLAN tags the walk takes: 802.1Q, 802.1ad and the older QinQ
/// `0x9100`.
pub const VLAN_TPIDS: [u16; 3] = [0x8100, 0x88a8, 0x9100];

const ETH_IPV4: u16 = 0x0800;
const ETH_IPV6: u16 = 0x86dd;
const ETH_MPLS_UC: u16 = 0x8847;
const ETH_MPLS_MC: u16 = 0x8848;
const ETH_PPPOE_SESSION: u16 = 0x8864;
const VID_MASK: u16 = 0x0fff;

#[inline]
fn be16(d: &[u8], at: usize) -> Option<u16> {
    let b = d.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([b[0], b[1]]))
}

/// The flow of a packet of `link` with software's walk ([`Options::SOFTWARE`]); `None` when
/// it has no IP header the walk reaches. Never panics.
#[inline]
pub fn parse(link: LinkType, data: &[u8]) -> Option<Flow> {
    parse_with(link, data, &Options::SOFTWARE)
}

/// The flow of a packet of `link`, walked as `opts` allows. Never panics.
///
/// Per-packet code: the Ethernet and IPv4 walk is always inlined, so that a caller using part
/// of the [`Flow`] (the NIC emulation takes the key) keeps it in registers instead of storing
/// and reloading the whole struct (`netsift bench offload`, NIC emu column: 21 ns per frame
/// when it was a call, 15 ns inlined); the IPv6 walk stays out of line.
#[inline(always)]
pub fn parse_with(link: LinkType, data: &[u8], opts: &Options) -> Option<Flow> {
    let net = network_layer(link, data, opts)?;
    let mut flow = match net.ethertype {
        ETH_IPV4 => ipv4(data, net.offset)?,
        ETH_IPV6 => ipv6(data, net.offset, opts)?,
        _ => return None,
    };
    flow.vlan = net.vlan;
    flow.vlan_tags = net.vlan_tags;
    flow.mpls_labels = net.mpls_labels;
    Some(flow)
}

/// Walks the link layer of a packet of `link` (and, after Ethernet, the VLAN tags, MPLS labels
/// and PPPoE header `opts` allows) to its network layer. `None` for a link type the walk does
/// not know or a frame cut inside its link-layer headers. Never panics.
#[inline(always)]
pub fn network_layer(link: LinkType, data: &[u8], opts: &Options) -> Option<Network> {
    let mut net = Network {
        ethertype: 0,
        offset: 0,
        vlan: None,
        vlan_tags: 0,
        mpls_labels: 0,
    };
    (net.ethertype, net.offset) = match link {
        LinkType::ETHERNET => return ethernet(data, opts),
        LinkType::LINUX_SLL => (be16(data, 14)?, 16),
        LinkType::LINUX_SLL2 => (be16(data, 0)?, 20),
        LinkType::NULL | LinkType::LOOP => {
            // The address family, in the host order of the capturing machine (LOOP: network
            // order): AF_INET is 2 everywhere, AF_INET6 24, 28 or 30 depending on the BSD.
            let b = data.get(..4)?;
            let family = if b[0] == 0 && b[1] == 0 { b[3] } else { b[0] };
            match family {
                2 => (ETH_IPV4, 4),
                24 | 28 | 30 => (ETH_IPV6, 4),
                _ => return None,
            }
        }
        LinkType::RAW => (by_version(*data.first()?)?, 0),
        LinkType::IPV4 => (ETH_IPV4, 0),
        LinkType::IPV6 => (ETH_IPV6, 0),
        _ => return None,
    };
    Some(net)
}

/// The network layer told by an IP version nibble.
#[inline]
fn by_version(first: u8) -> Option<u16> {
    match first >> 4 {
        4 => Some(ETH_IPV4),
        6 => Some(ETH_IPV6),
        _ => None,
    }
}

#[inline(always)]
fn ethernet(data: &[u8], opts: &Options) -> Option<Network> {
    let mut ethertype = be16(data, 12)?;
    let mut at = 14usize;
    let mut vlan = None;
    let mut tags = 0usize;
    while tags < opts.max_vlan_tags && VLAN_TPIDS.contains(&ethertype) {
        let tci = be16(data, at)?;
        if vlan.is_none() {
            vlan = Some(tci & VID_MASK);
        }
        ethertype = be16(data, at + 2)?;
        at += 4;
        tags += 1;
    }
    let mut labels = 0usize;
    if opts.mpls && matches!(ethertype, ETH_MPLS_UC | ETH_MPLS_MC) {
        // Labels until the bottom of the stack, then IPv4 or IPv6 by the version nibble.
        loop {
            let entry = data.get(at..at + 4)?;
            at += 4;
            labels += 1;
            if entry[2] & 1 != 0 {
                break;
            }
        }
        ethertype = by_version(*data.get(at)?)?;
    } else if opts.pppoe && ethertype == ETH_PPPOE_SESSION {
        // Version/type, code, session ID, length; then the PPP protocol.
        ethertype = match be16(data, at + 6)? {
            0x0021 => ETH_IPV4,
            0x0057 => ETH_IPV6,
            _ => return None,
        };
        at += 8;
    }
    Some(Network {
        ethertype,
        offset: at,
        vlan,
        vlan_tags: u8::try_from(tags).unwrap_or(u8::MAX),
        mpls_labels: u8::try_from(labels).unwrap_or(u8::MAX),
    })
}

/// Whether packets of IP protocol `proto` carry the ports a key holds.
#[inline]
pub fn has_ports(proto: IpProtocol) -> bool {
    matches!(proto.0, 6 | 17 | 132)
}

#[inline(always)]
fn ipv4(d: &[u8], off: usize) -> Option<Flow> {
    let h: &[u8; 20] = d.get(off..off.checked_add(20)?)?.try_into().ok()?;
    if h[0] >> 4 != 4 {
        return None;
    }
    let ihl = usize::from(h[0] & 0x0f) * 4;
    if ihl < 20 {
        return None;
    }
    let flags_offset = u16::from_be_bytes([h[6], h[7]]);
    let fragment = match (flags_offset & 0x1fff != 0, flags_offset & 0x2000 != 0) {
        (true, _) => Fragment::Later,
        (false, true) => Fragment::First,
        (false, false) => Fragment::No,
    };
    let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
    let end = if total >= ihl { off + total } else { d.len() };
    let key = FlowKey {
        src: IpAddr::V4(Ipv4Addr::new(h[12], h[13], h[14], h[15])),
        dst: IpAddr::V4(Ipv4Addr::new(h[16], h[17], h[18], h[19])),
        proto: IpProtocol(h[9]),
        ports: None,
    };
    Some(transport(d, off, off + ihl, key, fragment, end))
}

#[inline(never)]
fn ipv6(d: &[u8], off: usize, opts: &Options) -> Option<Flow> {
    let h: &[u8; 40] = d.get(off..off.checked_add(40)?)?.try_into().ok()?;
    if h[0] >> 4 != 6 {
        return None;
    }
    let mut src = [0u8; 16];
    src.copy_from_slice(&h[8..24]);
    let mut dst = [0u8; 16];
    dst.copy_from_slice(&h[24..40]);
    let plen = usize::from(u16::from_be_bytes([h[4], h[5]]));
    // Payload length 0: a jumbogram (or a broken header); take what was captured.
    let end = if plen == 0 { d.len() } else { off + 40 + plen };
    let mut key = FlowKey {
        src: IpAddr::V6(Ipv6Addr::from(src)),
        dst: IpAddr::V6(Ipv6Addr::from(dst)),
        proto: IpProtocol(h[6]),
        ports: None,
    };
    let mut at = off + 40;
    let mut fragment = Fragment::No;
    let mut skipped = 0;
    loop {
        if skipped == opts.max_ext_headers {
            // Too long a chain: the key stops at the header after the last one skipped.
            return Some(stopped(d, off, at, key, fragment, end));
        }
        let next = key.proto.0;
        if !opts.ipv6_skip.contains(&next) {
            break;
        }
        let len = if next == 44 {
            // Fragment header: a later fragment stops here with the next header as the
            // protocol (4 bytes suffice to tell); the first fragment goes on.
            let (Some(&nh), Some(frag)) = (d.get(at), be16(d, at + 2)) else {
                return Some(stopped(d, off, at, key, fragment, end));
            };
            if frag & 0xfff8 != 0 {
                key.proto = IpProtocol(nh);
                return Some(stopped(d, off, at + 8, key, Fragment::Later, end));
            }
            if frag & 1 != 0 {
                fragment = Fragment::First;
            }
            8
        } else {
            let Some(&l) = d.get(at + 1) else {
                return Some(stopped(d, off, at, key, fragment, end));
            };
            if next == 51 {
                (usize::from(l) + 2) * 4
            } else {
                (usize::from(l) + 1) * 8
            }
        };
        // The header must be captured whole to be skipped.
        if at + len > d.len() {
            return Some(stopped(d, off, at, key, fragment, end));
        }
        key.proto = IpProtocol(d[at]);
        at += len;
        skipped += 1;
    }
    Some(transport(d, off, at, key, fragment, end))
}

/// A flow whose walk stopped before the transport header: no ports, no payload.
#[inline(always)]
fn stopped(
    d: &[u8],
    network: usize,
    at: usize,
    key: FlowKey,
    fragment: Fragment,
    end: usize,
) -> Flow {
    let end = end.min(d.len());
    Flow {
        key,
        vlan: None,
        vlan_tags: 0,
        mpls_labels: 0,
        fragment,
        network,
        transport: at,
        payload: at.min(end),
        end,
        tcp_flags: None,
    }
}

#[inline(always)]
fn transport(
    d: &[u8],
    network: usize,
    at: usize,
    mut key: FlowKey,
    fragment: Fragment,
    end: usize,
) -> Flow {
    let end = end.min(d.len());
    let mut flow = stopped(d, network, at, key, fragment, end);
    if fragment == Fragment::Later || !has_ports(key.proto) {
        return flow;
    }
    key.ports = be16(d, at).zip(be16(d, at + 2));
    flow.key = key;
    let header = match key.proto.0 {
        6 => {
            flow.tcp_flags = d.get(at + 13).map(|&f| TcpFlags(f));
            d.get(at + 12)
                .map(|b| usize::from(b >> 4) * 4)
                .filter(|&l| l >= 20)
        }
        17 => Some(8),
        _ => Some(12),
    };
    flow.payload = match header {
        Some(len) if at + len <= end => at + len,
        _ => end,
    };
    flow
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4 header (20 bytes) from `src` to `dst` with `proto`, `total` length and
    /// flags/fragment offset word `frag`.
    fn ipv4_header(proto: u8, total: u16, frag: u16) -> Vec<u8> {
        let mut h = vec![0x45, 0, 0, 0, 0, 1, 0, 0, 64, proto, 0, 0];
        h[2..4].copy_from_slice(&total.to_be_bytes());
        h[6..8].copy_from_slice(&frag.to_be_bytes());
        h.extend_from_slice(&[198, 18, 0, 1, 198, 18, 0, 2]);
        h
    }

    fn tcp_header(sport: u16, dport: u16, flags: u8) -> Vec<u8> {
        let mut t = vec![0; 20];
        t[0..2].copy_from_slice(&sport.to_be_bytes());
        t[2..4].copy_from_slice(&dport.to_be_bytes());
        t[12] = 5 << 4;
        t[13] = flags;
        t
    }

    fn ethernet(ethertype: u16) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
        f.extend_from_slice(&ethertype.to_be_bytes());
        f
    }

    fn tag(tpid_after: u16, vid: u16) -> Vec<u8> {
        let mut t = vid.to_be_bytes().to_vec();
        t.extend_from_slice(&tpid_after.to_be_bytes());
        t
    }

    /// An Ethernet frame with `tags` VLAN tags carrying IPv4/TCP with 3 bytes of payload, then
    /// 6 bytes of padding.
    fn tcp_frame(tags: usize) -> Vec<u8> {
        let mut f = ethernet(if tags == 0 { 0x0800 } else { 0x8100 });
        for i in 0..tags {
            let next = if i + 1 == tags { 0x0800 } else { 0x88a8 };
            f.extend(tag(next, 10 + i as u16));
        }
        f.extend(ipv4_header(6, 43, 0));
        f.extend(tcp_header(1234, 80, 0x18));
        f.extend_from_slice(b"abc");
        f.extend_from_slice(&[0; 6]);
        f
    }

    #[test]
    fn ipv4_tcp_over_ethernet() {
        let f = tcp_frame(0);
        let flow = parse(LinkType::ETHERNET, &f).unwrap();
        assert_eq!(flow.key.src, IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)));
        assert_eq!(flow.key.dst, IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)));
        assert_eq!(flow.key.proto, IpProtocol::TCP);
        assert_eq!(flow.key.ports, Some((1234, 80)));
        assert_eq!((flow.network, flow.transport, flow.payload), (14, 34, 54));
        assert_eq!(flow.end, 57, "the padding is not payload");
        assert_eq!(flow.payload(&f), b"abc");
        assert_eq!(flow.tcp_flags, Some(TcpFlags(0x18)));
        assert_eq!(flow.fragment, Fragment::No);
        assert_eq!(flow.vlan, None);
    }

    #[test]
    fn vlan_tags_any_number_in_software_two_in_a_nic() {
        for tags in 0..6 {
            let f = tcp_frame(tags);
            let flow = parse(LinkType::ETHERNET, &f).unwrap();
            assert_eq!(flow.vlan_tags as usize, tags);
            assert_eq!(flow.vlan, (tags > 0).then_some(10));
            assert_eq!(flow.key.ports, Some((1234, 80)));
            assert_eq!(flow.payload(&f), b"abc");
            let nic = parse_with(LinkType::ETHERNET, &f, &Options::NIC);
            assert_eq!(nic.is_some(), tags <= 2, "{tags} tags");
        }
        // A frame cut inside a tag has no key.
        let f = tcp_frame(1);
        assert_eq!(parse(LinkType::ETHERNET, &f[..16]), None);
    }

    #[test]
    fn mpls_and_pppoe() {
        let ip: Vec<u8> = [ipv4_header(17, 28, 0), vec![0, 53, 0, 53, 0, 8, 0, 0]].concat();
        let mut mpls = ethernet(0x8847);
        mpls.extend_from_slice(&[0, 0x10, 0x00, 64, 0, 0x20, 0x01, 64]);
        mpls.extend_from_slice(&ip);
        let flow = parse(LinkType::ETHERNET, &mpls).unwrap();
        assert_eq!((flow.mpls_labels, flow.network), (2, 22));
        assert_eq!(flow.key.ports, Some((53, 53)));
        assert_eq!(parse_with(LinkType::ETHERNET, &mpls, &Options::NIC), None);
        let mut pppoe = ethernet(0x8864);
        pppoe.extend_from_slice(&[0x11, 0, 0, 1, 0, 30, 0x00, 0x21]);
        pppoe.extend_from_slice(&ip);
        let flow = parse(LinkType::ETHERNET, &pppoe).unwrap();
        assert_eq!(flow.network, 22);
        assert_eq!(flow.key.proto, IpProtocol::UDP);
        assert_eq!(parse_with(LinkType::ETHERNET, &pppoe, &Options::NIC), None);
    }

    #[test]
    fn fragments() {
        let mut f = ethernet(0x0800);
        f.extend(ipv4_header(17, 28, 0x2000));
        f.extend_from_slice(&[0, 53, 0, 54, 0, 8, 0, 0]);
        let first = parse(LinkType::ETHERNET, &f).unwrap();
        assert_eq!(first.fragment, Fragment::First);
        assert_eq!(first.key.ports, Some((53, 54)));
        f[20] = 0x00;
        f[21] = 0x10;
        let later = parse(LinkType::ETHERNET, &f).unwrap();
        assert_eq!(later.fragment, Fragment::Later);
        assert_eq!(later.key.proto, IpProtocol::UDP);
        assert_eq!(later.key.ports, None);
        assert_eq!(later.payload, later.transport);
    }

    /// An IPv6 packet whose extension headers are `exts` (next header, whole header bytes),
    /// then UDP.
    fn ipv6_with(exts: &[(u8, Vec<u8>)]) -> Vec<u8> {
        let first = exts.first().map_or(17, |e| e.0);
        let mut body = Vec::new();
        for (i, (_, h)) in exts.iter().enumerate() {
            let mut h = h.clone();
            h[0] = exts.get(i + 1).map_or(17, |e| e.0);
            body.extend(h);
        }
        body.extend_from_slice(&[0x13, 0x88, 0, 53, 0, 8, 0, 0]);
        let mut p = vec![0x60, 0, 0, 0];
        p.extend_from_slice(&(body.len() as u16).to_be_bytes());
        p.extend_from_slice(&[first, 64]);
        p.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        p.extend_from_slice(&[0; 11]);
        p.push(1);
        p.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        p.extend_from_slice(&[0; 11]);
        p.push(2);
        p.extend(body);
        p
    }

    #[test]
    fn ipv6_extension_headers() {
        let hop = (0u8, vec![0u8; 8]);
        let frag_first = (44u8, vec![0, 0, 0, 1, 0, 0, 0, 7]);
        let ah = (51u8, vec![0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        let p = ipv6_with(&[hop.clone(), frag_first, ah]);
        let flow = parse(LinkType::RAW, &p).unwrap();
        assert_eq!(flow.key.proto, IpProtocol::UDP);
        assert_eq!(flow.key.ports, Some((5000, 53)));
        assert_eq!(flow.fragment, Fragment::First);
        assert_eq!(flow.transport, 40 + 8 + 8 + 12);
        assert_eq!(flow.end, p.len());
        // A later fragment: the fragment's next header, no ports.
        let later = ipv6_with(&[hop.clone(), (44, vec![0, 0, 0x01, 0x00, 0, 0, 0, 7])]);
        let flow = parse(LinkType::IPV6, &later).unwrap();
        assert_eq!((flow.key.proto, flow.key.ports), (IpProtocol::UDP, None));
        assert_eq!(flow.fragment, Fragment::Later);
        // A chain cut inside a header: the key stops at that header.
        let flow = parse(LinkType::RAW, &p[..40 + 8 + 4]).unwrap();
        assert_eq!((flow.key.proto, flow.key.ports), (IpProtocol(44), None));
        // Seven headers leave the transport reachable in a NIC, eight do not.
        for n in [7usize, 8] {
            let chain: Vec<(u8, Vec<u8>)> = (0..n).map(|_| hop.clone()).collect();
            let p = ipv6_with(&chain);
            let nic = parse_with(LinkType::RAW, &p, &Options::NIC).unwrap();
            assert_eq!(nic.key.ports.is_some(), n < 8, "{n} headers");
            assert_eq!(
                parse(LinkType::RAW, &p).unwrap().key.ports,
                Some((5000, 53))
            );
        }
        // Mobility is skipped in software only.
        let p = ipv6_with(&[(135, vec![0u8; 8])]);
        assert_eq!(
            parse(LinkType::RAW, &p).unwrap().key.ports,
            Some((5000, 53))
        );
        let nic = parse_with(LinkType::RAW, &p, &Options::NIC).unwrap();
        assert_eq!((nic.key.proto, nic.key.ports), (IpProtocol(135), None));
    }

    #[test]
    fn link_types() {
        let ip: Vec<u8> = [ipv4_header(6, 40, 0), tcp_header(1, 2, 0x02)].concat();
        let mut sll = vec![0u8; 14];
        sll.extend_from_slice(&0x0800u16.to_be_bytes());
        sll.extend_from_slice(&ip);
        let mut sll2 = 0x0800u16.to_be_bytes().to_vec();
        sll2.extend_from_slice(&[0; 18]);
        sll2.extend_from_slice(&ip);
        let null_le = [&[2u8, 0, 0, 0][..], &ip].concat();
        let loop_be = [&[0u8, 0, 0, 2][..], &ip].concat();
        for (link, data, at) in [
            (LinkType::LINUX_SLL, &sll, 16),
            (LinkType::LINUX_SLL2, &sll2, 20),
            (LinkType::NULL, &null_le, 4),
            (LinkType::LOOP, &loop_be, 4),
            (LinkType::RAW, &ip, 0),
            (LinkType::IPV4, &ip, 0),
        ] {
            let flow = parse(link, data).unwrap_or_else(|| panic!("{link}"));
            assert_eq!((flow.network, flow.key.ports), (at, Some((1, 2))), "{link}");
        }
        assert_eq!(parse(LinkType::IPV6, &ip), None, "the version is checked");
        assert_eq!(parse(LinkType::IEEE802_11, &ip), None);
    }

    #[test]
    fn truncation() {
        let f = tcp_frame(0);
        // The addresses must be there; the ports need four bytes; the payload what was captured.
        assert_eq!(parse(LinkType::ETHERNET, &f[..33]), None);
        let flow = parse(LinkType::ETHERNET, &f[..34]).unwrap();
        assert_eq!((flow.key.ports, flow.payload, flow.end), (None, 34, 34));
        let flow = parse(LinkType::ETHERNET, &f[..38]).unwrap();
        assert_eq!(flow.key.ports, Some((1234, 80)));
        assert_eq!((flow.tcp_flags, flow.payload, flow.end), (None, 38, 38));
        let flow = parse(LinkType::ETHERNET, &f[..55]).unwrap();
        assert_eq!(flow.payload(&f[..55]), b"a");
        // ARP is not IP.
        let arp = [ethernet(0x0806), vec![0; 28]].concat();
        assert_eq!(parse(LinkType::ETHERNET, &arp), None);
        let net = network_layer(LinkType::ETHERNET, &arp, &Options::SOFTWARE).unwrap();
        assert_eq!((net.ethertype, net.offset), (0x0806, 14));
    }

    #[test]
    fn symmetric_hash_is_the_same_both_ways() {
        let f = tcp_frame(0);
        let key = parse(LinkType::ETHERNET, &f).unwrap().key;
        assert_eq!(key.symmetric_hash(), key.reversed().symmetric_hash());
        let mut other = key;
        other.ports = Some((1235, 80));
        assert_ne!(key.symmetric_hash(), other.symmetric_hash());
    }

    #[test]
    fn random_bytes_never_panic_and_offsets_are_ordered() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let seeds = [tcp_frame(0), tcp_frame(3), ipv6_with(&[(0, vec![0u8; 8])])];
        for i in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut d = seeds[i % 3].clone();
            for _ in 0..(x % 4) {
                let at = (x >> 8) as usize % d.len();
                d[at] = (x >> 24) as u8;
                x = x.rotate_left(17);
            }
            d.truncate((x >> 40) as usize % (d.len() + 1));
            for link in [
                LinkType::ETHERNET,
                LinkType::RAW,
                LinkType::NULL,
                LinkType::LINUX_SLL2,
            ] {
                for opts in [&Options::SOFTWARE, &Options::NIC] {
                    if let Some(f) = parse_with(link, &d, opts) {
                        assert!(f.network <= f.transport);
                        assert!(f.payload <= f.end && f.end <= d.len(), "{f:?}");
                        let _ = f.payload(&d);
                    }
                }
            }
        }
    }
}
