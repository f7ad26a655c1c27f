//! IPv6 extension headers (RFC 8200, RFC 4302) and a bounded walker over
//! the extension-header chain.
//!
//! Views: [`Ipv6OptionsHeader`] (Hop-by-Hop and Destination Options share a
//! layout), [`Ipv6RoutingHeader`], [`Ipv6FragmentHeader`] and
//! [`AuthHeader`] (IPsec AH, whose length unit differs: `(len + 2) * 4`
//! bytes). [`ExtHeaders`] walks a chain from the IPv6 fixed header to the
//! upper-layer protocol; it is bounded and never panics on malformed chains.
//!
//! See the [crate documentation](crate) for the no-panic contract shared by
//! all views.

use crate::bytes::{be16, be32, clip, need, set_be16, set_be32};
use crate::error::{Error, Result};
use crate::ip::IpProtocol;
use crate::ipv6::Ipv6Address;

/// Length of a generic `(hdr_ext_len + 1) * 8` extension header from its
/// second byte.
fn generic_len(data: &[u8]) -> usize {
    (usize::from(data[1]) + 1) * 8
}

/// A view of a Hop-by-Hop or Destination Options header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6OptionsHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6OptionsHeader<T> {
    /// Wraps `buffer` without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6OptionsHeader { buffer }
    }

    /// Wraps `buffer` and runs [`Self::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let h = Self::new_unchecked(buffer);
        h.check_len()?;
        Ok(h)
    }

    /// Checks the two fixed bytes and the whole `(len + 1) * 8` header are
    /// present.
    pub fn check_len(&self) -> Result<()> {
        let d = self.buffer.as_ref();
        need(d, "ipv6 options", "header", 0, 2)?;
        need(d, "ipv6 options", "header", 0, generic_len(d))
    }

    /// Returns the wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Next header.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[0])
    }

    /// Header length in bytes, `(hdr_ext_len + 1) * 8`.
    pub fn header_len(&self) -> usize {
        generic_len(self.buffer.as_ref())
    }

    /// The raw option TLV bytes.
    pub fn options(&self) -> &[u8] {
        clip(self.buffer.as_ref(), 2, self.header_len())
    }

    /// Iterates over the option TLVs.
    pub fn options_iter(&self) -> Ipv6Options<'_> {
        Ipv6Options {
            data: self.options(),
            pos: 0,
            done: false,
        }
    }

    /// Bytes after this header.
    pub fn payload(&self) -> &[u8] {
        clip(self.buffer.as_ref(), self.header_len(), usize::MAX)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6OptionsHeader<T> {
    /// Sets the next header.
    pub fn set_next_header(&mut self, nh: IpProtocol) {
        self.buffer.as_mut()[0] = nh.0;
    }

    /// Sets the header length in bytes (a multiple of 8, at least 8).
    pub fn set_header_len(&mut self, len: usize) {
        self.buffer.as_mut()[1] = (len / 8).saturating_sub(1) as u8;
    }
}

/// One Hop-by-Hop / Destination option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ipv6Option<'a> {
    /// One byte of padding (type 0).
    Pad1,
    /// Multi-byte padding (type 1) with this many data bytes.
    PadN(usize),
    /// Router Alert (type 5) with its value.
    RouterAlert(u16),
    /// Jumbo Payload (type 0xc2) with the real payload length.
    JumboPayload(u32),
    /// Any other option, or a known one with an unexpected length.
    Other {
        /// Option type byte.
        kind: u8,
        /// Option data.
        data: &'a [u8],
    },
}

/// Iterator over option TLVs; yields an `Err` and stops when an option runs
/// past the end of the header.
#[derive(Debug, Clone)]
pub struct Ipv6Options<'a> {
    data: &'a [u8],
    pos: usize,
    done: bool,
}

impl<'a> Iterator for Ipv6Options<'a> {
    type Item = Result<Ipv6Option<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.pos >= self.data.len() {
            return None;
        }
        let rest = &self.data[self.pos..];
        let kind = rest[0];
        if kind == 0 {
            self.pos += 1;
            return Some(Ok(Ipv6Option::Pad1));
        }
        let Some(&len) = rest.get(1) else {
            self.done = true;
            return Some(Err(Error::truncated(
                "ipv6 options",
                "option",
                self.pos + 2,
                2,
                1,
            )));
        };
        let total = 2 + usize::from(len);
        if total > rest.len() {
            self.done = true;
            return Some(Err(Error::truncated(
                "ipv6 options",
                "option",
                self.pos + 2,
                total,
                rest.len(),
            )));
        }
        let data = &rest[2..total];
        self.pos += total;
        Some(Ok(match (kind, data.len()) {
            (1, n) => Ipv6Option::PadN(n),
            (5, 2) => Ipv6Option::RouterAlert(be16(data, 0)),
            (0xc2, 4) => Ipv6Option::JumboPayload(be32(data, 0)),
            _ => Ipv6Option::Other { kind, data },
        }))
    }
}

/// A view of a Routing header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6RoutingHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6RoutingHeader<T> {
    /// Wraps `buffer` without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6RoutingHeader { buffer }
    }

    /// Wraps `buffer` and runs [`Self::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let h = Self::new_unchecked(buffer);
        h.check_len()?;
        Ok(h)
    }

    /// Checks the four fixed bytes and the whole `(len + 1) * 8` header are
    /// present.
    pub fn check_len(&self) -> Result<()> {
        let d = self.buffer.as_ref();
        need(d, "ipv6 routing", "header", 0, 4)?;
        need(d, "ipv6 routing", "header", 0, generic_len(d))
    }

    /// Returns the wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Next header.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[0])
    }

    /// Header length in bytes.
    pub fn header_len(&self) -> usize {
        generic_len(self.buffer.as_ref())
    }

    /// Routing type (0 deprecated source route, 2 mobility, 3 RPL, 4 segment
    /// routing).
    pub fn routing_type(&self) -> u8 {
        self.buffer.as_ref()[2]
    }

    /// Segments left.
    pub fn segments_left(&self) -> u8 {
        self.buffer.as_ref()[3]
    }

    /// The type-specific data after the four fixed bytes.
    pub fn type_data(&self) -> &[u8] {
        clip(self.buffer.as_ref(), 4, self.header_len())
    }

    /// For routing types 0, 2 and 4 (whose address lists start at byte 8),
    /// the addresses in the header; empty for other types.
    pub fn addresses(&self) -> impl Iterator<Item = Ipv6Address> + '_ {
        let list = if matches!(self.routing_type(), 0 | 2 | 4) {
            clip(self.buffer.as_ref(), 8, self.header_len())
        } else {
            &[]
        };
        list.chunks_exact(16).filter_map(Ipv6Address::from_slice)
    }

    /// Bytes after this header.
    pub fn payload(&self) -> &[u8] {
        clip(self.buffer.as_ref(), self.header_len(), usize::MAX)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6RoutingHeader<T> {
    /// Sets the next header.
    pub fn set_next_header(&mut self, nh: IpProtocol) {
        self.buffer.as_mut()[0] = nh.0;
    }

    /// Sets the header length in bytes (a multiple of 8, at least 8).
    pub fn set_header_len(&mut self, len: usize) {
        self.buffer.as_mut()[1] = (len / 8).saturating_sub(1) as u8;
    }

    /// Sets the routing type.
    pub fn set_routing_type(&mut self, ty: u8) {
        self.buffer.as_mut()[2] = ty;
    }

    /// Sets segments left.
    pub fn set_segments_left(&mut self, n: u8) {
        self.buffer.as_mut()[3] = n;
    }
}

/// A view of a Fragment header (8 bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6FragmentHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6FragmentHeader<T> {
    /// Header length: 8 bytes.
    pub const HEADER_LEN: usize = 8;

    /// Wraps `buffer` without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6FragmentHeader { buffer }
    }

    /// Wraps `buffer` and runs [`Self::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let h = Self::new_unchecked(buffer);
        h.check_len()?;
        Ok(h)
    }

    /// Checks the 8-byte header is present.
    pub fn check_len(&self) -> Result<()> {
        need(
            self.buffer.as_ref(),
            "ipv6 fragment",
            "header",
            0,
            Self::HEADER_LEN,
        )
    }

    /// Returns the wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Header length (8).
    pub const fn header_len(&self) -> usize {
        Self::HEADER_LEN
    }

    /// Next header (of the reassembled packet's payload).
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[0])
    }

    /// Fragment offset in bytes (the 13-bit field × 8).
    pub fn frag_offset(&self) -> u16 {
        be16(self.buffer.as_ref(), 2) & 0xfff8
    }

    /// More Fragments flag.
    pub fn more_frags(&self) -> bool {
        self.buffer.as_ref()[3] & 0x01 != 0
    }

    /// Identification.
    pub fn ident(&self) -> u32 {
        be32(self.buffer.as_ref(), 4)
    }

    /// Bytes after this header (the fragment data).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[Self::HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6FragmentHeader<T> {
    /// Sets the next header.
    pub fn set_next_header(&mut self, nh: IpProtocol) {
        self.buffer.as_mut()[0] = nh.0;
    }

    /// Sets the fragment offset in bytes (multiple of 8).
    pub fn set_frag_offset(&mut self, offset: u16) {
        let d = self.buffer.as_mut();
        let v = be16(d, 2);
        set_be16(d, 2, (v & 0x0007) | (offset & 0xfff8));
    }

    /// Sets the More Fragments flag.
    pub fn set_more_frags(&mut self, on: bool) {
        let b = &mut self.buffer.as_mut()[3];
        *b = if on { *b | 1 } else { *b & !1 };
    }

    /// Sets the identification.
    pub fn set_ident(&mut self, ident: u32) {
        set_be32(self.buffer.as_mut(), 4, ident);
    }
}

/// A view of an IPsec Authentication Header (RFC 4302). Its length field
/// counts 4-byte units minus 2, unlike other extension headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> AuthHeader<T> {
    /// Length of the fixed part (next header to sequence number).
    pub const MIN_HEADER_LEN: usize = 12;

    /// Wraps `buffer` without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        AuthHeader { buffer }
    }

    /// Wraps `buffer` and runs [`Self::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let h = Self::new_unchecked(buffer);
        h.check_len()?;
        Ok(h)
    }

    /// Checks the 12 fixed bytes are present, the declared length covers
    /// them and the whole header (with ICV) fits in the buffer.
    pub fn check_len(&self) -> Result<()> {
        let d = self.buffer.as_ref();
        need(d, "ah", "header", 0, Self::MIN_HEADER_LEN)?;
        let hl = self.header_len();
        if hl < Self::MIN_HEADER_LEN {
            return Err(Error::malformed(
                "ah",
                "header length",
                1,
                Self::MIN_HEADER_LEN,
                hl,
            ));
        }
        need(d, "ah", "header", 0, hl)
    }

    /// Returns the wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Next header.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[0])
    }

    /// The raw payload length field (4-byte units minus 2).
    pub fn payload_len(&self) -> u8 {
        self.buffer.as_ref()[1]
    }

    /// Header length in bytes, `(payload_len + 2) * 4`.
    pub fn header_len(&self) -> usize {
        (usize::from(self.payload_len()) + 2) * 4
    }

    /// Security parameters index.
    pub fn spi(&self) -> u32 {
        be32(self.buffer.as_ref(), 4)
    }

    /// Sequence number.
    pub fn seq_number(&self) -> u32 {
        be32(self.buffer.as_ref(), 8)
    }

    /// Integrity check value.
    pub fn icv(&self) -> &[u8] {
        clip(
            self.buffer.as_ref(),
            Self::MIN_HEADER_LEN,
            self.header_len(),
        )
    }

    /// Bytes after this header.
    pub fn payload(&self) -> &[u8] {
        clip(self.buffer.as_ref(), self.header_len(), usize::MAX)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> AuthHeader<T> {
    /// Sets the next header.
    pub fn set_next_header(&mut self, nh: IpProtocol) {
        self.buffer.as_mut()[0] = nh.0;
    }

    /// Sets the header length in bytes (a multiple of 4, at least 12).
    pub fn set_header_len(&mut self, len: usize) {
        self.buffer.as_mut()[1] = (len / 4).saturating_sub(2) as u8;
    }

    /// Sets the SPI.
    pub fn set_spi(&mut self, spi: u32) {
        set_be32(self.buffer.as_mut(), 4, spi);
    }

    /// Sets the sequence number.
    pub fn set_seq_number(&mut self, seq: u32) {
        set_be32(self.buffer.as_mut(), 8, seq);
    }
}

/// One extension header found by [`ExtHeaders`]; its bytes have passed the
/// matching view's `check_len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtHeader<'a> {
    kind: IpProtocol,
    offset: usize,
    bytes: &'a [u8],
}

impl<'a> ExtHeader<'a> {
    /// Which extension header this is (the protocol number that announced
    /// it).
    pub const fn kind(&self) -> IpProtocol {
        self.kind
    }

    /// The next header it announces.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.bytes[0])
    }

    /// Offset of this header from the start of the walked data.
    pub const fn offset(&self) -> usize {
        self.offset
    }

    /// Header length in bytes.
    pub const fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Always `false`: an extension header has at least 8 bytes.
    pub const fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The header's bytes.
    pub const fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// A Hop-by-Hop / Destination Options view, if that is what this is.
    pub fn as_options(&self) -> Option<Ipv6OptionsHeader<&'a [u8]>> {
        matches!(
            self.kind,
            IpProtocol::IPV6_HOPOPTS | IpProtocol::IPV6_DSTOPTS
        )
        .then(|| Ipv6OptionsHeader::new_unchecked(self.bytes))
    }

    /// A Routing header view, if that is what this is.
    pub fn as_routing(&self) -> Option<Ipv6RoutingHeader<&'a [u8]>> {
        (self.kind == IpProtocol::IPV6_ROUTING)
            .then(|| Ipv6RoutingHeader::new_unchecked(self.bytes))
    }

    /// A Fragment header view, if that is what this is.
    pub fn as_fragment(&self) -> Option<Ipv6FragmentHeader<&'a [u8]>> {
        (self.kind == IpProtocol::IPV6_FRAGMENT)
            .then(|| Ipv6FragmentHeader::new_unchecked(self.bytes))
    }

    /// An Authentication Header view, if that is what this is.
    pub fn as_auth(&self) -> Option<AuthHeader<&'a [u8]>> {
        (self.kind == IpProtocol::AH).then(|| AuthHeader::new_unchecked(self.bytes))
    }
}

/// Walks an IPv6 extension-header chain, yielding each header until the
/// upper-layer protocol is reached.
///
/// The walk stops (the iterator ends) when the next header is not a
/// walkable extension header ([`IpProtocol::is_ipv6_extension`]), after a
/// Fragment header with a non-zero offset (what follows is fragment data,
/// not headers), after an error item (truncated or malformed header), or
/// after [`ExtHeaders::DEFAULT_LIMIT`] headers (an
/// [`ErrorKind::LimitExceeded`](crate::ErrorKind::LimitExceeded) item). It
/// never panics. Offsets in items and errors are relative to the walked
/// data.
#[derive(Debug, Clone)]
pub struct ExtHeaders<'a> {
    data: &'a [u8],
    next: IpProtocol,
    offset: usize,
    count: usize,
    limit: usize,
    done: bool,
    failed: bool,
    non_first_fragment: bool,
}

impl<'a> ExtHeaders<'a> {
    /// Default bound on the number of extension headers walked.
    pub const DEFAULT_LIMIT: usize = 16;

    /// Starts a walk over `data` (an IPv6 payload) whose first header is
    /// `first` (the fixed header's next header).
    pub fn new(first: IpProtocol, data: &'a [u8]) -> Self {
        ExtHeaders {
            data,
            next: first,
            offset: 0,
            count: 0,
            limit: Self::DEFAULT_LIMIT,
            done: false,
            failed: false,
            non_first_fragment: false,
        }
    }

    /// Changes the bound on the number of headers walked.
    #[must_use]
    pub fn with_limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    /// The protocol after the last header walked so far (after a complete
    /// walk: the upper-layer protocol, e.g. TCP, ICMPv6, ESP, No Next
    /// Header).
    pub const fn upper_protocol(&self) -> IpProtocol {
        self.next
    }

    /// Offset of the data after the last header walked so far.
    pub const fn upper_offset(&self) -> usize {
        self.offset
    }

    /// The data after the last header walked so far.
    pub fn upper_payload(&self) -> &'a [u8] {
        clip(self.data, self.offset, usize::MAX)
    }

    /// `true` when the walk ended at a Fragment header with a non-zero
    /// offset: the upper-layer header is in another fragment.
    pub const fn non_first_fragment(&self) -> bool {
        self.non_first_fragment
    }

    /// `true` when the walk ended with an error item.
    pub const fn failed(&self) -> bool {
        self.failed
    }

    /// Runs the walk to its end and returns the upper-layer protocol and its
    /// data, or the first error.
    pub fn into_upper_layer(mut self) -> Result<(IpProtocol, &'a [u8])> {
        for item in self.by_ref() {
            item?;
        }
        Ok((self.next, self.upper_payload()))
    }

    fn fail(&mut self, e: Error) -> Option<Result<ExtHeader<'a>>> {
        self.done = true;
        self.failed = true;
        Some(Err(e.offset_by(self.offset)))
    }
}

impl<'a> Iterator for ExtHeaders<'a> {
    type Item = Result<ExtHeader<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || !self.next.is_ipv6_extension() {
            self.done = true;
            return None;
        }
        if self.count >= self.limit {
            let seen = self.count + 1;
            return self.fail(Error::limit_exceeded(
                "ipv6",
                "extension headers",
                0,
                self.limit,
                seen,
            ));
        }
        let rest = clip(self.data, self.offset, usize::MAX);
        let kind = self.next;
        let checked = match kind {
            IpProtocol::IPV6_HOPOPTS | IpProtocol::IPV6_DSTOPTS => {
                let h = Ipv6OptionsHeader::new_unchecked(rest);
                h.check_len().map(|()| h.header_len())
            }
            IpProtocol::IPV6_ROUTING => {
                let h = Ipv6RoutingHeader::new_unchecked(rest);
                h.check_len().map(|()| h.header_len())
            }
            IpProtocol::IPV6_FRAGMENT => {
                let h = Ipv6FragmentHeader::new_unchecked(rest);
                h.check_len().map(|()| h.header_len())
            }
            IpProtocol::AH => {
                let h = AuthHeader::new_unchecked(rest);
                h.check_len().map(|()| h.header_len())
            }
            _ => need(rest, "ipv6 extension", "header", 0, 2)
                .and_then(|()| need(rest, "ipv6 extension", "header", 0, generic_len(rest)))
                .map(|()| generic_len(rest)),
        };
        let len = match checked {
            Ok(len) => len,
            Err(e) => return self.fail(e),
        };
        let header = ExtHeader {
            kind,
            offset: self.offset,
            bytes: &rest[..len],
        };
        self.count += 1;
        self.offset += len;
        self.next = header.next_header();
        if let Some(frag) = header.as_fragment() {
            if frag.frag_offset() != 0 {
                self.non_first_fragment = true;
                self.done = true;
            }
        }
        Some(Ok(header))
    }
}

impl core::iter::FusedIterator for ExtHeaders<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    /// HBH (router alert + PadN) -> Routing type 4 with one segment ->
    /// Fragment (offset 0, M) -> Destination Options (PadN) -> AH ->
    /// TCP (4 bytes of it).
    fn chain() -> Vec<u8> {
        let mut v = vec![
            // Hop-by-Hop: nh=Routing(43), len 0; RouterAlert(0); PadN 0.
            43, 0, 5, 2, 0, 0, 1, 0,
            // Routing: nh=Fragment(44), len 2 (24 bytes), type 4, segleft 1,
            // last entry 0, flags 0, tag 0, one address.
            44, 2, 4, 1, 0, 0, 0, 0,
        ];
        v.extend_from_slice(&"2001:db8::99".parse::<Ipv6Address>().unwrap().0);
        v.extend_from_slice(&[
            // Fragment: nh=DstOpts(60), offset 0, M=1, ident 0xdeadbeef.
            60, 0, 0x00, 0x01, 0xde, 0xad, 0xbe, 0xef,
            // DstOpts: nh=AH(51), len 0, PadN with 4 bytes.
            51, 0, 1, 4, 0, 0, 0, 0,
            // AH: nh=TCP, payload len 4 -> 24 bytes, SPI 0x100, seq 7, ICV.
            6, 4, 0, 0, 0, 0, 1, 0, 0, 0, 0, 7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
            // TCP start.
            0x01, 0xbb, 0xc8, 0x22,
        ]);
        v
    }

    #[test]
    fn walk_full_chain() {
        let data = chain();
        let mut walk = ExtHeaders::new(IpProtocol::IPV6_HOPOPTS, &data);
        let hs: Vec<_> = walk.by_ref().map(|h| h.unwrap()).collect();
        let kinds: Vec<_> = hs.iter().map(|h| h.kind()).collect();
        assert_eq!(
            kinds,
            [
                IpProtocol::IPV6_HOPOPTS,
                IpProtocol::IPV6_ROUTING,
                IpProtocol::IPV6_FRAGMENT,
                IpProtocol::IPV6_DSTOPTS,
                IpProtocol::AH
            ]
        );
        let offsets: Vec<_> = hs.iter().map(|h| h.offset()).collect();
        assert_eq!(offsets, [0, 8, 32, 40, 48]);
        assert_eq!(walk.upper_protocol(), IpProtocol::TCP);
        assert_eq!(walk.upper_offset(), 72);
        assert_eq!(walk.upper_payload(), &[0x01, 0xbb, 0xc8, 0x22]);
        assert!(!walk.non_first_fragment());
        assert!(!walk.failed());

        let hbh = hs[0].as_options().unwrap();
        assert_eq!(hbh.header_len(), 8);
        assert_eq!(hbh.next_header(), IpProtocol::IPV6_ROUTING);
        let opts: Vec<_> = hbh.options_iter().map(|o| o.unwrap()).collect();
        assert_eq!(opts, [Ipv6Option::RouterAlert(0), Ipv6Option::PadN(0)]);
        assert!(hs[0].as_routing().is_none());

        let rt = hs[1].as_routing().unwrap();
        assert_eq!(rt.routing_type(), 4);
        assert_eq!(rt.segments_left(), 1);
        assert_eq!(rt.header_len(), 24);
        assert_eq!(rt.type_data().len(), 20);
        let addrs: Vec<_> = rt.addresses().collect();
        assert_eq!(addrs.len(), 1);
        assert_eq!(addrs[0].to_string(), "2001:db8::99");

        let frag = hs[2].as_fragment().unwrap();
        assert_eq!(frag.frag_offset(), 0);
        assert!(frag.more_frags());
        assert_eq!(frag.ident(), 0xdead_beef);
        assert_eq!(frag.next_header(), IpProtocol::IPV6_DSTOPTS);

        let ah = hs[4].as_auth().unwrap();
        assert_eq!(ah.payload_len(), 4);
        assert_eq!(ah.header_len(), 24);
        assert_eq!(ah.spi(), 0x100);
        assert_eq!(ah.seq_number(), 7);
        assert_eq!(ah.icv(), &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        assert_eq!(hs[4].len(), 24);
        assert!(!hs[4].is_empty());
        assert_eq!(hs[4].bytes()[0], 6);

        let (proto, rest) = ExtHeaders::new(IpProtocol::IPV6_HOPOPTS, &data)
            .into_upper_layer()
            .unwrap();
        assert_eq!(proto, IpProtocol::TCP);
        assert_eq!(rest.len(), 4);
    }

    #[test]
    fn walk_malformed_length() {
        let mut data = chain();
        // Destination options claims 255 * 8 + 8 bytes.
        data[40 + 1] = 255;
        let mut walk = ExtHeaders::new(IpProtocol::IPV6_HOPOPTS, &data);
        let items: Vec<_> = walk.by_ref().collect();
        assert_eq!(items.len(), 4);
        assert!(items[..3].iter().all(|i| i.is_ok()));
        let err = items[3].unwrap_err();
        assert_eq!(
            err.to_string(),
            "ipv6 options header truncated at offset 40: needs 2048 bytes, 36 available"
        );
        assert!(walk.failed());
        assert_eq!(walk.next(), None);
        assert_eq!(walk.upper_protocol(), IpProtocol::IPV6_DSTOPTS);
        assert!(
            ExtHeaders::new(IpProtocol::IPV6_HOPOPTS, &data)
                .into_upper_layer()
                .is_err()
        );

        // AH with a length below its fixed part.
        let mut data = chain();
        data[48 + 1] = 0;
        let err = ExtHeaders::new(IpProtocol::IPV6_HOPOPTS, &data)
            .into_upper_layer()
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Malformed);
        assert_eq!(err.offset(), 49);
    }

    #[test]
    fn walk_stops_at_non_first_fragment_and_limit() {
        // Fragment with offset 1448 and nh=TCP: walk ends after it.
        let data = [6, 0, 0x05, 0xa8, 0, 0, 0, 1, 0xaa, 0xbb];
        let mut walk = ExtHeaders::new(IpProtocol::IPV6_FRAGMENT, &data);
        let h = walk.next().unwrap().unwrap();
        assert_eq!(h.as_fragment().unwrap().frag_offset(), 1448);
        assert_eq!(walk.next(), None);
        assert!(walk.non_first_fragment());
        assert_eq!(walk.upper_protocol(), IpProtocol::TCP);
        assert_eq!(walk.upper_payload(), &[0xaa, 0xbb]);

        // A loop of 20 destination-options headers pointing at each other.
        let data: Vec<u8> = (0..20).flat_map(|_| [60u8, 0, 1, 4, 0, 0, 0, 0]).collect();
        let items: Vec<_> = ExtHeaders::new(IpProtocol::IPV6_DSTOPTS, &data).collect();
        assert_eq!(items.len(), 17);
        let err = items[16].unwrap_err();
        assert_eq!(err.kind(), ErrorKind::LimitExceeded);
        assert_eq!(err.offset(), 128);
        let items: Vec<_> = ExtHeaders::new(IpProtocol::IPV6_DSTOPTS, &data)
            .with_limit(2)
            .collect();
        assert_eq!(items.len(), 3);

        // Not an extension header: nothing to walk.
        let mut walk = ExtHeaders::new(IpProtocol::UDP, &data);
        assert_eq!(walk.next(), None);
        assert_eq!(walk.upper_offset(), 0);
        // Empty data with an extension header announced.
        let items: Vec<_> = ExtHeaders::new(IpProtocol::IPV6_HOPOPTS, &[]).collect();
        assert_eq!(items.len(), 1);
        assert!(items[0].is_err());
        // Unknown-but-generic extension (Mobility) truncated after 1 byte.
        let items: Vec<_> = ExtHeaders::new(IpProtocol::MOBILITY, &[59]).collect();
        assert_eq!(
            items[0].unwrap_err().to_string(),
            "ipv6 extension header truncated at offset 0: needs 2 bytes, 1 available"
        );
        let (p, _) = ExtHeaders::new(IpProtocol::MOBILITY, &[59, 0, 0, 0, 0, 0, 0, 0])
            .into_upper_layer()
            .unwrap();
        assert_eq!(p, IpProtocol::IPV6_NONXT);
    }

    #[test]
    fn options_iter_malformed() {
        // Pad1, jumbo, then an option claiming 9 data bytes.
        let hdr = [
            59, 1, 0, 0xc2, 4, 0, 1, 0, 0, 0x3e, 9, 1, 2, 3, 4, 5, //
        ];
        let h = Ipv6OptionsHeader::new_checked(&hdr[..]).unwrap();
        let items: Vec<_> = h.options_iter().collect();
        assert_eq!(items.len(), 3);
        assert_eq!(items[0], Ok(Ipv6Option::Pad1));
        assert_eq!(items[1], Ok(Ipv6Option::JumboPayload(65536)));
        assert_eq!(items[2].unwrap_err().kind(), ErrorKind::Truncated);
        // Type byte with no length byte.
        let hdr = [59, 0, 1, 3, 0, 0, 0, 0x3e];
        let h = Ipv6OptionsHeader::new_checked(&hdr[..]).unwrap();
        let items: Vec<_> = h.options_iter().collect();
        assert_eq!(items.len(), 2);
        assert_eq!(items[0], Ok(Ipv6Option::PadN(3)));
        assert!(items[1].is_err());
        // Odd known option length -> Other.
        let hdr = [59, 0, 5, 1, 9, 0, 1, 0];
        let h = Ipv6OptionsHeader::new_checked(&hdr[..]).unwrap();
        let first = h.options_iter().next().unwrap().unwrap();
        assert_eq!(
            first,
            Ipv6Option::Other {
                kind: 5,
                data: &[9]
            }
        );
    }

    #[test]
    fn setters_round_trip() {
        let mut buf = [0u8; 24];
        let mut o = Ipv6OptionsHeader::new_unchecked(&mut buf[..]);
        o.set_next_header(IpProtocol::UDP);
        o.set_header_len(16);
        assert_eq!(o.header_len(), 16);
        assert_eq!(o.payload().len(), 8);
        assert_eq!(o.next_header(), IpProtocol::UDP);

        let mut r = Ipv6RoutingHeader::new_unchecked(&mut buf[..]);
        r.set_next_header(IpProtocol::TCP);
        r.set_header_len(24);
        r.set_routing_type(2);
        r.set_segments_left(1);
        assert!(r.check_len().is_ok());
        assert_eq!(r.routing_type(), 2);
        assert_eq!(r.segments_left(), 1);
        assert_eq!(r.addresses().count(), 1);
        assert!(r.payload().is_empty());
        assert_eq!(r.into_inner().len(), 24);

        let mut f = Ipv6FragmentHeader::new_unchecked(&mut buf[..8]);
        f.set_next_header(IpProtocol::UDP);
        f.set_frag_offset(2960);
        f.set_more_frags(true);
        f.set_ident(42);
        assert_eq!(f.frag_offset(), 2960);
        assert!(f.more_frags());
        f.set_more_frags(false);
        assert!(!f.more_frags());
        assert_eq!(f.ident(), 42);
        assert_eq!(f.header_len(), 8);
        assert!(f.payload().is_empty());

        let mut a = AuthHeader::new_unchecked(&mut buf[..]);
        a.set_next_header(IpProtocol::ICMPV6);
        a.set_header_len(24);
        a.set_spi(0x1234_5678);
        a.set_seq_number(9);
        assert!(a.check_len().is_ok());
        assert_eq!(a.header_len(), 24);
        assert_eq!(a.spi(), 0x1234_5678);
        assert_eq!(a.seq_number(), 9);
        assert_eq!(a.icv().len(), 12);
        assert!(a.payload().is_empty());
    }

    #[test]
    fn check_len_errors() {
        assert_eq!(
            Ipv6FragmentHeader::new_checked(&[0u8; 7][..])
                .unwrap_err()
                .to_string(),
            "ipv6 fragment header truncated at offset 0: needs 8 bytes, 7 available"
        );
        assert!(Ipv6RoutingHeader::new_checked(&[0u8; 3][..]).is_err());
        assert!(Ipv6RoutingHeader::new_checked(&[0u8, 1, 0, 0, 0, 0, 0, 0][..]).is_err());
        assert!(Ipv6OptionsHeader::new_checked(&[0u8][..]).is_err());
        assert_eq!(
            AuthHeader::new_checked(&[0u8; 12][..])
                .unwrap_err()
                .to_string(),
            "ah header length malformed at offset 1: must be at least 12, is 8"
        );
    }
}
