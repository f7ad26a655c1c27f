//! What a filter is compiled for.

use netsift_capture::{ByteOrder, CaptureReader, Format, LinkType};
use netsift_lang::{Origin, Resolve};

/// libpcap's default snap length (`MAXIMUM_SNAPLEN`): what a filter returns for an accepted
/// packet when nothing smaller was asked for.
pub const DEFAULT_SNAPLEN: u32 = 262_144;

/// What a filter is compiled for: everything besides the expression that changes the program.
///
/// Built once where the packets come from — [`Target::for_capture`] for a capture file,
/// [`Target::live`] for an interface or a handle that reads none, [`Target::savefile`] for a
/// libpcap handle on a file — then adjusted with the `with_*` methods from the command line's
/// flags or the caller's arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    /// The link type of the packets.
    pub link_type: LinkType,
    /// What the filter returns for an accepted packet (`ret #snaplen`).
    pub snaplen: u32,
    /// A live capture or a capture file.
    pub origin: Origin,
    /// The IPv4 netmask `ip broadcast` needs; `None` is unknown (libpcap's
    /// `PCAP_NETMASK_UNKNOWN`).
    pub netmask: Option<u32>,
    /// Whether the program is optimised (`-O`, libpcap's `optimize` argument). Level 0 keeps
    /// every test libpcap's code generator emits, in its order.
    pub optimize: bool,
    /// How host names are resolved.
    pub resolve: Resolve,
}

impl Target {
    /// A live capture (or a handle that reads nothing, libpcap's `pcap_open_dead`) of
    /// `link_type` returning `snaplen`: optimised, no netmask, host names from `/etc/hosts`.
    pub fn live(link_type: LinkType, snaplen: u32) -> Target {
        Target {
            link_type,
            snaplen,
            origin: Origin::Live,
            netmask: None,
            optimize: true,
            resolve: Resolve::HostsFile,
        }
    }

    /// A capture file of `link_type` with snap length `snaplen`, whose byte order differs from
    /// this machine's when `swapped` (libpcap's savefile meanings).
    pub fn savefile(link_type: LinkType, snaplen: u32, swapped: bool) -> Target {
        Target {
            origin: Origin::Savefile { swapped },
            ..Target::live(link_type, snaplen)
        }
    }

    /// What a filter over `reader`'s packets is compiled for, as `tcpdump -r FILE` compiles
    /// it: the file's link type (Ethernet while a pcapng file has not named one), its snap
    /// length as libpcap 1.10.3 reads it ([`LinkType::savefile_snaplen`]: 0, none, or more
    /// than a C `int` holds is the link type's largest) and its byte order.
    pub fn for_capture<R>(reader: &CaptureReader<R>) -> Target {
        let swapped = match reader.format() {
            Format::Pcap { byte_order, .. } | Format::Pcapng { byte_order, .. } => {
                (byte_order == ByteOrder::Little) != cfg!(target_endian = "little")
            }
            _ => false,
        };
        let link_type = reader.link_type().unwrap_or(LinkType::ETHERNET);
        let snaplen = link_type.savefile_snaplen(reader.snaplen().unwrap_or(0));
        Target::savefile(link_type, snaplen, swapped)
    }

    /// The target with another link type.
    pub fn with_link_type(self, link_type: LinkType) -> Target {
        Target { link_type, ..self }
    }

    /// The target with another snap length.
    pub fn with_snaplen(self, snaplen: u32) -> Target {
        Target { snaplen, ..self }
    }

    /// The target optimised or not.
    pub fn with_optimize(self, optimize: bool) -> Target {
        Target { optimize, ..self }
    }

    /// The target with a netmask (`None` or all ones: unknown, as libpcap reads
    /// `PCAP_NETMASK_UNKNOWN`).
    pub fn with_netmask(self, netmask: Option<u32>) -> Target {
        Target {
            netmask: netmask.filter(|&m| m != u32::MAX),
            ..self
        }
    }

    /// The target resolving host names with `resolve`.
    pub fn with_resolve(self, resolve: Resolve) -> Target {
        Target { resolve, ..self }
    }

    /// The front end's context for this target.
    pub fn context(&self) -> netsift_lang::Context {
        netsift_lang::Context {
            link_type: self.link_type,
            snaplen: self.snaplen,
            origin: self.origin,
            netmask: self.netmask,
            resolve: self.resolve,
            optimize: self.optimize,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netsift_capture::{PcapWriter, Precision};

    fn file(snaplen: u32, link: LinkType) -> CaptureReader<std::io::Cursor<Vec<u8>>> {
        let mut buf = Vec::new();
        PcapWriter::new(&mut buf, link, snaplen, Precision::Micro)
            .unwrap()
            .flush()
            .unwrap();
        CaptureReader::new(std::io::Cursor::new(buf)).unwrap()
    }

    #[test]
    fn a_capture_file_gives_its_target() {
        let t = Target::for_capture(&file(65535, LinkType::LINUX_SLL));
        assert_eq!(t, Target::savefile(LinkType::LINUX_SLL, 65535, false));
        // As libpcap 1.10.3 reads a file's header: 0 and values that are negative as a C int
        // are the largest; others, even above 262144, are kept.
        for (header, snaplen) in [(0, 262_144), (300_000, 300_000), (1 << 31, 262_144)] {
            assert_eq!(
                Target::for_capture(&file(header, LinkType::ETHERNET)).snaplen,
                snaplen
            );
        }
    }

    #[test]
    fn flags_adjust_it() {
        let t = Target::live(LinkType::ETHERNET, 96)
            .with_optimize(false)
            .with_netmask(Some(u32::MAX))
            .with_link_type(LinkType::RAW)
            .with_resolve(Resolve::System);
        assert_eq!(t.netmask, None, "all ones is unknown");
        let c = t.context();
        assert_eq!(
            (c.link_type, c.snaplen, c.optimize, c.origin),
            (LinkType::RAW, 96, false, Origin::Live)
        );
    }
}
