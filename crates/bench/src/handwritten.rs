//! The Swift paper's Table 5 filters written by hand in Rust: the "Opt-C" baseline the JIT is
//! measured against. Each function returns what the compiled filter returns (the snap length or
//! 0) on complete packets and on packets cut short, reading fields in the order the filter does;
//! the benchmark checks that on every packet before timing.

/// What an accepting filter returns (libpcap's default snap length).
pub const SNAP: u32 = 262_144;

#[inline(always)]
fn be16(p: &[u8], o: usize) -> Option<u32> {
    let b = p.get(o..o + 2)?;
    Some(u32::from(u16::from_be_bytes([b[0], b[1]])))
}

#[inline(always)]
fn be32(p: &[u8], o: usize) -> Option<u32> {
    let b = p.get(o..o + 4)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

#[inline(always)]
fn verdict(v: Option<bool>) -> u32 {
    if v == Some(true) { SNAP } else { 0 }
}

/// The 38 hosts of filter 6, sorted.
pub const HOSTS: [u32; 38] = {
    let mut h = [0u32; 38];
    let mut i = 0;
    while i < 38 {
        h[i] = (10 << 24) | (1 << 16) | ((i as u32 / 10) << 8) | (10 + i as u32);
        i += 1;
    }
    h
};

/// 1: accept everything.
pub fn f1(_p: &[u8]) -> u32 {
    SNAP
}

/// 2: `ip`.
pub fn f2(p: &[u8]) -> u32 {
    verdict(be16(p, 12).map(|t| t == 0x0800))
}

/// 3: `ip src net 192.168.2.0/24 and dst net 10.0.0.0/8`.
pub fn f3(p: &[u8]) -> u32 {
    verdict((|| {
        if be16(p, 12)? != 0x0800 || be32(p, 26)? & 0xffff_ff00 != 0xc0a8_0200 {
            return Some(false);
        }
        Some(be32(p, 30)? & 0xff00_0000 == 0x0a00_0000)
    })())
}

/// 4: `ip src or dst net 192.168.2.0/24`.
pub fn f4(p: &[u8]) -> u32 {
    verdict((|| {
        if be16(p, 12)? != 0x0800 {
            return Some(false);
        }
        if be32(p, 26)? & 0xffff_ff00 == 0xc0a8_0200 {
            return Some(true);
        }
        Some(be32(p, 30)? & 0xffff_ff00 == 0xc0a8_0200)
    })())
}

/// IPv4 TCP, not a later fragment: the offset of the TCP header.
#[inline(always)]
fn tcp_header(p: &[u8]) -> Option<Option<usize>> {
    if p.get(23)? != &6 || be16(p, 20)? & 0x1fff != 0 {
        return Some(None);
    }
    Some(Some(14 + usize::from(p.get(14)? & 0xf) * 4))
}

/// 5: `ip and tcp port (ssh or http or imap or smtp or pop3 or ftp)`.
pub fn f5(p: &[u8]) -> u32 {
    let port = |v: u32| matches!(v, 22 | 80 | 143 | 25 | 110 | 21);
    verdict((|| {
        if be16(p, 12)? != 0x0800 {
            return Some(false);
        }
        let Some(t) = tcp_header(p)? else {
            return Some(false);
        };
        if port(be16(p, t)?) {
            return Some(true);
        }
        Some(port(be16(p, t + 2)?))
    })())
}

/// 6: `ip and (not tcp port (80 or 25 or 143) and not ip host (A1 or … or A38))`.
pub fn f6(p: &[u8]) -> u32 {
    let port = |v: u32| matches!(v, 80 | 25 | 143);
    verdict((|| {
        if be16(p, 12)? != 0x0800 {
            return Some(false);
        }
        if let Some(t) = tcp_header(p)?
            && (port(be16(p, t)?) || port(be16(p, t + 2)?))
        {
            return Some(false);
        }
        if HOSTS.binary_search(&be32(p, 26)?).is_ok() {
            return Some(false);
        }
        Some(HOSTS.binary_search(&be32(p, 30)?).is_err())
    })())
}

/// The functions in Table 5 order.
pub const ALL: [fn(&[u8]) -> u32; 6] = [f1, f2, f3, f4, f5, f6];
