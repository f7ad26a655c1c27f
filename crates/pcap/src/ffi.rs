//! The C types and constants of libpcap 1.10.3's API (`pcap/pcap.h`, `pcap/bpf.h`), laid out
//! exactly as C lays them out on Linux.

use std::ffi::{c_char, c_int, c_uint, c_ushort};

/// The size of the error buffers callers pass in and that [`crate::pcap_geterr`] returns.
pub const PCAP_ERRBUF_SIZE: usize = 256;

/// Generic error.
pub const PCAP_ERROR: c_int = -1;
/// The loop was ended by `pcap_breakloop` (also: end of a savefile for `pcap_next_ex`).
pub const PCAP_ERROR_BREAK: c_int = -2;
/// The handle has not been activated.
pub const PCAP_ERROR_NOT_ACTIVATED: c_int = -3;
/// The handle has already been activated.
pub const PCAP_ERROR_ACTIVATED: c_int = -4;
/// No such capture device.
pub const PCAP_ERROR_NO_SUCH_DEVICE: c_int = -5;
/// Monitor mode is not supported.
pub const PCAP_ERROR_RFMON_NOTSUP: c_int = -6;
/// The operation needs monitor mode.
pub const PCAP_ERROR_NOT_RFMON: c_int = -7;
/// No permission to capture.
pub const PCAP_ERROR_PERM_DENIED: c_int = -8;
/// The interface is down.
pub const PCAP_ERROR_IFACE_NOT_UP: c_int = -9;
/// Setting the time stamp type is not supported.
pub const PCAP_ERROR_CANTSET_TSTAMP_TYPE: c_int = -10;
/// No permission for promiscuous mode.
pub const PCAP_ERROR_PROMISC_PERM_DENIED: c_int = -11;
/// The time stamp precision is not supported.
pub const PCAP_ERROR_TSTAMP_PRECISION_NOTSUP: c_int = -12;

/// Generic warning.
pub const PCAP_WARNING: c_int = 1;
/// Promiscuous mode is not supported.
pub const PCAP_WARNING_PROMISC_NOTSUP: c_int = 2;
/// The requested time stamp type is not supported.
pub const PCAP_WARNING_TSTAMP_TYPE_NOTSUP: c_int = 3;

/// Microsecond time stamps.
pub const PCAP_TSTAMP_PRECISION_MICRO: c_int = 0;
/// Nanosecond time stamps.
pub const PCAP_TSTAMP_PRECISION_NANO: c_int = 1;

/// `pcap_direction_t`: both directions.
pub const PCAP_D_INOUT: c_int = 0;
/// `pcap_direction_t`: received packets.
pub const PCAP_D_IN: c_int = 1;
/// `pcap_direction_t`: sent packets.
pub const PCAP_D_OUT: c_int = 2;

/// `pcap_compile`'s netmask meaning "not known".
pub const PCAP_NETMASK_UNKNOWN: u32 = 0xffff_ffff;

/// `pcap_if_t` flag: a loopback interface.
pub const PCAP_IF_LOOPBACK: u32 = 0x0000_0001;
/// `pcap_if_t` flag: the interface is up.
pub const PCAP_IF_UP: u32 = 0x0000_0002;
/// `pcap_if_t` flag: the interface is running.
pub const PCAP_IF_RUNNING: u32 = 0x0000_0004;
/// `pcap_if_t` flag: a wireless interface.
pub const PCAP_IF_WIRELESS: u32 = 0x0000_0008;
/// `pcap_if_t` flag: connected.
pub const PCAP_IF_CONNECTION_STATUS_CONNECTED: u32 = 0x0000_0010;
/// `pcap_if_t` flag: disconnected.
pub const PCAP_IF_CONNECTION_STATUS_DISCONNECTED: u32 = 0x0000_0020;
/// `pcap_if_t` flag: connection status does not apply (loopback).
pub const PCAP_IF_CONNECTION_STATUS_NOT_APPLICABLE: u32 = 0x0000_0030;

/// `struct timeval` on Linux (64-bit `time_t` and `suseconds_t` on 64-bit targets).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timeval {
    /// Seconds.
    pub tv_sec: libc::time_t,
    /// Microseconds, or nanoseconds on a handle opened with nanosecond precision.
    pub tv_usec: libc::suseconds_t,
}

/// `struct pcap_pkthdr`: what the callback learns about each packet.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PcapPkthdr {
    /// Time stamp.
    pub ts: Timeval,
    /// Bytes present (after the snap length and the filter's cut).
    pub caplen: u32,
    /// Length of the packet on the wire.
    pub len: u32,
}

/// `struct pcap_stat` (Linux: the three common fields).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PcapStat {
    /// Packets received.
    pub ps_recv: c_uint,
    /// Packets dropped because there was no room in the buffer.
    pub ps_drop: c_uint,
    /// Packets dropped by the interface (not counted here: 0).
    pub ps_ifdrop: c_uint,
}

/// `struct bpf_insn`: one classic BPF instruction.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BpfInsn {
    /// Opcode.
    pub code: c_ushort,
    /// Jump offset if true.
    pub jt: u8,
    /// Jump offset if false.
    pub jf: u8,
    /// Constant.
    pub k: u32,
}

/// `struct bpf_program`: a compiled filter. The instructions are allocated with `malloc` by
/// [`crate::pcap_compile`] and released by [`crate::pcap_freecode`].
#[repr(C)]
#[derive(Debug)]
pub struct BpfProgram {
    /// Number of instructions.
    pub bf_len: c_uint,
    /// The instructions.
    pub bf_insns: *mut BpfInsn,
}

/// `struct pcap_addr` (`pcap_addr_t`): one address of an interface.
#[repr(C)]
#[derive(Debug)]
pub struct PcapAddr {
    /// The next address, or null.
    pub next: *mut PcapAddr,
    /// The address.
    pub addr: *mut libc::sockaddr,
    /// Its netmask, or null.
    pub netmask: *mut libc::sockaddr,
    /// Its broadcast address, or null.
    pub broadaddr: *mut libc::sockaddr,
    /// The destination address of a point-to-point link, or null.
    pub dstaddr: *mut libc::sockaddr,
}

/// `struct pcap_if` (`pcap_if_t`): one capture device.
#[repr(C)]
#[derive(Debug)]
pub struct PcapIf {
    /// The next device, or null.
    pub next: *mut PcapIf,
    /// Its name (`eth0`).
    pub name: *mut c_char,
    /// A description, or null.
    pub description: *mut c_char,
    /// Its addresses, or null.
    pub addresses: *mut PcapAddr,
    /// `PCAP_IF_*` flags.
    pub flags: u32,
}

/// `pcap_handler`: the callback of `pcap_loop` and `pcap_dispatch`.
pub type PcapHandler = Option<unsafe extern "C" fn(*mut u8, *const PcapPkthdr, *const u8)>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn layouts_match_c() {
        assert_eq!(size_of::<Timeval>(), 16);
        assert_eq!(size_of::<PcapPkthdr>(), 24);
        assert_eq!(offset_of!(PcapPkthdr, caplen), 16);
        assert_eq!(offset_of!(PcapPkthdr, len), 20);
        assert_eq!(size_of::<PcapStat>(), 12);
        assert_eq!(size_of::<BpfInsn>(), 8);
        assert_eq!(size_of::<BpfProgram>(), 16);
        assert_eq!(offset_of!(BpfProgram, bf_insns), 8);
        assert_eq!(size_of::<PcapIf>(), 40);
        assert_eq!(offset_of!(PcapIf, flags), 32);
        assert_eq!(size_of::<PcapAddr>(), 40);
    }
}
